// echo_backend.cpp — the in-process echo backend for demos and tests. loopback: a delay
// line of frames, each played back once after loopback_delay. parrot: an energy VAD records
// one utterance and replays it once at 20 ms pace. Both speak the Realtime events of the
// oai-events channel (docs/backend-protocol.md): the VAD's speech_started/stopped, the
// parrot's replay as a response, a text echo for conversation.item.create + response.create,
// and output_audio_buffer.clear / response.cancel stopping the replay. A scripted tool round
// trip too: a user text `call <name> [<arguments>]` naming one of the session's function
// tools is answered with a function call, and a function_call_output with a text reply and a
// short tone (the same 20 ms playout as the parrot's replay). Output and events
// come only from on_deadline (the worker calls it when next_deadline() has passed, in the
// same wake-ups as the session's own timers), never from inside send_audio or send_event, so
// the session sees the same re-entrancy rules as with the WebSocket backend.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>

#include "backend.h"
#include "backend_protocol.h"
#include "random.h"

namespace rtce {

namespace {

constexpr Nanos kFrame = 20'000'000;
constexpr Nanos kNoDeadline = std::numeric_limits<Nanos>::max();
constexpr double kSpeechRms = 500.0;         // about -36 dBFS: speech, not room noise
constexpr int kHangoverFrames = 35;          // 700 ms of silence ends an utterance
constexpr size_t kMaxUtteranceFrames = 500;  // 10 s
constexpr size_t kExtraDelayFrames = 50;     // the delay line holds the delay plus 1 s of burst
constexpr size_t kInitialExtraFrames = 3;    // ... but starts at the delay plus 60 ms, and grows
constexpr size_t kMaxOpusPacketBytes = 4000;
constexpr int kFrameMs = 20;
// Events wait for the next on_deadline; a client flooding text turns cannot grow this
// without bound (the excess is dropped and counted as protocol errors).
constexpr size_t kMaxPendingEvents = 256;
// The session's function tools (from its config and every session.update): the first 128
// with a name of 1 to 64 characters; the call ids of the latest 128 calls issued.
constexpr size_t kMaxTools = 128;
constexpr size_t kMaxToolNameChars = 64;
constexpr size_t kMaxIssuedCalls = 128;
constexpr size_t kMaxQuotedOutputChars = 1000;  // of a function_call_output, in the reply
// The tool reply's tone: 440 Hz, 400 ms, -12 dBFS peak (a 5 ms ramp at each end: no clicks).
constexpr double kToneHz = 440.0;
constexpr size_t kToneFrames = 20;
constexpr double kTonePeak = 32767.0 * 0.251188643150958;  // 10^(-12/20)
constexpr double kToneRampSeconds = 0.005;

using json = nlohmann::json;

// A string member of an object, or "" (json::value throws on a member of another type).
std::string_view str(const json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? std::string_view(it->get_ref<const std::string&>())
                                               : std::string_view();
}

// The text of a user message item's input_text parts, or nullopt for anything else.
std::optional<std::string> user_text(const json& item) {
  if (str(item, "type") != "message" || str(item, "role") != "user") return std::nullopt;
  auto content = item.find("content");
  if (content == item.end() || !content->is_array()) return std::nullopt;
  std::string text;
  bool any = false;
  for (const json& part : *content) {
    if (str(part, "type") != "input_text" || !part.contains("text") || !part["text"].is_string()) continue;
    text += str(part, "text");
    any = true;
  }
  return any ? std::optional<std::string>(std::move(text)) : std::nullopt;
}

// The first max_chars characters (code points) of UTF-8 text: never half a character.
std::string_view cut_chars(std::string_view text, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && chars++ == max_chars)
      return text.substr(0, i);
  }
  return text;
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// The echo's script for a tool call: `call <name>` or `call <name> <arguments>`. The
// arguments are passed as given (a model's are a string too, valid JSON or not), "{}" when
// there are none.
struct ScriptedCall {
  std::string name;
  std::string arguments;
};

std::optional<ScriptedCall> scripted_call(std::string_view text) {
  text = trim(text);
  constexpr std::string_view kCall = "call";
  if (text.size() <= kCall.size() || text.substr(0, kCall.size()) != kCall) return std::nullopt;
  const std::string_view rest = trim(text.substr(kCall.size()));
  if (rest.size() == text.size() - kCall.size()) return std::nullopt;  // "caller ...": no space after "call"
  const size_t name_end = std::min(rest.find_first_of(" \t\r\n"), rest.size());
  const std::string_view arguments = trim(rest.substr(name_end));
  return ScriptedCall{std::string(rest.substr(0, name_end)),
                      arguments.empty() ? "{}" : std::string(arguments)};
}

struct DelayedFrame {
  Nanos due = 0;
  bool is_opus = false;
  std::vector<int16_t> pcm;
  std::vector<uint8_t> opus;
};

class EchoImpl : public std::enable_shared_from_this<EchoImpl> {
 public:
  EchoImpl(const EchoBackendConfig& config, const BackendSessionInfo& info, BackendListener& listener,
           BackendCounters& counters)
      : config_(config),
        opus_passthrough_(info.opus_passthrough),
        frame_samples_(pcm_frame_bytes(info.sample_rate) / 2),
        listener_(&listener),
        counters_(&counters),
        max_delayed_(static_cast<size_t>(std::max<Nanos>(config.loopback_delay, 0) / kFrame) +
                     kExtraDelayFrames),
        delay_line_(max_delayed_ - kExtraDelayFrames + kInitialExtraFrames) {
    // A slot's buffer is allocated the first time the slot carries a frame, of the one kind
    // this call sends (PCM when transcoding, Opus in passthrough), and then kept: a slot
    // circulates through out_pcm_/out_opus_ by swapping, so no frame allocates after that.
    if (!opus_passthrough_) out_pcm_.reserve(frame_samples_);
    id_prefix_ = random_hex(6);
    if (config_.mode == EchoBackendConfig::Mode::parrot && !opus_passthrough_) {
      utterance_.reserve(frame_samples_ * kMaxUtteranceFrames);
    }
    if (info.session_config.is_object()) set_tools(info.session_config.value("tools", json()));
  }

  void start() {
    if (frame_samples_ == 0) {
      invalid_ = true;
      arm(monotonic_now());
    }
  }

  void send_audio(std::span<const int16_t> pcm) {
    if (!listener_) return;
    if (pcm.size() != frame_samples_ || opus_passthrough_) {
      counters_->frames_dropped_outbound.add();
      return;
    }
    counters_->frames_sent.add();
    listen(pcm);
    if (parrot()) return;
    DelayedFrame* slot = push_delayed();
    slot->is_opus = false;
    slot->pcm.assign(pcm.begin(), pcm.end());
  }

  void send_opus(std::span<const uint8_t> packet) {
    if (!listener_) return;
    if (!opus_passthrough_ || packet.empty() || packet.size() > kMaxOpusPacketBytes) {
      counters_->frames_dropped_outbound.add();
      return;
    }
    counters_->frames_sent.add();
    DelayedFrame* slot = push_delayed();
    slot->is_opus = true;
    slot->opus.assign(packet.begin(), packet.end());
  }

  void send_event(const nlohmann::json& event) {
    if (!listener_ || !event.is_object()) return;
    const std::string_view type = str(event, "type");
    if (type == "demo.clear") {
      delayed_count_ = 0;
      utterance_.clear();
      in_speech_ = false;
      playout_ = nullptr;
      clear_pending_ = true;
      arm(monotonic_now());
    } else if (type == "output_audio_buffer.clear" || type == "response.cancel") {
      stop_output(type == "output_audio_buffer.clear");
    } else if (type == "session.update") {
      auto session = event.find("session");
      if (session != event.end() && session->is_object() && session->contains("tools")) {
        set_tools((*session)["tools"]);
      }
    } else if (type == "conversation.item.create") {
      auto item = event.find("item");
      if (item == event.end()) return;
      if (str(*item, "type") == "function_call_output") {
        tool_output(*item);
        return;
      }
      auto text = user_text(*item);
      if (!text) return;
      std::string id(str(*item, "id"));
      if (id.empty()) id = next_id("item_");
      push_event({{"type", "conversation.item.added"},
                  {"item",
                   {{"id", id},
                    {"object", "realtime.item"},
                    {"type", "message"},
                    {"role", "user"},
                    {"status", "completed"},
                    {"content", {{{"type", "input_text"}, {"text", *text}}}}}}});
      last_user_text_ = std::move(*text);
    } else if (type == "response.create") {
      respond();
    }
  }

  void close() {
    listener_ = nullptr;
    counters_ = nullptr;
    next_due_ = kNoDeadline;
  }

 private:
  bool parrot() const { return config_.mode == EchoBackendConfig::Mode::parrot && !opus_passthrough_; }

  // The session's function tools, replaced by each `tools` array (anything else leaves them).
  void set_tools(const json& tools) {
    if (!tools.is_array()) return;
    tools_.clear();
    for (const json& tool : tools) {
      if (tools_.size() == kMaxTools) break;
      const std::string_view name = str(tool, "name");
      if (str(tool, "type") != "function" || name.empty() || name.size() > kMaxToolNameChars) continue;
      tools_.emplace_back(name);
    }
  }

  bool is_tool(std::string_view name) const {
    return std::find(tools_.begin(), tools_.end(), name) != tools_.end();
  }

  // response.create: the reply to a tool's output, else a scripted call of one of the tools,
  // else the echo of the user's last text.
  void respond() {
    std::string text = std::exchange(last_user_text_, std::string());
    if (tool_reply_) {
      tool_reply(*std::exchange(tool_reply_, std::nullopt));
      return;
    }
    if (auto call = scripted_call(text); call && is_tool(call->name)) {
      function_call(*call);
      return;
    }
    text_reply(std::move(text));
  }

  // conversation.item.create of a function_call_output: the item is added, and the next
  // response.create speaks its output (for a call id it never issued too, saying so).
  void tool_output(const json& item) {
    const std::string_view call_id = str(item, "call_id");
    if (call_id.empty() || !item.contains("output") || !item["output"].is_string()) return;
    const std::string_view output = str(item, "output");
    std::string id(str(item, "id"));
    if (id.empty()) id = next_id("item_");
    const json added = {{"id", id},
                        {"object", "realtime.item"},
                        {"type", "function_call_output"},
                        {"status", "completed"},
                        {"call_id", call_id},
                        {"output", output}};
    push_event({{"type", "conversation.item.added"}, {"item", added}});
    push_event({{"type", "conversation.item.done"}, {"item", added}});
    const bool issued = std::find(issued_calls_.begin(), issued_calls_.end(), call_id) != issued_calls_.end();
    std::string reply = issued ? "the tool said: " : "the tool said (for an unknown call): ";
    reply += cut_chars(output, kMaxQuotedOutputChars);
    tool_reply_ = std::move(reply);
  }

  // Appends to the delay line (growing it up to its bound, then dropping the oldest when full)
  // and arms the timer.
  DelayedFrame* push_delayed() {
    if (delayed_count_ == delay_line_.size() && delay_line_.size() < max_delayed_) grow_delay_line();
    if (delayed_count_ == delay_line_.size()) {
      delayed_head_ = (delayed_head_ + 1) % delay_line_.size();
      --delayed_count_;
      counters_->frames_dropped_outbound.add();
    }
    DelayedFrame& slot = delay_line_[(delayed_head_ + delayed_count_) % delay_line_.size()];
    ++delayed_count_;
    slot.due = monotonic_now() + config_.loopback_delay;
    arm(slot.due);
    return &slot;
  }

  // A burst beyond the delay: twice the slots (up to the bound), the queued frames in order.
  void grow_delay_line() {
    std::vector<DelayedFrame> grown(std::min(max_delayed_, delay_line_.size() * 2));
    for (size_t i = 0; i < delayed_count_; ++i)
      grown[i] = std::move(delay_line_[(delayed_head_ + i) % delay_line_.size()]);
    delay_line_ = std::move(grown);
    delayed_head_ = 0;
  }

  // The energy VAD, in both modes: speech_started at the first loud frame, speech_stopped
  // and committed after the hangover; parrot records the utterance and starts its replay.
  // Times are positions in the input audio (20 ms a frame since the first), not wall time.
  void listen(std::span<const int16_t> pcm) {
    ++input_frames_;
    if (playout_) return;  // half duplex: the echo does not listen to itself
    double energy = 0;
    for (int16_t sample : pcm) energy += static_cast<double>(sample) * sample;
    bool speech = std::sqrt(energy / static_cast<double>(pcm.size())) > kSpeechRms;
    if (!in_speech_) {
      if (!speech) return;
      in_speech_ = true;
      silent_frames_ = 0;
      utterance_frames_ = 0;
      utterance_.clear();
      item_id_ = next_id("item_");
      push_event({{"type", "input_audio_buffer.speech_started"},
                  {"audio_start_ms", (input_frames_ - 1) * kFrameMs},
                  {"item_id", item_id_}});
    }
    if (parrot()) utterance_.insert(utterance_.end(), pcm.begin(), pcm.end());
    ++utterance_frames_;
    silent_frames_ = speech ? 0 : silent_frames_ + 1;
    if (silent_frames_ < kHangoverFrames && utterance_frames_ < kMaxUtteranceFrames) return;
    in_speech_ = false;
    push_event({{"type", "input_audio_buffer.speech_stopped"},
                {"audio_end_ms", input_frames_ * kFrameMs},
                {"item_id", item_id_}});
    push_event(
        {{"type", "input_audio_buffer.committed"}, {"item_id", item_id_}, {"previous_item_id", nullptr}});
    if (!parrot()) return;
    // Drop the trailing silence that ended the utterance; replay the rest once, as a response.
    utterance_.resize((utterance_frames_ - static_cast<size_t>(silent_frames_)) * frame_samples_);
    if (utterance_.empty()) return;
    response_id_ = next_id("resp_");
    push_event(
        {{"type", "response.created"}, {"response", response_object("in_progress", "audio", json::array())}});
    start_playout(utterance_, json::array());
  }

  // A response's audio, played once at 20 ms pace from on_deadline (after the response's
  // queued events); response.done with `output` follows the last frame.
  void start_playout(const std::vector<int16_t>& pcm, json output) {
    playout_ = &pcm;
    playout_frame_ = 0;
    playout_due_ = monotonic_now();
    playout_response_id_ = response_id_;
    playout_output_ = std::move(output);
    arm(playout_due_);
  }

  void end_playout(const char* status) {
    playout_ = nullptr;
    push_event({{"type", "response.done"},
                {"response", response_object(playout_response_id_, status, "audio",
                                             std::exchange(playout_output_, json::array()))}});
  }

  // output_audio_buffer.clear / response.cancel: the playout stops now, the rest of the
  // utterance is dropped, and the response ends as cancelled. In loopback a clear drops
  // the delay line (what is waiting to be played).
  void stop_output(bool clear) {
    if (playout_) {
      if (playout_ == &utterance_) utterance_.clear();
      end_playout("cancelled");
    }
    if (clear && !parrot()) delayed_count_ = 0;
  }

  // A minimal text response echoing the user's last message, in the order a Realtime
  // server sends it.
  void text_reply(std::string text) {
    if (text.empty()) text = "(echo: nothing to repeat)";
    response_id_ = next_id("resp_");
    push_event(
        {{"type", "response.created"}, {"response", response_object("in_progress", "text", json::array())}});
    const json item = text_item(text);
    push_event(
        {{"type", "response.done"}, {"response", response_object("completed", "text", json::array({item}))}});
  }

  // The reply to a function_call_output: its text, and (unless Opus passes through, or audio
  // is already playing) a 400 ms tone before response.done, so the round trip is audible.
  void tool_reply(const std::string& text) {
    response_id_ = next_id("resp_");
    const bool tone = !opus_passthrough_ && !playout_;
    const char* modality = tone ? "audio" : "text";
    push_event({{"type", "response.created"},
                {"response", response_object("in_progress", modality, json::array())}});
    json item = text_item(text);
    if (!tone) {
      push_event({{"type", "response.done"},
                  {"response", response_object("completed", modality, json::array({std::move(item)}))}});
      return;
    }
    if (tone_.empty()) make_tone();
    start_playout(tone_, json::array({std::move(item)}));
  }

  // A sine of kToneHz at the session's rate, kToneFrames long, continuous across frames.
  void make_tone() {
    const size_t samples = kToneFrames * frame_samples_;
    const double rate = static_cast<double>(frame_samples_) * 50.0;
    const double ramp = kToneRampSeconds * rate;
    tone_.resize(samples);
    for (size_t i = 0; i < samples; ++i) {
      const double edge = static_cast<double>(std::min(i, samples - 1 - i));
      const double gain = std::min(1.0, edge / ramp);
      tone_[i] = static_cast<int16_t>(std::lround(
          kTonePeak * gain * std::sin(2.0 * std::numbers::pi * kToneHz * static_cast<double>(i) / rate)));
    }
  }

  // A scripted call of one of the session's function tools, in the order a Realtime server
  // sends it: the item, its arguments (one delta, then done), the item done, response.done.
  void function_call(const ScriptedCall& call) {
    response_id_ = next_id("resp_");
    const std::string item_id = next_id("item_");
    const std::string call_id = next_id("call_");
    if (issued_calls_.size() == kMaxIssuedCalls) issued_calls_.pop_front();
    issued_calls_.push_back(call_id);
    const json common = {
        {"response_id", response_id_}, {"item_id", item_id}, {"output_index", 0}, {"call_id", call_id}};
    auto with = [&common](json event) {
      event.update(common);
      return event;
    };
    json item = {{"id", item_id},           {"object", "realtime.item"}, {"type", "function_call"},
                 {"status", "in_progress"}, {"name", call.name},         {"call_id", call_id},
                 {"arguments", ""}};
    push_event(
        {{"type", "response.created"}, {"response", response_object("in_progress", "text", json::array())}});
    push_event({{"type", "response.output_item.added"},
                {"response_id", response_id_},
                {"output_index", 0},
                {"item", item}});
    push_event({{"type", "conversation.item.added"}, {"item", item}});
    push_event(with({{"type", "response.function_call_arguments.delta"}, {"delta", call.arguments}}));
    push_event(with({{"type", "response.function_call_arguments.done"},
                     {"name", call.name},
                     {"arguments", call.arguments}}));
    item["status"] = "completed";
    item["arguments"] = call.arguments;
    push_event({{"type", "response.output_item.done"},
                {"response_id", response_id_},
                {"output_index", 0},
                {"item", item}});
    push_event({{"type", "conversation.item.done"}, {"item", item}});
    push_event(
        {{"type", "response.done"}, {"response", response_object("completed", "text", json::array({item}))}});
  }

  // The events of one completed assistant text item (output 0 of response_id_), after
  // response.created; returns the item.
  json text_item(const std::string& text) {
    const std::string item_id = next_id("item_");
    const json common = {
        {"response_id", response_id_}, {"item_id", item_id}, {"output_index", 0}, {"content_index", 0}};
    auto with = [&common](json event) {
      event.update(common);
      return event;
    };
    json item = {{"id", item_id},       {"object", "realtime.item"}, {"type", "message"},
                 {"role", "assistant"}, {"status", "in_progress"},   {"content", json::array()}};
    push_event({{"type", "response.output_item.added"},
                {"response_id", response_id_},
                {"output_index", 0},
                {"item", item}});
    push_event({{"type", "conversation.item.added"}, {"item", item}});
    push_event(with({{"type", "response.content_part.added"}, {"part", {{"type", "text"}, {"text", ""}}}}));
    push_event(with({{"type", "response.output_text.delta"}, {"delta", text}}));
    push_event(with({{"type", "response.output_text.done"}, {"text", text}}));
    push_event(with({{"type", "response.content_part.done"}, {"part", {{"type", "text"}, {"text", text}}}}));
    item["status"] = "completed";
    item["content"] = json::array({{{"type", "output_text"}, {"text", text}}});
    push_event({{"type", "response.output_item.done"},
                {"response_id", response_id_},
                {"output_index", 0},
                {"item", item}});
    push_event({{"type", "conversation.item.done"}, {"item", item}});
    return item;
  }

  json response_object(const char* status, const char* modality, json output) const {
    return response_object(response_id_, status, modality, std::move(output));
  }

  static json response_object(const std::string& id, const char* status, const char* modality, json output) {
    return {{"id", id},
            {"object", "realtime.response"},
            {"status", status},
            {"status_details", nullptr},
            {"output", std::move(output)},
            {"output_modalities", {modality}},
            {"usage", {{"input_tokens", 0}, {"output_tokens", 0}, {"total_tokens", 0}}}};
  }

  // Queued for the next timer tick, never delivered from inside a send.
  void push_event(json event) {
    if (pending_events_.size() >= kMaxPendingEvents) {
      counters_->protocol_errors.add();
      return;
    }
    event["event_id"] = next_id("event_");
    pending_events_.push_back(std::move(event));
    arm(monotonic_now());
  }

  // Listener calls may close the connection or send more events (queued for the next tick).
  void flush_events() {
    if (pending_events_.empty()) return;
    std::vector<json> batch;
    batch.swap(pending_events_);
    for (const json& event : batch) {
      if (!listener_) return;
      listener_->on_backend_event(event);
    }
  }

  std::string next_id(std::string_view prefix) {
    std::string id(prefix);
    id += id_prefix_;
    id += std::to_string(++id_counter_);
    return id;
  }

  void arm(Nanos due) { next_due_ = std::min(next_due_, due); }

 public:
  Nanos next_deadline() const { return next_due_; }

  // Every listener call may close or destroy the connection: the caller holds a reference
  // (shared_ptr) for the duration and listener_ is re-checked each time.
  void on_deadline(Nanos now) {
    if (!listener_ || now < next_due_) return;
    next_due_ = kNoDeadline;
    if (invalid_ && listener_) {
      std::exchange(listener_, nullptr)
          ->on_backend_closed("invalid_session: sample rate not 8..48 kHz in 50 Hz steps");
      return;
    }
    if (clear_pending_ && listener_) {
      clear_pending_ = false;
      listener_->on_backend_clear();
    }
    while (listener_ && delayed_count_ > 0 && delay_line_[delayed_head_].due <= now) {
      DelayedFrame& slot = delay_line_[delayed_head_];
      delayed_head_ = (delayed_head_ + 1) % delay_line_.size();
      --delayed_count_;
      if (playout_) {  // a tool reply's tone has the output: loopback frames due meanwhile are dropped
        counters_->frames_dropped_outbound.add();
        continue;
      }
      counters_->frames_received.add();
      // Deliver from scratch buffers: a send from inside the callback may refill this slot.
      if (slot.is_opus) {
        out_opus_.swap(slot.opus);
        listener_->on_backend_opus(out_opus_);
      } else {
        out_pcm_.swap(slot.pcm);
        listener_->on_backend_audio(out_pcm_);
      }
    }
    flush_events();  // response.created goes before the first played frame
    while (listener_ && playout_ && playout_due_ <= now) {
      std::span<const int16_t> frame(playout_->data() + playout_frame_ * frame_samples_, frame_samples_);
      ++playout_frame_;
      playout_due_ += kFrame;
      const bool last = playout_frame_ * frame_samples_ >= playout_->size();
      counters_->frames_received.add();
      if (last) {  // response.done is queued first: the listener may cancel or close from the callback
        end_playout("completed");
      }
      listener_->on_backend_audio(frame);
    }
    flush_events();
    if (!listener_) return;
    if (delayed_count_ > 0) arm(delay_line_[delayed_head_].due);
    if (playout_) arm(playout_due_);
  }

 private:
  const EchoBackendConfig config_;
  const bool opus_passthrough_;
  const size_t frame_samples_;
  BackendListener* listener_;
  BackendCounters* counters_;
  Nanos next_due_ = kNoDeadline;
  bool invalid_ = false;
  bool clear_pending_ = false;
  const size_t max_delayed_;  // the delay line's bound, in frames
  std::vector<DelayedFrame> delay_line_;
  size_t delayed_head_ = 0;
  size_t delayed_count_ = 0;
  std::vector<int16_t> out_pcm_;
  std::vector<uint8_t> out_opus_;
  std::vector<int16_t> utterance_;
  bool in_speech_ = false;
  int silent_frames_ = 0;
  size_t utterance_frames_ = 0;
  int64_t input_frames_ = 0;  // the input audio's clock, in frames
  std::vector<json> pending_events_;
  std::string id_prefix_;
  uint64_t id_counter_ = 0;
  std::string item_id_;
  std::string response_id_;
  std::string last_user_text_;
  // The response audio playing at 20 ms pace: utterance_ (the parrot's replay) or tone_.
  const std::vector<int16_t>* playout_ = nullptr;
  size_t playout_frame_ = 0;
  Nanos playout_due_ = 0;
  std::string playout_response_id_;
  json playout_output_ = json::array();  // response.done's output when the playout ends
  std::vector<int16_t> tone_;            // made at the first tool reply
  std::vector<std::string> tools_;       // the names of the session's function tools
  std::deque<std::string> issued_calls_;
  std::optional<std::string> tool_reply_;  // for the next response.create
};

class EchoBackend final : public BackendConnection {
 public:
  explicit EchoBackend(std::shared_ptr<EchoImpl> impl) : impl_(std::move(impl)) {}
  ~EchoBackend() override { impl_->close(); }

  void send_audio(std::span<const int16_t> pcm_20ms) override { impl_->send_audio(pcm_20ms); }
  void send_opus(std::span<const uint8_t> packet) override { impl_->send_opus(packet); }
  void send_event(const nlohmann::json& event) override { impl_->send_event(event); }
  void close(std::string_view) override { impl_->close(); }
  Nanos next_deadline() const override { return impl_->next_deadline(); }
  void on_deadline(Nanos now) override {
    auto keep = impl_;  // a listener call may destroy this connection
    keep->on_deadline(now);
  }

 private:
  std::shared_ptr<EchoImpl> impl_;
};

}  // namespace

std::unique_ptr<BackendConnection> make_echo_backend(const EchoBackendConfig& config, BackendSessionInfo info,
                                                     BackendListener& listener, BackendCounters& counters) {
  auto impl = std::make_shared<EchoImpl>(config, info, listener, counters);
  impl->start();
  return std::make_unique<EchoBackend>(std::move(impl));
}

}  // namespace rtce
