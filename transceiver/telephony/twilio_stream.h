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
#include "media_stream_json.h"

namespace rtce {

class TwilioStreamCodec final : public JsonStreamCodec {
 public:
  TwilioStreamCodec() : JsonStreamCodec("streamSid") {}
  // Ours, for the stream the start named.
  void media_message(std::span<const uint8_t> g711, std::string& out) const override;
  std::string mark_message(std::string_view name) const override;
  std::string clear_message() const override;

 private:
  std::optional<MediaStreamStart> parse_start(const nlohmann::json& message) const override;
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
