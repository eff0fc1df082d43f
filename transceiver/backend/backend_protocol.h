// backend_protocol.h — the socket-free half of the backend protocol: URL parsing, the
// events the transceiver sends, and the classification of what the backend sends.
// Pure functions so that they can be unit-tested and fuzzed (tests/transceiver/backend).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "backend.h"

namespace rtce {

struct BackendUrl {
  std::string host;
  std::string port;    // "80" (ws://) or "443" (wss://) when the URL names none
  std::string target;  // path and query, with session=<id> appended
  std::string error;   // non-empty when the URL is unusable; the other fields are then empty
  bool tls = false;    // wss://
};

// ws:// or wss://host[:port][/path][?query] ([v6]:port allowed).
BackendUrl parse_backend_url(std::string_view url, std::string_view session_id);

// Bytes of one 20 ms PCM16 mono frame: sample_rate / 50 samples of 2 bytes; 0 when the
// rate is not a multiple of 50 Hz or outside 8..48 kHz.
size_t pcm_frame_bytes(int sample_rate);

// How many whole 20 ms frames a binary message of `bytes` carries; 0 when the size is not
// a positive multiple of frame_bytes (a protocol error).
size_t pcm_frames_in_message(size_t bytes, size_t frame_bytes);

// Carries info.session_config as "session" when it is not null.
nlohmann::json session_started_event(const BackendSessionInfo& info);
nlohmann::json session_ended_event(std::string_view reason);

enum class BackendTextKind { clear, session_end, event, invalid };

struct BackendText {
  BackendTextKind kind = BackendTextKind::invalid;
  nlohmann::json event;  // the parsed object (kind event, session_end, clear)
  std::string reason;    // session_end: the backend's reason, "" when it gave none
};

// A text frame must be a JSON object whose "type" is a non-empty string.
BackendText parse_backend_text(std::string_view text);

}  // namespace rtce
