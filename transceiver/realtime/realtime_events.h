// realtime_events.h — the Realtime events of one call: JSON events between its clients and
// the backend, and the part of them the edge owns itself (session.created/updated and the
// session object, output_audio_buffer.*, errors for bad input). The clients are the
// browser's `oai-events` data channel and the app server's sideband WebSockets
// (`/v1/realtime?call_id=`): every server event reaches both (the browser's only as far as
// the app server's event policy lets it), a client event from either acts the same, a
// session field a sideband set is the app server's, and a sideband that comes back hears
// what it missed. Socket-free: messages come in as bytes, go out through callbacks.
//
// One per Realtime call, used on the worker thread only. Not on the media path: it runs per
// event, never per packet. Bad client input is an `error` event to its sender and a counted
// drop; bad backend events are counted drops. Nothing here closes a channel or a socket.
// The event shapes are documented in docs/backend-protocol.md ("Events on the oai-events
// data channel") and docs/realtime.md (the sideband and the event policy).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "clock.h"
#include "vocab.h"

namespace rtce {

// The client events of the Realtime API (GA, plus the beta transcription_session.update)
// that are forwarded to the backend; anything else is an unknown_event. The second column
// is the wire `type`.
#define RTCE_REALTIME_CLIENT_EVENTS(X)                        \
  X(session_update, "session.update")                         \
  X(input_audio_buffer_append, "input_audio_buffer.append")   \
  X(input_audio_buffer_commit, "input_audio_buffer.commit")   \
  X(input_audio_buffer_clear, "input_audio_buffer.clear")     \
  X(conversation_item_create, "conversation.item.create")     \
  X(conversation_item_retrieve, "conversation.item.retrieve") \
  X(conversation_item_truncate, "conversation.item.truncate") \
  X(conversation_item_delete, "conversation.item.delete")     \
  X(response_create, "response.create")                       \
  X(response_cancel, "response.cancel")                       \
  X(output_audio_buffer_clear, "output_audio_buffer.clear")   \
  X(transcription_session_update, "transcription_session.update")

// realtime_client_event_type: "output_audio_buffer.clear" ... for a RealtimeClientEvent.
RTCE_DECLARE_NAMED_VOCAB(RealtimeClientEvent, RTCE_REALTIME_CLIENT_EVENTS, realtime_client_event_type);

// Why a message or an event was not handled. Client drops are answered with an `error`
// event whose error.code is the name and whose error.message starts with the sentence;
// backend drops are only counted.
#define RTCE_REALTIME_DROPS(X)                                                                       \
  X(binary_message, "binary messages are not events: send each event as one JSON text message")      \
  X(too_large, "the message is larger than the limit")                                               \
  X(too_deep, "the JSON nests deeper than the limit")                                                \
  X(malformed_json, "the message is not valid JSON")                                                 \
  X(not_an_object, "an event must be a JSON object")                                                 \
  X(missing_type, "the event has no string \"type\"")                                                \
  X(unknown_event, "unknown client event type")                                                      \
  X(bad_session_update, "session.update needs a \"session\" object")                                 \
  X(backend_not_an_object, "a backend event that is not a JSON object")                              \
  X(backend_missing_type, "a backend event without a string \"type\"")                               \
  X(not_open, "an event for the client before the channel opened")                                   \
  X(unsent, "an event for the client (an error reply, say) the data channel could not send")         \
  X(client_event_not_allowed, "the app server does not allow this client event on the data channel") \
  X(server_event_withheld, "a server event the app server does not let the data channel see")        \
  X(sideband_undelivered, "an event a closing sideband could not take, with no gap to keep it in")

// realtime_drop_name: "too_large" ... for logs, metric labels and error.code.
RTCE_DECLARE_MESSAGE_VOCAB(RealtimeDrop, RTCE_REALTIME_DROPS, realtime_drop_name, realtime_drop_message);
inline constexpr const char* kRealtimeDropNames[] = {RTCE_REALTIME_DROPS(RTCE_VOCAB_MESSAGE_LABEL)};
inline constexpr size_t kRealtimeDropCount = std::size(kRealtimeDropNames);

// The session object a session starts with when the caller gives none (or for the fields
// it leaves out): what the agents SDK reads from session.created.
nlohmann::json default_realtime_session();

// Who sent a client event: the browser's data channel, or a sideband (ids from 1).
using EventSource = uint32_t;
inline constexpr EventSource kFromBrowser = 0;

// The app server's policy for the browser's data channel, from the session's
// `client.data_channel` (GPT-Live's `allowed_client_events`/`allowed_server_events`): with a
// list, only the events it names pass; without, everything does. The browser always hears the
// edge's answers to its own events (errors, session.updated) and session.created.
struct DataChannelPolicy {
  std::optional<uint32_t> allowed_client_events;  // a bit per RealtimeClientEvent
  std::optional<std::vector<std::string>> allowed_server_events;
  bool allows_client(RealtimeClientEvent event) const {
    return !allowed_client_events || (*allowed_client_events >> static_cast<unsigned>(event) & 1u);
  }
  bool allows_server(std::string_view type) const;
  // A list without response.function_call_arguments.done: tool calls are the app server's,
  // and the browser sees none of them, not even inside other events (tool_call items of
  // conversation.item.* and response.output_item.*, function calls in a response's output).
  bool hides_tool_calls() const;
};

// The event as a browser that may not see tool calls sees it: nullopt when it carries none;
// null when it is about a tool call item alone (withheld); else a copy without them.
std::optional<nlohmann::json> without_tool_calls(const nlohmann::json& event);
inline constexpr size_t kMaxAllowedServerEvents = 64;

class RealtimeEventChannel {
 public:
  struct Callbacks {
    std::function<void(std::string_view json_text)> send_to_client;    // one data-channel text message
    std::function<void(const nlohmann::json& event)> send_to_backend;  // BackendConnection::send_event
    std::function<void()> clear_output;  // stop the audio the session is playing, now (within one frame)
    std::function<void(EventSource sideband, std::string_view json_text)> send_to_sideband;
  };
  struct Limits {
    size_t max_message_bytes = 64 * 1024;
    size_t max_json_depth = 32;
    // What the backend behind the session does beyond audio in, audio out. A session.update
    // asking for something it does not do is not applied to that field and is reported;
    // the echo backend does none of these, a Realtime-dialect backend all of them.
    bool transcription_supported = false;    // audio.input.transcription
    bool noise_reduction_supported = false;  // audio.input.noise_reduction other than null
    bool semantic_vad_supported = false;     // turn_detection semantic_vad (else server_vad)
    // The sideband (realtime.sideband.*).
    size_t max_sidebands = 4;              // attached at once
    Nanos tool_timeout = 15'000'000'000;   // a function call no sideband is left to answer
    size_t max_missed_events = 256;        // kept for a sideband that comes back...
    size_t max_missed_bytes = 256 * 1024;  // ...and their bytes
    size_t max_pending_tool_calls = 64;
    // The call has no client of its own (a phone call): its sidebands are its only clients,
    // so it is as if one had just gone from the start — a tool call no sideband answers ends
    // after tool_timeout, and the first sideband hears what it missed.
    bool sidebands_only = false;
  };
  struct Stats {
    uint64_t client_messages = 0;           // data-channel messages received
    uint64_t client_events_forwarded = 0;   // to the backend
    uint64_t backend_events = 0;            // handed to on_backend_event
    uint64_t backend_events_forwarded = 0;  // to the client
    uint64_t server_messages = 0;           // every message sent to the client
    uint64_t errors_sent = 0;               // `error` events the edge itself sent
    uint64_t session_updates = 0;           // session.update events applied
    uint64_t output_clears = 0;             // clear_output() calls
    uint64_t sideband_messages = 0;         // messages from sidebands
    uint64_t sideband_events_sent = 0;      // messages to sidebands
    uint64_t missed_events = 0;             // events no sideband was attached to hear (once one had been)
    uint64_t tool_calls_timed_out = 0;      // answered by the edge: their sideband was gone
    std::array<uint64_t, kRealtimeDropCount> drops{};
    uint64_t dropped(RealtimeDrop drop) const { return drops[static_cast<size_t>(drop)]; }
  };

  // `initial_session` is the Realtime call's session config (the multipart `session` part
  // or the ephemeral key's), applied over the defaults like a session.update from the app
  // server (its `client` policy included); null or a non-object means the defaults.
  RealtimeEventChannel(nlohmann::json initial_session, Limits limits, Callbacks callbacks);

  // The browser's data channel.
  void on_open(Nanos now);  // oai-events opened: session.created
  void on_client_closed();  // it closed (the call and its sidebands go on)
  void on_client_message(std::span<const uint8_t> message, bool binary, Nanos now);

  // The app server's sidebands, by ids the caller gives (not kFromBrowser, unique). attach:
  // false at max_sidebands; else it has been sent session.created (and, after a gap with no
  // sideband, what it missed).
  bool attach_sideband(EventSource sideband, Nanos now);
  void detach_sideband(EventSource sideband, Nanos now);
  void on_sideband_message(EventSource sideband, std::string_view message, Nanos now);
  // An event sent to `sideband` that its socket could not deliver (it was closing, and the
  // detach had not arrived): kept for the next sideband, before what followed the detach.
  void on_sideband_undelivered(EventSource sideband, std::string json_text);
  size_t sidebands() const { return sidebands_.size(); }
  // The call ended: every sideband hears `rtcedge.call.ended` with the reason.
  void on_call_ended(std::string_view reason, Nanos now);

  void on_backend_event(const nlohmann::json& event,
                        Nanos now);  // forwarded to the clients (event_id ensured)
  void on_output_started(
      Nanos now);  // the session began playing backend audio -> output_audio_buffer.started
  void on_output_stopped(Nanos now);  // its output queue ran dry -> output_audio_buffer.stopped

  // Tool calls left to a sideband that went away end after tool_timeout.
  Nanos next_deadline() const;
  void on_deadline(Nanos now);

  bool output_playing() const { return output_ == Output::playing; }
  // The current session object (for the backend's session.started and a GET of the call).
  const nlohmann::json& session() const { return session_; }
  const DataChannelPolicy& policy() const { return policy_; }
  const Stats& stats() const { return stats_; }

 private:
  enum class Output { idle, playing, cleared };
  struct PendingToolCall {
    std::string call_id;
    Nanos issued = 0;
  };

  void handle_message(std::string_view text, EventSource source, Nanos now);
  void handle_event(nlohmann::json& event, EventSource source, Nanos now);
  void handle_session_update(nlohmann::json& event, EventSource source,
                             const nlohmann::json& client_event_id);
  void clear_output(bool acknowledge, EventSource source);
  void drop_client(RealtimeDrop drop, std::string_view detail, const nlohmann::json& client_event_id,
                   EventSource source);
  // Sets event_id when missing, serializes once, counts. To the browser (when its channel is
  // open, and as the policy allows unless it answers the browser's own event) and to every
  // sideband; a gap with no sideband keeps it for the next one.
  void send(nlohmann::json& event, std::optional<EventSource> answering = std::nullopt);
  // To the one that sent the event answered (a sideband's errors are its own).
  void reply(EventSource source, nlohmann::json& event);
  bool contains_source(EventSource sideband) const;
  void trim_missed();  // the newest within max_missed_events and max_missed_bytes
  void note_tool_call(const nlohmann::json& event, Nanos now);
  void note_tool_output(const nlohmann::json& event);
  std::string next_id(std::string_view prefix);
  const std::string& output_response_id();

  std::string initial_problems_;  // what the initial session asked for and did not get
  Limits limits_;
  Callbacks callbacks_;
  nlohmann::json session_;
  DataChannelPolicy policy_;
  std::vector<std::string> app_server_fields_;  // session fields a sideband set (paths)
  bool open_ = false;
  Output output_ = Output::idle;
  std::string last_response_id_;    // the backend's last response.created
  std::string output_response_id_;  // the response the current/last output belongs to
  std::string id_prefix_;           // random per channel, so ids differ across sessions
  uint64_t id_counter_ = 0;

  std::vector<EventSource> sidebands_;
  // After the last sideband left: when, and what it missed (the newest, bounded).
  std::optional<Nanos> sideband_gone_since_;
  std::deque<std::string> missed_;
  size_t missed_late_ = 0;  // of missed_'s first events, those given back after the detach
  size_t missed_bytes_ = 0;
  uint64_t missed_total_ = 0;
  std::vector<PendingToolCall> pending_tool_calls_;
  Stats stats_;
};

}  // namespace rtce
