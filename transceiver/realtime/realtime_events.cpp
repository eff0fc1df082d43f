// realtime_events.cpp — see realtime_events.h.
#include "realtime_events.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "json_depth.h"
#include "random.h"

namespace rtce {
namespace {

using json = nlohmann::json;

constexpr const char* kClientEventTypes[] = {RTCE_REALTIME_CLIENT_EVENTS(RTCE_VOCAB_MESSAGE_TEXT)};
constexpr const char* kDropMessages[] = {RTCE_REALTIME_DROPS(RTCE_VOCAB_MESSAGE_TEXT)};
// The error.code of a session.update that was applied except for some fields.
constexpr const char* kUnsupportedFieldCode = "unsupported_session_field";
// Client-supplied text quoted back in an error message is cut to this.
constexpr size_t kMaxQuotedChars = 100;

std::optional<RealtimeClientEvent> client_event_of(std::string_view type) {
  for (size_t i = 0; i < std::size(kClientEventTypes); ++i) {
    if (type == kClientEventTypes[i]) return static_cast<RealtimeClientEvent>(i);
  }
  return std::nullopt;
}

// Backend events may carry strings that are not UTF-8; they are repaired, not thrown on.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string cut_quote(std::string_view text) {
  std::string out(text.substr(0, kMaxQuotedChars));
  if (text.size() > kMaxQuotedChars) out += "...";
  return out;
}

json string_or_null(const json& object, const char* key) {
  if (object.is_object()) {
    auto it = object.find(key);
    if (it != object.end() && it->is_string()) return *it;
  }
  return nullptr;
}

json default_turn_detection(std::string_view type) {
  if (type == "semantic_vad") {
    return {{"type", "semantic_vad"},
            {"eagerness", "auto"},
            {"create_response", true},
            {"interrupt_response", true}};
  }
  return {{"type", "server_vad"},       {"threshold", 0.5},           {"prefix_padding_ms", 300},
          {"silence_duration_ms", 500}, {"idle_timeout_ms", nullptr}, {"create_response", true},
          {"interrupt_response", true}};
}

// What a session.update asked for and did not get: "session.x (why)" items, one error.
class Problems {
 public:
  void add(const std::string& path, std::string_view why) {
    if (text_.empty()) first_param_ = path;
    if (!text_.empty()) text_ += "; ";
    text_ += cut_quote(path);
    text_ += " (";
    text_ += why;
    text_ += ")";
  }
  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }
  const std::string& first_param() const { return first_param_; }

 private:
  std::string text_;
  std::string first_param_;
};

// Who a session update comes from. The call's initial config and a sideband speak for the app
// server (they may set the data-channel policy); a field a sideband set is the app server's,
// and the browser can no longer change it.
enum class UpdateOrigin { initial, browser, sideband };

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A server event type as a policy may name it: "response.output_text.delta".
bool plausible_event_type(const json& value) {
  if (!value.is_string()) return false;
  const auto& type = value.get_ref<const std::string&>();
  return !type.empty() && type.size() <= 64 &&
         type.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._") == std::string::npos;
}

class SessionMerger {
 public:
  SessionMerger(const RealtimeEventChannel::Limits& limits, Problems& problems, UpdateOrigin origin,
                std::vector<std::string>& app_server_fields)
      : limits_(limits), problems_(problems), origin_(origin), app_server_fields_(app_server_fields) {}

  // What the update set, as it was applied: the client's fields minus the refused, unknown
  // and read-only ones, fall-backs as applied (a session.update a Realtime server accepts).
  json& accepted() { return accepted_; }

  void apply(json& session, const json& update) {
    for (const auto& [key, value] : update.items()) {
      const std::string path = "session." + key;
      if (refused_to_browser(path)) continue;
      if (key == "type") {
        if (value != "realtime") problems_.add(path, "only \"realtime\" sessions are served here");
        accept(path, "realtime");
      } else if (key == "id" || key == "object" || key == "expires_at" || key == "client_secret") {
        // Read-only fields a client may echo back from session.created: nothing to apply.
      } else if (key == "model" || key == "instructions") {
        set_string(session[key], value, path);
      } else if (key == "output_modalities") {
        set_modalities(session[key], value, path);
      } else if (key == "tools") {
        set_if(session[key], value, path, value.is_array(), "must be an array");
      } else if (key == "tool_choice") {
        set_if(session[key], value, path, value.is_string() || value.is_object(),
               "must be a string or an object");
      } else if (key == "tracing") {
        set_if(session[key], value, path, value.is_null() || value == "auto" || value.is_object(),
               "must be null, \"auto\" or an object");
      } else if (key == "max_output_tokens") {
        set_if(session[key], value, path,
               value == "inf" ||
                   (value.is_number_integer() && value.get<int64_t>() >= 1 && value.get<int64_t>() <= 4096),
               "must be 1..4096 or \"inf\"");
      } else if (key == "prompt") {
        set_if(session[key], value, path, value.is_null() || value.is_object(), "must be null or an object");
      } else if (key == "truncation") {
        set_if(session[key], value, path, value.is_string() || value.is_object(),
               "must be a string or an object");
      } else if (key == "include") {
        set_if(session[key], value, path, value.is_null() || value.is_array(), "must be null or an array");
      } else if (key == "audio") {
        if (!value.is_object()) {
          problems_.add(path, "must be an object");
        } else {
          apply_audio(session["audio"], value);
        }
      } else if (key == "client") {
        if (origin_ == UpdateOrigin::browser) {
          problems_.add(path, "set by the app server only");
        } else if (!value.is_object()) {
          problems_.add(path, "must be an object");
        } else {
          apply_client(session["client"], value);
        }
      } else {
        problems_.add(path, "unknown field");
      }
    }
  }

 private:
  // A field a sideband set: the browser's change of it is reported, not applied.
  bool refused_to_browser(const std::string& path) {
    if (origin_ != UpdateOrigin::browser || !contains(app_server_fields_, path)) return false;
    problems_.add(path, "set by the app server");
    return true;
  }

  // client.data_channel.allowed_client_events / allowed_server_events: null (everything) or
  // a list; a list with anything wrong in it is not applied at all.
  void apply_client(json& client, const json& update) {
    if (!client.is_object()) client = json::object();
    for (const auto& [key, value] : update.items()) {
      const std::string path = "session.client." + key;
      if (key != "data_channel") {
        problems_.add(path, "unknown field");
      } else if (!value.is_object()) {
        problems_.add(path, "must be an object");
      } else {
        apply_data_channel(client["data_channel"], value);
      }
    }
  }

  void apply_data_channel(json& channel, const json& update) {
    if (!channel.is_object()) channel = json::object();
    for (const auto& [key, value] : update.items()) {
      const std::string path = "session.client.data_channel." + key;
      const bool client_events = key == "allowed_client_events";
      if (!client_events && key != "allowed_server_events") {
        problems_.add(path, "unknown field");
        continue;
      }
      bool ok = value.is_null() || (value.is_array() && value.size() <= kMaxAllowedServerEvents);
      for (size_t i = 0; ok && value.is_array() && i < value.size(); ++i) {
        ok = client_events ? value[i].is_string() && client_event_of(value[i].get_ref<const std::string&>())
                           : plausible_event_type(value[i]);
      }
      set_if(channel[key], value, path, ok,
             client_events ? "must be null or an array of client event types"
                           : "must be null or an array of at most 64 server event types");
    }
  }

  void apply_audio(json& audio, const json& update) {
    if (!audio.is_object()) audio = json::object();
    for (const auto& [key, value] : update.items()) {
      const std::string path = "session.audio." + key;
      if (refused_to_browser(path)) continue;
      if (key != "input" && key != "output") {
        problems_.add(path, "unknown field");
      } else if (!value.is_object()) {
        problems_.add(path, "must be an object");
      } else if (key == "input") {
        apply_input(audio["input"], value);
      } else {
        apply_output(audio["output"], value);
      }
    }
  }

  void apply_input(json& input, const json& update) {
    if (!input.is_object()) input = json::object();
    for (const auto& [key, value] : update.items()) {
      const std::string path = "session.audio.input." + key;
      if (refused_to_browser(path)) continue;
      if (key == "format") {
        set_format(input[key], value, path);
      } else if (key == "noise_reduction") {
        set_optional_feature(input[key], value, path, limits_.noise_reduction_supported,
                             "this backend does no noise reduction");
      } else if (key == "transcription") {
        set_optional_feature(input[key], value, path, limits_.transcription_supported,
                             "this backend does not transcribe");
      } else if (key == "turn_detection") {
        set_turn_detection(input[key], value, path);
      } else {
        problems_.add(path, "unknown field");
      }
    }
  }

  // A feature object or null: an object for a feature the backend lacks is refused and
  // the field set to null.
  void set_optional_feature(json& field, const json& value, const std::string& path, bool supported,
                            const char* unsupported) {
    if (!value.is_null() && !value.is_object()) {
      problems_.add(path, "must be null or an object");
    } else if (!value.is_null() && !supported) {
      problems_.add(path, unsupported);
      field = nullptr;
    } else {
      field = value;
      accept(path, value);
    }
  }

  void apply_output(json& output, const json& update) {
    if (!output.is_object()) output = json::object();
    for (const auto& [key, value] : update.items()) {
      const std::string path = "session.audio.output." + key;
      if (refused_to_browser(path)) continue;
      if (key == "format") {
        set_format(output[key], value, path);
      } else if (key == "voice") {
        set_string(output[key], value, path);
      } else if (key == "speed") {
        set_if(output[key], value, path,
               value.is_number() && value.get<double>() >= 0.25 && value.get<double>() <= 1.5,
               "must be a number from 0.25 to 1.5");
      } else {
        problems_.add(path, "unknown field");
      }
    }
  }

  // The format is meaningless over WebRTC (audio is Opus on RTP either way) but harmless:
  // a valid one is kept so the client reads back what it set.
  void set_format(json& target, const json& value, const std::string& path) {
    const json type = string_or_null(value, "type");
    const bool known = type == "audio/pcm" || type == "audio/pcmu" || type == "audio/pcma";
    if (!known) {
      problems_.add(path, "must be {\"type\":\"audio/pcm\",\"rate\":24000}, audio/pcmu or audio/pcma");
      return;
    }
    json format = {{"type", type}};
    for (const auto& [key, field] : value.items()) {
      if (key == "type") continue;
      if (key == "rate" && type == "audio/pcm" && field == 24000) {
        format["rate"] = 24000;
      } else {
        problems_.add(path + "." + key, key == "rate" ? "audio/pcm is 24000 Hz" : "unknown field");
      }
    }
    if (type == "audio/pcm") format["rate"] = 24000;
    accept(path, format);
    target = std::move(format);
  }

  void set_turn_detection(json& target, const json& value, const std::string& path) {
    if (value.is_null()) {
      target = nullptr;
      accept(path, nullptr);
      return;
    }
    const json type = string_or_null(value, "type");
    if (type != "server_vad" && type != "semantic_vad") {
      problems_.add(path, "must be null or an object with type server_vad or semantic_vad");
      return;
    }
    std::string applied = type.get<std::string>();
    if (applied == "semantic_vad" && !limits_.semantic_vad_supported) {
      problems_.add(path + ".type", "semantic_vad is not available here; server_vad is used");
      applied = "server_vad";
    }
    json td =
        target.is_object() && target.value("type", "") == applied ? target : default_turn_detection(applied);
    const bool server = applied == "server_vad";
    for (const auto& [key, field] : value.items()) {
      const std::string field_path = path + "." + key;
      if (key == "type") continue;
      if (key == "create_response" || key == "interrupt_response") {
        set_if(td[key], field, field_path, field.is_boolean(), "must be a boolean");
      } else if (key == "eagerness" && type == "semantic_vad") {
        // After a fall back to server_vad there is nothing to set (the fall back is reported).
        if (!server) {
          set_if(td[key], field, field_path,
                 field == "low" || field == "medium" || field == "high" || field == "auto",
                 "must be low, medium, high or auto");
        }
      } else if (server && key == "threshold") {
        set_if(td[key], field, field_path,
               field.is_number() && field.get<double>() >= 0.0 && field.get<double>() <= 1.0,
               "must be a number from 0 to 1");
      } else if (server && (key == "prefix_padding_ms" || key == "silence_duration_ms")) {
        set_if(td[key], field, field_path, field.is_number_unsigned(), "must be a whole number of ms");
      } else if (server && key == "idle_timeout_ms") {
        set_if(td[key], field, field_path, field.is_null() || field.is_number_unsigned(),
               "must be null or a whole number of ms");
      } else {
        problems_.add(field_path, "unknown field");
      }
    }
    accept(path, td);
    target = std::move(td);
  }

  void set_string(json& target, const json& value, const std::string& path) {
    if (value.is_null()) return;  // "leave it as it is", as clients send for unset options
    set_if(target, value, path, value.is_string(), "must be a string");
  }

  void set_modalities(json& target, const json& value, const std::string& path) {
    bool ok = value.is_array() && !value.empty();
    if (ok) {
      for (const json& m : value) ok = ok && (m == "audio" || m == "text");
    }
    set_if(target, value, path, ok, "must be a non-empty array of \"audio\" and \"text\"");
  }

  void set_if(json& target, const json& value, const std::string& path, bool ok, std::string_view why) {
    if (ok) {
      target = value;
      accept(path, value);
    } else {
      problems_.add(path, why);
    }
  }

  // Records an applied field at its place in accepted_ ("session.audio.input.format" ->
  // /audio/input/format). Only known keys get here, and none holds a '.' or a '/'.
  void accept(const std::string& path, const json& value) {
    // session.type is always "realtime": every GA client sends it, and owning it would refuse
    // each of the browser's updates.
    if (origin_ == UpdateOrigin::sideband && path != "session.type" && !contains(app_server_fields_, path))
      app_server_fields_.push_back(path);
    std::string pointer = path.substr(std::string_view("session").size());
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    accepted_[json::json_pointer(pointer)] = value;
  }

  const RealtimeEventChannel::Limits& limits_;
  Problems& problems_;
  const UpdateOrigin origin_;
  std::vector<std::string>& app_server_fields_;
  json accepted_ = json::object();
};

}  // namespace

std::string_view realtime_client_event_type(RealtimeClientEvent event) {
  return vocab_name(kClientEventTypes, event);
}
std::string_view realtime_drop_name(RealtimeDrop drop) { return vocab_name(kRealtimeDropNames, drop); }
std::string_view realtime_drop_message(RealtimeDrop drop) { return vocab_name(kDropMessages, drop); }

json default_realtime_session() {
  const json pcm = {{"type", "audio/pcm"}, {"rate", 24000}};
  return {
      {"type", "realtime"},
      {"object", "realtime.session"},
      {"id", ""},
      {"model", "rtcedge"},
      {"output_modalities", {"audio"}},
      {"instructions", ""},
      {"tools", json::array()},
      {"tool_choice", "auto"},
      {"max_output_tokens", "inf"},
      {"tracing", nullptr},
      {"prompt", nullptr},
      {"truncation", "auto"},
      {"include", nullptr},
      {"audio",
       {{"input",
         {{"format", pcm},
          {"transcription", nullptr},
          {"noise_reduction", nullptr},
          {"turn_detection", default_turn_detection("server_vad")}}},
        {"output", {{"format", pcm}, {"voice", "alloy"}, {"speed", 1.0}}}}},
  };
}

bool DataChannelPolicy::allows_server(std::string_view type) const {
  return !allowed_server_events || contains(*allowed_server_events, type);
}

bool DataChannelPolicy::hides_tool_calls() const {
  return allowed_server_events && !allows_server("response.function_call_arguments.done");
}

namespace {

bool is_tool_item(const json& item) {
  if (!item.is_object()) return false;
  auto type = item.find("type");
  return type != item.end() && (*type == "function_call" || *type == "function_call_output");
}

}  // namespace

std::optional<json> without_tool_calls(const json& event) {
  if (auto item = event.find("item"); item != event.end() && is_tool_item(*item)) return json(nullptr);
  auto response = event.find("response");
  if (response == event.end() || !response->is_object()) return std::nullopt;
  auto output = response->find("output");
  if (output == response->end() || !output->is_array() ||
      std::none_of(output->begin(), output->end(), is_tool_item))
    return std::nullopt;
  json shown = event;
  json& kept = shown["response"]["output"];
  kept.erase(std::remove_if(kept.begin(), kept.end(), is_tool_item), kept.end());
  return shown;
}

namespace {

DataChannelPolicy policy_of(const json& session) {
  DataChannelPolicy policy;
  const json* channel = nullptr;
  if (auto client = session.find("client"); client != session.end() && client->is_object()) {
    if (auto dc = client->find("data_channel"); dc != client->end() && dc->is_object()) channel = &*dc;
  }
  if (!channel) return policy;
  // Only validated lists get into the session (SessionMerger::apply_data_channel).
  if (auto list = channel->find("allowed_client_events"); list != channel->end() && list->is_array()) {
    uint32_t mask = 0;
    for (const json& name : *list) {
      if (auto event = name.is_string() ? client_event_of(name.get_ref<const std::string&>()) : std::nullopt)
        mask |= 1u << static_cast<unsigned>(*event);
    }
    policy.allowed_client_events = mask;
  }
  if (auto list = channel->find("allowed_server_events"); list != channel->end() && list->is_array()) {
    policy.allowed_server_events.emplace();
    for (const json& name : *list)
      if (name.is_string()) policy.allowed_server_events->push_back(name.get<std::string>());
  }
  return policy;
}

// The session as a backend may hear it: the data-channel policy is the edge's business.
void without_edge_fields(json& session) {
  if (session.is_object()) session.erase("client");
}

std::string_view type_of(const json& event) {
  auto it = event.find("type");
  return it != event.end() && it->is_string() ? std::string_view(it->get_ref<const std::string&>())
                                              : std::string_view();
}

}  // namespace

RealtimeEventChannel::RealtimeEventChannel(json initial_session, Limits limits, Callbacks callbacks)
    : limits_(limits), callbacks_(std::move(callbacks)), session_(default_realtime_session()) {
  id_prefix_ = random_hex(6);
  session_["id"] = "sess_" + random_hex(12);
  if (limits_.sidebands_only) sideband_gone_since_ = 0;
  if (initial_session.is_object()) {
    Problems problems;
    SessionMerger(limits_, problems, UpdateOrigin::initial, app_server_fields_)
        .apply(session_, initial_session);
    initial_problems_ = problems.text();
    policy_ = policy_of(session_);
  }
}

void RealtimeEventChannel::on_open(Nanos) {
  if (open_) return;
  open_ = true;
  json created = {{"type", "session.created"}, {"session", session_}};
  send(created, kFromBrowser);
  if (!initial_problems_.empty()) {
    json error = {{"type", "error"},
                  {"error",
                   {{"type", "invalid_request_error"},
                    {"code", kUnsupportedFieldCode},
                    {"message", "the call's session was applied except: " + initial_problems_},
                    {"param", nullptr},
                    {"event_id", nullptr}}}};
    ++stats_.errors_sent;
    send(error, kFromBrowser);
  }
  // Output that began before the channel opened: the client hears it, so it is told, and
  // the stopped that follows has its started.
  if (output_ == Output::playing) {
    json started = {{"type", "output_audio_buffer.started"}, {"response_id", output_response_id_}};
    send(started);
  }
}

void RealtimeEventChannel::on_client_closed() { open_ = false; }

void RealtimeEventChannel::on_client_message(std::span<const uint8_t> message, bool binary, Nanos now) {
  ++stats_.client_messages;
  if (binary) return drop_client(RealtimeDrop::binary_message, {}, nullptr, kFromBrowser);
  handle_message({reinterpret_cast<const char*>(message.data()), message.size()}, kFromBrowser, now);
}

void RealtimeEventChannel::on_sideband_message(EventSource sideband, std::string_view message, Nanos now) {
  if (!contains_source(sideband)) return;
  ++stats_.sideband_messages;
  handle_message(message, sideband, now);
}

void RealtimeEventChannel::handle_message(std::string_view text, EventSource source, Nanos now) {
  if (text.size() > limits_.max_message_bytes) {
    return drop_client(RealtimeDrop::too_large, std::to_string(limits_.max_message_bytes) + " bytes", nullptr,
                       source);
  }
  if (json_nests_deeper_than(text, limits_.max_json_depth)) {
    return drop_client(RealtimeDrop::too_deep, std::to_string(limits_.max_json_depth) + " levels", nullptr,
                       source);
  }
  json event = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded()) return drop_client(RealtimeDrop::malformed_json, {}, nullptr, source);
  if (!event.is_object()) return drop_client(RealtimeDrop::not_an_object, {}, nullptr, source);
  handle_event(event, source, now);
}

void RealtimeEventChannel::handle_event(json& event, EventSource source, Nanos) {
  const json client_event_id = string_or_null(event, "event_id");
  const json type = string_or_null(event, "type");
  if (type.is_null()) return drop_client(RealtimeDrop::missing_type, {}, client_event_id, source);
  const auto kind = client_event_of(type.get_ref<const std::string&>());
  if (!kind)
    return drop_client(RealtimeDrop::unknown_event, cut_quote(type.get_ref<const std::string&>()),
                       client_event_id, source);
  if (source == kFromBrowser && !policy_.allows_client(*kind))
    return drop_client(RealtimeDrop::client_event_not_allowed, type.get_ref<const std::string&>(),
                       client_event_id, source);
  switch (*kind) {
    case RealtimeClientEvent::session_update: return handle_session_update(event, source, client_event_id);
    case RealtimeClientEvent::response_cancel:
      // The edge holds the output buffer in WebRTC mode, so the audio stops here, now; the
      // backend is told too, to stop producing.
      clear_output(/*acknowledge=*/output_ == Output::playing, source);
      break;
    case RealtimeClientEvent::output_audio_buffer_clear:
      clear_output(/*acknowledge=*/output_ != Output::cleared, source);
      break;
    case RealtimeClientEvent::conversation_item_create: note_tool_output(event); break;
    default: break;
  }
  ++stats_.client_events_forwarded;
  if (callbacks_.send_to_backend) callbacks_.send_to_backend(event);
}

void RealtimeEventChannel::handle_session_update(json& event, EventSource source,
                                                 const json& client_event_id) {
  auto it = event.find("session");
  if (it == event.end() || !it->is_object()) {
    return drop_client(RealtimeDrop::bad_session_update, {}, client_event_id, source);
  }
  Problems problems;
  SessionMerger merger(limits_, problems,
                       source == kFromBrowser ? UpdateOrigin::browser : UpdateOrigin::sideband,
                       app_server_fields_);
  merger.apply(session_, *it);
  policy_ = policy_of(session_);
  ++stats_.session_updates;
  json updated = {{"type", "session.updated"}, {"session", session_}};
  send(updated, source);
  if (!problems.empty()) {
    json error = {{"type", "error"},
                  {"error",
                   {{"type", "invalid_request_error"},
                    {"code", kUnsupportedFieldCode},
                    {"message", "session.update was applied except: " + problems.text()},
                    {"param", problems.first_param()},
                    {"event_id", client_event_id}}}};
    ++stats_.errors_sent;
    reply(source, error);
  }
  // The backend gets what was applied, in the client's own terms: never a field the edge
  // refused or a read-only one (a Realtime server would reject those), and nothing the
  // client did not set (the backend's defaults are its own). The whole session is session().
  json& applied = merger.accepted();
  without_edge_fields(applied);
  applied["type"] = "realtime";
  json forwarded = {{"type", "session.update"}, {"session", std::move(applied)}};
  if (client_event_id.is_string()) forwarded["event_id"] = client_event_id;
  ++stats_.client_events_forwarded;
  if (callbacks_.send_to_backend) callbacks_.send_to_backend(forwarded);
}

void RealtimeEventChannel::clear_output(bool acknowledge, EventSource source) {
  ++stats_.output_clears;
  if (callbacks_.clear_output) callbacks_.clear_output();
  const bool was_playing = output_ == Output::playing;
  output_ = Output::cleared;
  if (!acknowledge) return;
  // The response whose audio was cut; with nothing playing, the latest one.
  std::string response_id = was_playing ? output_response_id_ : last_response_id_;
  if (response_id.empty()) response_id = output_response_id();
  json cleared = {{"type", "output_audio_buffer.cleared"}, {"response_id", std::move(response_id)}};
  send(cleared, source);
}

void RealtimeEventChannel::on_backend_event(const json& event, Nanos now) {
  ++stats_.backend_events;
  if (!event.is_object()) {
    ++stats_.drops[static_cast<size_t>(RealtimeDrop::backend_not_an_object)];
    return;
  }
  const json type = string_or_null(event, "type");
  if (type.is_null()) {
    ++stats_.drops[static_cast<size_t>(RealtimeDrop::backend_missing_type)];
    return;
  }
  if (type == "response.created") {
    const json* response = event.contains("response") ? &event["response"] : nullptr;
    const json id = response ? string_or_null(*response, "id") : json();
    if (id.is_string()) last_response_id_ = id.get<std::string>();
  }
  note_tool_call(event, now);
  ++stats_.backend_events_forwarded;
  json copy = event;
  send(copy);
}

void RealtimeEventChannel::on_output_started(Nanos) {
  if (output_ == Output::playing) return;
  output_ = Output::playing;
  output_response_id_ = last_response_id_.empty() ? next_id("resp_") : last_response_id_;
  json started = {{"type", "output_audio_buffer.started"}, {"response_id", output_response_id_}};
  send(started);
}

void RealtimeEventChannel::on_output_stopped(Nanos) {
  if (output_ != Output::playing) return;  // never started, or a clear already ended it
  output_ = Output::idle;
  json stopped = {{"type", "output_audio_buffer.stopped"}, {"response_id", output_response_id_}};
  send(stopped);
}

const std::string& RealtimeEventChannel::output_response_id() {
  if (output_response_id_.empty()) {
    output_response_id_ = last_response_id_.empty() ? next_id("resp_") : last_response_id_;
  }
  return output_response_id_;
}

bool RealtimeEventChannel::attach_sideband(EventSource sideband, Nanos) {
  if (sideband == kFromBrowser || contains_source(sideband) || sidebands_.size() >= limits_.max_sidebands)
    return false;
  sidebands_.push_back(sideband);
  json created = {{"type", "session.created"}, {"session", session_}};
  reply(sideband, created);
  if (sideband_gone_since_) {
    // Said before what follows, so the app server knows what it is reading: the events of
    // the gap that are still kept, oldest first, with their own event_ids.
    json missed = {{"type", "rtcedge.sideband.missed"},
                   {"missed_events", missed_total_},
                   {"replayed_events", missed_.size()},
                   {"lost_events", missed_total_ - missed_.size()}};
    reply(sideband, missed);
    for (const std::string& text : missed_) {
      ++stats_.sideband_events_sent;
      if (callbacks_.send_to_sideband) callbacks_.send_to_sideband(sideband, text);
    }
    sideband_gone_since_.reset();
    missed_.clear();
    missed_late_ = 0;
    missed_bytes_ = 0;
    missed_total_ = 0;
  }
  return true;
}

void RealtimeEventChannel::detach_sideband(EventSource sideband, Nanos now) {
  if (!contains_source(sideband)) return;
  std::erase(sidebands_, sideband);
  if (sidebands_.empty() && !sideband_gone_since_) {
    sideband_gone_since_ = now;
    missed_late_ = 0;
  }
}

void RealtimeEventChannel::on_sideband_undelivered(EventSource sideband, std::string json_text) {
  // Still attached (a socket closing for a flood) or another sideband took over: nobody keeps it.
  if (contains_source(sideband) || !sidebands_.empty() || !sideband_gone_since_) {
    ++stats_.drops[static_cast<size_t>(RealtimeDrop::sideband_undelivered)];
    return;
  }
  // It happened before everything the gap kept so far, after what was given back before it.
  ++missed_total_;
  ++stats_.missed_events;
  missed_bytes_ += json_text.size();
  missed_.insert(missed_.begin() + static_cast<std::ptrdiff_t>(std::min(missed_late_, missed_.size())),
                 std::move(json_text));
  ++missed_late_;
  trim_missed();
}

void RealtimeEventChannel::trim_missed() {
  while (!missed_.empty() &&
         (missed_.size() > limits_.max_missed_events || missed_bytes_ > limits_.max_missed_bytes)) {
    missed_bytes_ -= missed_.front().size();
    missed_.pop_front();
    if (missed_late_ > 0) --missed_late_;
  }
}

bool RealtimeEventChannel::contains_source(EventSource sideband) const {
  return std::find(sidebands_.begin(), sidebands_.end(), sideband) != sidebands_.end();
}

void RealtimeEventChannel::on_call_ended(std::string_view reason, Nanos) {
  json ended = {{"type", "rtcedge.call.ended"}, {"reason", std::string(reason)}};
  ended["event_id"] = next_id("event_");
  const std::string text = dump(ended);
  for (EventSource sideband : sidebands_) {
    ++stats_.sideband_events_sent;
    if (callbacks_.send_to_sideband) callbacks_.send_to_sideband(sideband, text);
  }
}

void RealtimeEventChannel::note_tool_call(const json& event, Nanos now) {
  // The function call a response asked for: its arguments are complete. The GA stream says
  // so twice (function_call_arguments.done, then output_item.done with the item); once is kept.
  const std::string_view type = type_of(event);
  json call_id;
  if (type == "response.function_call_arguments.done") {
    call_id = string_or_null(event, "call_id");
  } else if (type == "response.output_item.done") {
    auto item = event.find("item");
    if (item != event.end() && item->is_object() && type_of(*item) == "function_call")
      call_id = string_or_null(*item, "call_id");
  }
  if (!call_id.is_string()) return;
  const auto& id = call_id.get_ref<const std::string&>();
  for (const auto& pending : pending_tool_calls_)
    if (pending.call_id == id) return;
  if (pending_tool_calls_.size() >= limits_.max_pending_tool_calls)
    pending_tool_calls_.erase(pending_tool_calls_.begin());
  pending_tool_calls_.push_back({id, now});
}

void RealtimeEventChannel::note_tool_output(const json& event) {
  auto item = event.find("item");
  if (item == event.end() || !item->is_object() || type_of(*item) != "function_call_output") return;
  const json call_id = string_or_null(*item, "call_id");
  if (!call_id.is_string()) return;
  std::erase_if(pending_tool_calls_, [&](const PendingToolCall& p) { return p.call_id == call_id; });
}

Nanos RealtimeEventChannel::next_deadline() const {
  // Only a call whose app server had a sideband and lost it: without one, the browser answers.
  if (!sideband_gone_since_ || pending_tool_calls_.empty()) return std::numeric_limits<Nanos>::max();
  Nanos earliest = std::numeric_limits<Nanos>::max();
  for (const auto& pending : pending_tool_calls_)
    earliest = std::min(earliest, std::max(pending.issued, *sideband_gone_since_) + limits_.tool_timeout);
  return earliest;
}

void RealtimeEventChannel::on_deadline(Nanos now) {
  if (!sideband_gone_since_) return;
  const Nanos gone = *sideband_gone_since_;
  std::vector<std::string> expired;
  std::erase_if(pending_tool_calls_, [&](const PendingToolCall& p) {
    if (std::max(p.issued, gone) + limits_.tool_timeout > now) return false;
    expired.push_back(p.call_id);
    return true;
  });
  if (expired.empty() || !callbacks_.send_to_backend) {
    stats_.tool_calls_timed_out += expired.size();
    return;
  }
  // The backend waits for an output: it gets one that says why, and may answer the caller.
  for (const std::string& call_id : expired) {
    ++stats_.tool_calls_timed_out;
    const json output = {{"error", "tool_call_timed_out"},
                         {"message", "the app server's sideband went away and did not come back in time"}};
    callbacks_.send_to_backend(
        {{"type", "conversation.item.create"},
         {"item", {{"type", "function_call_output"}, {"call_id", call_id}, {"output", output.dump()}}}});
  }
  callbacks_.send_to_backend({{"type", "response.create"}});
}

void RealtimeEventChannel::drop_client(RealtimeDrop drop, std::string_view detail,
                                       const json& client_event_id, EventSource source) {
  ++stats_.drops[static_cast<size_t>(drop)];
  std::string message(realtime_drop_message(drop));
  if (!detail.empty()) {
    message += ": ";
    message += detail;
  }
  json error = {{"type", "error"},
                {"error",
                 {{"type", "invalid_request_error"},
                  {"code", realtime_drop_name(drop)},
                  {"message", std::move(message)},
                  {"param", nullptr},
                  {"event_id", client_event_id}}}};
  ++stats_.errors_sent;
  // The browser's mistakes are the app server's business too; a sideband's are its own.
  if (source == kFromBrowser) return send(error, kFromBrowser);
  reply(source, error);
}

void RealtimeEventChannel::send(json& event, std::optional<EventSource> answering) {
  if (!string_or_null(event, "event_id").is_string()) event["event_id"] = next_id("event_");
  const std::string text = dump(event);
  for (EventSource sideband : sidebands_) {
    ++stats_.sideband_events_sent;
    if (callbacks_.send_to_sideband) callbacks_.send_to_sideband(sideband, text);
  }
  if (sidebands_.empty() && sideband_gone_since_) {
    ++missed_total_;
    ++stats_.missed_events;
    missed_bytes_ += text.size();
    missed_.push_back(text);
    trim_missed();
  }
  if (!open_) {
    ++stats_.drops[static_cast<size_t>(RealtimeDrop::not_open)];
    return;
  }
  if (answering != kFromBrowser && !policy_.allows_server(type_of(event))) {
    ++stats_.drops[static_cast<size_t>(RealtimeDrop::server_event_withheld)];
    return;
  }
  if (answering != kFromBrowser && policy_.hides_tool_calls()) {
    if (auto shown = without_tool_calls(event)) {
      if (shown->is_null()) {
        ++stats_.drops[static_cast<size_t>(RealtimeDrop::server_event_withheld)];
        return;
      }
      ++stats_.server_messages;
      if (callbacks_.send_to_client) callbacks_.send_to_client(dump(*shown));
      return;
    }
  }
  ++stats_.server_messages;
  if (callbacks_.send_to_client) callbacks_.send_to_client(text);
}

void RealtimeEventChannel::reply(EventSource source, json& event) {
  if (source == kFromBrowser) return send(event, kFromBrowser);
  if (!string_or_null(event, "event_id").is_string()) event["event_id"] = next_id("event_");
  ++stats_.sideband_events_sent;
  if (callbacks_.send_to_sideband) callbacks_.send_to_sideband(source, dump(event));
}

std::string RealtimeEventChannel::next_id(std::string_view prefix) {
  std::string id(prefix);
  id += id_prefix_;
  id += std::to_string(++id_counter_);
  return id;
}

}  // namespace rtce
