// backend.h — the bridge between one WebRTC session and its AI backend: the listener the
// session implements, the connection it drives, and the two factories (WebSocket, echo).
// Everything runs on the session's worker io_context; nothing here blocks or locks.
// The wire protocol is documented in docs/backend-protocol.md.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "clock.h"
#include "relaxed_counter.h"
#include "vocab.h"

namespace rtce {

struct BackendSessionInfo {
  std::string session_id;
  int sample_rate = 16000;
  std::string client_address;
  std::string path;  // "direct" | "relay"
  std::string user_agent;
  std::map<std::string, std::string> metadata;
  bool opus_passthrough = false;
  // The Realtime-style session config of the call (the multipart `session` part or the
  // ephemeral key's), null when the call brought none. rtcedge dialect: session.started
  // carries it as "session"; realtime dialect: the opening session.update.
  nlohmann::json session_config;
};

// Implemented by the session. Called only from the worker thread, never from inside a
// BackendConnection method other than on_deadline(), and never after close() returned or after
// on_backend_closed().
class BackendListener {
 public:
  virtual ~BackendListener() = default;
  virtual void on_backend_audio(std::span<const int16_t> pcm_20ms) = 0;      // one 20 ms frame at sample_rate
  virtual void on_backend_opus(std::span<const uint8_t> /*opus_packet*/) {}  // passthrough mode
  virtual void on_backend_clear() = 0;                                       // barge-in
  virtual void on_backend_event(const nlohmann::json& event) = 0;            // any other text event
  // The connection failed or ended; the reason starts with one of the stable prefixes of
  // docs/backend-protocol.md ("connect_failed", "connect_timeout", "backend_closed", ...).
  virtual void on_backend_closed(std::string_view reason) = 0;
};

// Shared by the connections of one worker; written only by the worker thread.
struct BackendCounters {
  RelaxedCounter frames_sent;
  RelaxedCounter frames_received;
  RelaxedCounter frames_dropped_outbound;
  RelaxedCounter frames_dropped_inbound;
  RelaxedCounter connect_failures;
  RelaxedCounter protocol_errors;
};

class BackendConnection {
 public:
  virtual ~BackendConnection() = default;
  // Never blocks: frames wait in a bounded queue; when it is full the oldest is dropped
  // and counted. Frames sent while connecting are queued too (the same bound applies).
  virtual void send_audio(std::span<const int16_t> pcm_20ms) = 0;
  virtual void send_opus(std::span<const uint8_t> packet) = 0;
  virtual void send_event(const nlohmann::json& event) = 0;  // bounded too
  // Barge-in: audio the backend sent that was not handed to the listener yet (a partial
  // frame) must not play. The listener's own queue is the caller's to clear.
  virtual void discard_output() {}
  // A backend that keeps time itself (the in-process echo) keeps it on the worker's deadlines
  // rather than timers of its own, so it wakes the worker only with the session's other
  // work: next_deadline() says when on_deadline() has something to do, and on_deadline() is
  // the one method from inside which the listener may be called. Backends driven by their
  // sockets keep these defaults.
  virtual Nanos next_deadline() const { return std::numeric_limits<Nanos>::max(); }
  virtual void on_deadline(Nanos /*now*/) {}
  // Sends session.ended and closes in the background. The listener gets no more calls once
  // close() returns. Destroying the connection without close() is the same as close("destroyed").
  virtual void close(std::string_view reason) = 0;
};

// What the transceiver speaks on the backend WebSocket (docs/backend-protocol.md#dialects).
#define RTCE_BACKEND_DIALECTS(X)                                                  \
  X(rtcedge, "binary PCM16 frames at sample_rate, session.started/session.ended") \
  X(realtime, "the Realtime WebSocket protocol: base64 PCM16 24 kHz in JSON events")

enum class BackendDialect { RTCE_BACKEND_DIALECTS(RTCE_VOCAB_MESSAGE_ENUMERATOR) };
std::string_view backend_dialect_name(BackendDialect dialect);
// nullopt for a name that is not a dialect.
std::optional<BackendDialect> backend_dialect_from_name(std::string_view name);

struct WebSocketBackendConfig {
  std::string url;  // ws:// or wss://host[:port][/path][?query]
  BackendDialect dialect = BackendDialect::rtcedge;
  // wss:// only: PEM file of the CAs to trust instead of the system store; empty = system.
  std::string ca_file;
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. {"Authorization", "Bearer ..."}
  Nanos connect_timeout = 3'000'000'000;  // resolve + TCP connect + TLS + upgrade; also bounds the close
  size_t max_queued_frames = 50;          // 1 s of 20 ms frames
  size_t max_message_bytes = 64 * 1024;   // larger messages from the backend fail the connection
  Nanos idle_timeout = 20'000'000'000;    // ping after half of it; close when the backend is silent; 0 = off
};

std::unique_ptr<BackendConnection> make_websocket_backend(boost::asio::io_context& io,
                                                          const WebSocketBackendConfig& config,
                                                          BackendSessionInfo info, BackendListener& listener,
                                                          BackendCounters& counters);

struct EchoBackendConfig {
  enum class Mode { loopback, parrot } mode = Mode::loopback;
  Nanos loopback_delay = 500'000'000;
};

// An in-process backend for demos and tests. loopback: every frame comes back once, after
// loopback_delay. parrot: an energy VAD records an utterance (up to 10 s, ends after ~700 ms
// of silence) and replays it once. Opus passthrough is always loopback.
std::unique_ptr<BackendConnection> make_echo_backend(const EchoBackendConfig& config, BackendSessionInfo info,
                                                     BackendListener& listener, BackendCounters& counters);

}  // namespace rtce
