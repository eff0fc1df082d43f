// twilio_stream.h — the Twilio Media Streams WebSocket protocol, sans I/O: a reader that
// turns each inbound text message (connected, start, media, dtmf, mark, stop) into an event
// or a named refusal, and the outbound messages (media, mark, clear) a bidirectional
// stream sends back. Wire shapes: https://www.twilio.com/docs/voice/media-streams/websocket-messages
//
// The audio is 8 kHz mono μ-law (audio/g711.h) in 20 ms frames of 160 bytes. One reader
// per stream, on one thread. A refused message changes nothing in the reader; whether to
// ignore it or close the stream is the caller's decision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "media_stream.h"

namespace rtce {

inline constexpr size_t kTwilioFrameBytes = 160;  // 20 ms of 8 kHz μ-law
inline constexpr size_t kMaxMediaFrames = 10;     // per inbound media message
// Bigger messages are refused by the WebSocket itself (close 1009), and by the reader.
inline constexpr size_t kTwilioMaxMessageBytes = 16 * 1024;
// Twilio's messages nest three levels (start.customParameters); anything deeper is hostile.
inline constexpr size_t kTwilioMaxJsonDepth = 8;
// Twilio's sids are 34 characters; the stream's goes back in every media message we send.
inline constexpr size_t kTwilioMaxSidBytes = 64;
inline constexpr size_t kTwilioMaxCustomParameters = 32;
inline constexpr size_t kTwilioMaxCustomParameterBytes = 1024;  // a name, or a value
inline constexpr size_t kTwilioMaxMarkNameBytes = 256;

class TwilioStreamCodec final : public MediaStreamCodec {
 public:
  // One inbound text message. Media, dtmf and mark need the start first; after it, they and
  // stop must name its streamSid. A stop before start is accepted (Twilio may end a stream
  // that never started); after stop, messages are still read.
  MediaStreamReadResult read(std::string_view text) override;

  bool started() const override { return started_; }
  bool stopped() const { return stopped_; }
  // The start message's contents; empty fields before started().
  const MediaStreamStart& start() const { return start_; }
  // Ours, for the stream the start named.
  void media_message(std::span<const uint8_t> g711, std::string& out) const override;
  std::string mark_message(std::string_view name) const override;
  std::string clear_message() const override;

 private:
  MediaStreamReadResult read_start(const nlohmann::json& message);
  MediaStreamReadResult read_media(const nlohmann::json& message);
  bool names_our_stream(const nlohmann::json& message) const;

  bool started_ = false;
  bool stopped_ = false;
  MediaStreamStart start_;
  // Decoded media payloads, reused: once it has grown to a full message, reading media
  // allocates nothing but the JSON tree.
  std::vector<uint8_t> payload_;
};

// Outbound messages (server → Twilio), every string JSON-escaped.
// {"event":"media","streamSid":"..","media":{"payload":"<base64 μ-law>"}}, written into
// `out` (replaced; reuse it across calls so that a warm string allocates nothing).
void twilio_media_message(std::string_view stream_sid, std::span<const uint8_t> ulaw, std::string& out);
// {"event":"mark","streamSid":"..","mark":{"name":".."}}: Twilio echoes the mark back once
// the media sent before it has played (or was cleared).
std::string twilio_mark_message(std::string_view stream_sid, std::string_view name);
// {"event":"clear","streamSid":".."}: drop the media Twilio has buffered (barge-in).
std::string twilio_clear_message(std::string_view stream_sid);

}  // namespace rtce
