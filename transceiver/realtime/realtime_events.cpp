// realtime_events.cpp — see realtime_events.h.
#include "realtime_events.h"

#include <algorithm>
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

class SessionMerger {
 public:
  SessionMerger(const RealtimeEventChannel::Limits& limits, Problems& problems)
      : limits_(limits), problems_(problems) {}

  // What the update set, as it was applied: the client's fields minus the refused, unknown
  // and read-only ones, fall-backs as applied (a session.update a Realtime server accepts).
  json& accepted() { return accepted_; }

  void apply(json& session, const json& update) {
    for (const auto& [key, value] : update.items()) {
      const std::string path = "session." + key;
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
      } else {
        problems_.add(path, "unknown field");
      }
    }
  }

 private:
  void apply_audio(json& audio, const json& update) {
    if (!audio.is_object()) audio = json::object();
    for (const auto& [key, value] : update.items()) {
      const std::string path = "session.audio." + key;
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
    std::string pointer = path.substr(std::string_view("session").size());
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    accepted_[json::json_pointer(pointer)] = value;
  }

  const RealtimeEventChannel::Limits& limits_;
  Problems& problems_;
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

RealtimeEventChannel::RealtimeEventChannel(json initial_session, Limits limits, Callbacks callbacks)
    : limits_(limits), callbacks_(std::move(callbacks)), session_(default_realtime_session()) {
  id_prefix_ = random_hex(6);
  session_["id"] = "sess_" + random_hex(12);
  if (initial_session.is_object()) {
    Problems problems;
    SessionMerger(limits_, problems).apply(session_, initial_session);
    initial_problems_ = problems.text();
  }
}

void RealtimeEventChannel::on_open(Nanos) {
  if (open_) return;
  open_ = true;
  json created = {{"type", "session.created"}, {"session", session_}};
  send(created);
  if (!initial_problems_.empty()) {
    json error = {{"type", "error"},
                  {"error",
                   {{"type", "invalid_request_error"},
                    {"code", kUnsupportedFieldCode},
                    {"message", "the call's session was applied except: " + initial_problems_},
                    {"param", nullptr},
                    {"event_id", nullptr}}}};
    ++stats_.errors_sent;
    send(error);
  }
  // Output that began before the channel opened: the client hears it, so it is told, and
  // the stopped that follows has its started.
  if (output_ == Output::playing) {
    json started = {{"type", "output_audio_buffer.started"}, {"response_id", output_response_id_}};
    send(started);
  }
}

void RealtimeEventChannel::on_client_message(std::span<const uint8_t> message, bool binary, Nanos now) {
  ++stats_.client_messages;
  if (binary) return drop_client(RealtimeDrop::binary_message, {}, nullptr);
  if (message.size() > limits_.max_message_bytes) {
    return drop_client(RealtimeDrop::too_large, std::to_string(limits_.max_message_bytes) + " bytes",
                       nullptr);
  }
  const std::string_view text(reinterpret_cast<const char*>(message.data()), message.size());
  if (json_nests_deeper_than(text, limits_.max_json_depth)) {
    return drop_client(RealtimeDrop::too_deep, std::to_string(limits_.max_json_depth) + " levels", nullptr);
  }
  json event = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded()) return drop_client(RealtimeDrop::malformed_json, {}, nullptr);
  if (!event.is_object()) return drop_client(RealtimeDrop::not_an_object, {}, nullptr);
  handle_event(event, now);
}

void RealtimeEventChannel::handle_event(json& event, Nanos) {
  const json client_event_id = string_or_null(event, "event_id");
  const json type = string_or_null(event, "type");
  if (type.is_null()) return drop_client(RealtimeDrop::missing_type, {}, client_event_id);
  const auto kind = client_event_of(type.get_ref<const std::string&>());
  if (!kind)
    return drop_client(RealtimeDrop::unknown_event, cut_quote(type.get_ref<const std::string&>()),
                       client_event_id);
  switch (*kind) {
    case RealtimeClientEvent::session_update: return handle_session_update(event, client_event_id);
    case RealtimeClientEvent::response_cancel:
      // The edge holds the output buffer in WebRTC mode, so the audio stops here, now; the
      // backend is told too, to stop producing.
      clear_output(/*acknowledge=*/output_ == Output::playing);
      break;
    case RealtimeClientEvent::output_audio_buffer_clear:
      clear_output(/*acknowledge=*/output_ != Output::cleared);
      break;
    default: break;
  }
  ++stats_.client_events_forwarded;
  if (callbacks_.send_to_backend) callbacks_.send_to_backend(event);
}

void RealtimeEventChannel::handle_session_update(json& event, const json& client_event_id) {
  auto it = event.find("session");
  if (it == event.end() || !it->is_object()) {
    return drop_client(RealtimeDrop::bad_session_update, {}, client_event_id);
  }
  Problems problems;
  SessionMerger merger(limits_, problems);
  merger.apply(session_, *it);
  ++stats_.session_updates;
  json updated = {{"type", "session.updated"}, {"session", session_}};
  send(updated);
  if (!problems.empty()) {
    json error = {{"type", "error"},
                  {"error",
                   {{"type", "invalid_request_error"},
                    {"code", kUnsupportedFieldCode},
                    {"message", "session.update was applied except: " + problems.text()},
                    {"param", problems.first_param()},
                    {"event_id", client_event_id}}}};
    ++stats_.errors_sent;
    send(error);
  }
  // The backend gets what was applied, in the client's own terms: never a field the edge
  // refused or a read-only one (a Realtime server would reject those), and nothing the
  // client did not set (the backend's defaults are its own). The whole session is session().
  json& applied = merger.accepted();
  applied["type"] = "realtime";
  json forwarded = {{"type", "session.update"}, {"session", std::move(applied)}};
  if (client_event_id.is_string()) forwarded["event_id"] = client_event_id;
  ++stats_.client_events_forwarded;
  if (callbacks_.send_to_backend) callbacks_.send_to_backend(forwarded);
}

void RealtimeEventChannel::clear_output(bool acknowledge) {
  ++stats_.output_clears;
  if (callbacks_.clear_output) callbacks_.clear_output();
  const bool was_playing = output_ == Output::playing;
  output_ = Output::cleared;
  if (!acknowledge) return;
  // The response whose audio was cut; with nothing playing, the latest one.
  std::string response_id = was_playing ? output_response_id_ : last_response_id_;
  if (response_id.empty()) response_id = output_response_id();
  json cleared = {{"type", "output_audio_buffer.cleared"}, {"response_id", std::move(response_id)}};
  send(cleared);
}

void RealtimeEventChannel::on_backend_event(const json& event, Nanos) {
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
  if (!open_) {
    ++stats_.drops[static_cast<size_t>(RealtimeDrop::not_open)];
    return;
  }
  ++stats_.backend_events_forwarded;
  if (string_or_null(event, "event_id").is_string()) {
    ++stats_.server_messages;
    if (callbacks_.send_to_client) callbacks_.send_to_client(dump(event));
    return;
  }
  json copy = event;
  copy["event_id"] = next_id("event_");
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

void RealtimeEventChannel::drop_client(RealtimeDrop drop, std::string_view detail,
                                       const json& client_event_id) {
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
  send(error);
}

void RealtimeEventChannel::send(json& event) {
  if (!string_or_null(event, "event_id").is_string()) event["event_id"] = next_id("event_");
  if (!open_) {
    ++stats_.drops[static_cast<size_t>(RealtimeDrop::not_open)];
    return;
  }
  ++stats_.server_messages;
  if (callbacks_.send_to_client) callbacks_.send_to_client(dump(event));
}

std::string RealtimeEventChannel::next_id(std::string_view prefix) {
  std::string id(prefix);
  id += id_prefix_;
  id += std::to_string(++id_counter_);
  return id;
}

}  // namespace rtce
