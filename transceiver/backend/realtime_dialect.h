// realtime_dialect.h — the socket-free framing of the `realtime` backend dialect: the
// transceiver speaks the Realtime WebSocket protocol (session.update, base64 PCM16 24 kHz
// input_audio_buffer.append, response.output_audio.delta) so that any server implementing
// it can be the backend. It owns the base64 codec, the resamplers between the session's
// rate and 24 kHz, and the 20 ms framing of the audio the server sends. The WebSocket
// itself stays in websocket_backend.cpp. Wire shapes: docs/backend-protocol.md#dialects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vocab.h"

namespace rtce {

// The Realtime protocol's PCM rate, both ways.
inline constexpr int kRealtimeSampleRate = 24000;

// RFC 4648 §4 base64 with padding, appended to `out` (no allocation once out has room).
void base64_append(std::span<const uint8_t> bytes, std::string& out);
// Strict RFC 4648 §4 decoding into `out` (replaced): false on a character outside the
// alphabet, bad padding, or a length that is not a multiple of 4.
bool base64_decode(std::string_view text, std::vector<uint8_t>& out);

// One mono PCM16 rate converter (speexdsp). Rates equal: a copy. Its filter state carries
// across calls, so a stream cut into arbitrary pieces comes out as one stream.
class Resampler {
 public:
  Resampler(int in_rate, int out_rate);
  ~Resampler();
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;

  // Appends the converted samples of `in` to `out`.
  void process(std::span<const int16_t> in, std::vector<int16_t>& out);
  // The filter holds the last few milliseconds of its input (its delay: 4 ms at the default
  // quality from 8 kHz). flush() appends them to `out` (by feeding the delay's worth of
  // silence) and starts afresh: a stream that goes quiet, whose next sound must not begin
  // with the end of the last. reset() forgets them: a clear, after which none may play.
  void flush(std::vector<int16_t>& out);
  void reset();
  int in_rate() const { return in_rate_; }
  int out_rate() const { return out_rate_; }

 private:
  struct State;
  int in_rate_;
  int out_rate_;
  std::unique_ptr<State> state_;  // null when the rates are equal
};

// Why an inbound message was refused (counted as protocol_errors by the connection).
#define RTCE_REALTIME_DIALECT_ERRORS(X)                                  \
  X(not_json, "the text frame is not valid JSON")                        \
  X(not_an_event, "the message is not a JSON object with a string type") \
  X(bad_delta, "an audio delta has no base64 string delta")              \
  X(odd_delta, "an audio delta is not a whole number of PCM16 samples")  \
  X(binary_frame, "a binary frame (the realtime dialect carries audio in JSON)")

RTCE_DECLARE_MESSAGE_VOCAB(RealtimeDialectError, RTCE_REALTIME_DIALECT_ERRORS, realtime_dialect_error_name,
                           realtime_dialect_error_message);

enum class RealtimeInboundKind {
  event,  // pass `event` on to the session
  audio,  // `frames` more 20 ms frames are ready (frame(i)); nothing to pass on
  clear,  // barge-in (the server's VAD heard the caller): clear, then pass `event` on
  invalid,
};

struct RealtimeInbound {
  RealtimeInboundKind kind = RealtimeInboundKind::invalid;
  nlohmann::json event;                       // event, clear
  size_t frames = 0;                          // audio
  std::optional<RealtimeDialectError> error;  // invalid
};

class RealtimeDialect {
 public:
  // `sample_rate`: the session's PCM rate, a multiple of 50 Hz in 8..48 kHz. What it keeps
  // between deltas is less than one frame; what one delta yields is bounded by the size of
  // the message (the connection's max_message_bytes).
  explicit RealtimeDialect(int sample_rate);

  // The first message on the socket: session.update with `session_config` (an object, or
  // null for none) and the audio formats pinned to PCM16 at 24 kHz both ways, since the
  // transceiver transcodes to exactly that whatever the caller's codec.
  std::string session_update(const nlohmann::json& session_config) const;

  // One 20 ms frame of caller audio as input_audio_buffer.append, written into `out` (its
  // buffer is reused). False when the resampler produced nothing yet (nothing to send).
  bool encode_audio(std::span<const int16_t> pcm_20ms, std::string& out);

  // A client event as text. session.update has its audio formats pinned as above.
  std::string encode_event(const nlohmann::json& event) const;

  // Classifies one text frame from the server. Audio deltas are decoded, resampled to the
  // session's rate and cut into 20 ms frames; the remainder waits for the next delta.
  RealtimeInbound decode_text(std::string_view text);
  // Binary frames have no meaning in this dialect.
  static RealtimeInbound decode_binary() {
    return {.kind = RealtimeInboundKind::invalid, .error = RealtimeDialectError::binary_frame};
  }

  // Frame i (< frames of the last audio result) at the session's rate; valid until the
  // next decode_text.
  std::span<const int16_t> frame(size_t i) const;
  size_t frame_samples() const { return frame_samples_; }
  // Samples (at the session's rate) waiting for the next delta to complete a frame.
  size_t pending_samples() const { return pending_.size(); }
  // Drops the partial frame, for a barge-in: what the server said before it no longer plays.
  void clear_pending() { pending_.clear(); }

 private:
  const size_t frame_samples_;
  Resampler up_;    // session rate -> 24 kHz
  Resampler down_;  // 24 kHz -> session rate
  std::vector<int16_t> up_scratch_;
  std::vector<uint8_t> delta_bytes_;
  std::vector<int16_t> delta_pcm_;
  std::vector<int16_t> pending_;  // converted samples: < 1 frame after each decode
  std::vector<int16_t> ready_;    // whole frames of the last audio result
};

}  // namespace rtce
