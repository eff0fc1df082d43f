// telnyx_stream.h — the Telnyx media-streaming WebSocket protocol, sans I/O: a reader that
// turns each inbound text message (connected, start, media, dtmf, mark, error, stop) into an
// event or a named refusal, and the outbound messages (media, mark, clear) a stream in
// bidirectional RTP mode sends back. Wire shapes:
// https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket
//
// Same audio, bounds and refusals as Twilio's codec (twilio_stream.h): 8 kHz mono μ-law in
// whole 160-byte frames. Telnyx does not promise that frames arrive in order; the reader
// takes them as they come (the chunk and timestamp are passed on, nothing is reordered).
// One reader per stream, on one thread; a refused message changes nothing in the reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "media_stream.h"
#include "media_stream_json.h"
#include "twilio_stream.h"  // the shared bounds: kTwilioFrameBytes, kMaxMediaFrames, kTwilioMax*

namespace rtce {

// Telnyx's stream_id is a UUID and its user_id one too, but a call_control_id
// ("v3:MdI91X4l…", "v2:T02llQxI…") runs to 150 characters in the documented examples of
// the v2 form: Twilio's 64-byte bound would refuse real calls.
inline constexpr size_t kTelnyxMaxIdBytes = 256;
// An error event's text is for logs: a longer one is cut (at a UTF-8 boundary), not refused.
inline constexpr size_t kTelnyxMaxErrorTextBytes = 512;

class TelnyxStreamCodec final : public JsonStreamCodec {
 public:
  // The start reads into stream_sid := stream_id, call_sid := call_control_id,
  // account_sid := user_id, tracks empty. An error is accepted at any time; after the start,
  // one that names a stream must name ours (one without stream_id is still reported: losing
  // it would hide the fault).
  TelnyxStreamCodec() : JsonStreamCodec("stream_id") {}
  // Ours. Telnyx's inbound side needs no stream_id: the WebSocket is the stream.
  void media_message(std::span<const uint8_t> g711, std::string& out) const override;
  std::string mark_message(std::string_view name) const override;
  std::string clear_message() const override;

 private:
  std::optional<MediaStreamStart> parse_start(const nlohmann::json& message) const override;
  std::optional<MediaStreamReadResult> read_other(std::string_view event,
                                                  const nlohmann::json& message) const override;
};

// Outbound messages (server → Telnyx), every string JSON-escaped.
// {"event":"media","media":{"payload":"<base64 μ-law>"}}, written into `out` (replaced;
// reuse it across calls so that a warm string allocates nothing).
void telnyx_media_message(std::span<const uint8_t> ulaw, std::string& out);
// {"event":"mark","mark":{"name":".."}}: Telnyx echoes the mark back once the media sent
// before it has played (or was cleared).
std::string telnyx_mark_message(std::string_view name);
// {"event":"clear"}: drop the media Telnyx has buffered (barge-in).
std::string telnyx_clear_message();

}  // namespace rtce
