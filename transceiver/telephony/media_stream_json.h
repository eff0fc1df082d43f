// media_stream_json.h — the JSON pieces every provider's media-stream codec shares (Twilio's,
// Telnyx's): parsing an untrusted message under size and depth bounds, typed member lookups,
// counters sent as strings or numbers, the base64 G.711 payload decoded into a reused
// buffer with its frame checks, DTMF and mark events, the custom parameters of a start, and
// JSON string escaping for our outbound messages. The dialects differ in member names and
// ids; these are the parts where they do not, written once so that both refuse alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "media_stream.h"

namespace rtce::stream_json {

using json = nlohmann::json;

inline MediaStreamReadResult refuse(MediaStreamRefusal refusal) {
  return {.event = std::nullopt, .refusal = refusal};
}
inline MediaStreamReadResult accept(MediaStreamEvent event) {
  return {.event = std::move(event), .refusal = std::nullopt};
}
inline MediaStreamReadResult accept(MediaStreamEventKind kind) {
  return accept(MediaStreamEvent{.kind = kind});
}

// Parses one inbound message into `message`. Refuses, in this order: more than `max_bytes`
// (too_large), nesting deeper than `max_depth` (too_deep, checked before parsing so that
// hostile text never builds a deep tree), not JSON (not_json), not an object with a string
// "event" (not_an_event). nullopt: `message` is such an object.
std::optional<MediaStreamRefusal> parse_message(std::string_view text, size_t max_bytes, size_t max_depth,
                                                json& message);

// The member `key` of `object`: any value, a string, an object; nullptr when absent or of
// another type.
const json* member(const json& object, std::string_view key);
const std::string* string_member(const json& object, std::string_view key);
const json* object_member(const json& object, std::string_view key);

// Providers send counters as decimal strings ("chunk":"1"); a JSON number is taken too.
// At most 19 digits (cannot overflow); negative, fractional or other text is nullopt.
std::optional<uint64_t> decimal(const json& value);
// A missing member is `fallback`; a present one must be a decimal.
std::optional<uint64_t> decimal_member(const json& object, std::string_view key, uint64_t fallback);

// Decodes a media message's base64 `payload` into `out` (reused: once it has held the
// largest payload, decoding allocates nothing). Refuses bad_payload_size when the text is
// longer than `max_frames` frames could encode to (before decoding, so that it costs
// nothing) or the bytes are not 1..max_frames whole frames of `frame_bytes`; bad_media when
// it is not RFC 4648 base64.
std::optional<MediaStreamRefusal> decode_payload(std::string_view payload, size_t frame_bytes,
                                                 size_t max_frames, std::vector<uint8_t>& out);

// {"media":{"track":"inbound","chunk":"2","timestamp":"5","payload":"<base64 G.711>"}}, the
// member both providers send, into a media event whose payload is decoded into `payload`
// (see decode_payload); bad_media for a track other than inbound (with both tracks streamed,
// "outbound" would be our own audio), a bad counter or no payload.
MediaStreamReadResult read_media(const json& message, size_t frame_bytes, size_t max_frames,
                                 std::vector<uint8_t>& payload);
// Whether a start's media format object is 8 kHz mono G.711 μ-law, the one format the
// phone session decodes: `encoding` one of `encodings`, the rate under `rate_key`.
bool is_mulaw_8k_mono(const json& format, std::string_view rate_key,
                      std::initializer_list<std::string_view> encodings);
// 0-9 * # A-D: the sixteen DTMF tones.
bool is_dtmf_digit(char c);

// {"dtmf":{"digit":"1"}} → a dtmf event, else bad_dtmf.
MediaStreamReadResult read_dtmf(const json& message);
// {"mark":{"name":".."}} → a mark event, else bad_mark (also a name over `max_name_bytes`).
MediaStreamReadResult read_mark(const json& message, size_t max_name_bytes);

// A start's custom parameters (a JSON object) into `out`, in the object's order (nlohmann
// keeps keys sorted); a value that is not a string becomes its JSON text. False when
// `value` is not an object, has more than `max_count` members, or a name or value is over
// `max_bytes`.
bool read_custom_parameters(const json& value, size_t max_count, size_t max_bytes,
                            std::vector<std::pair<std::string, std::string>>& out);

// The length of the well-formed UTF-8 sequence (RFC 3629) at the start of `text`, or 0.
size_t utf8_sequence_length(std::string_view text);

// Appends `text` as a JSON string, quotes included. A byte that is not part of well-formed
// UTF-8 becomes U+FFFD, so that whatever the caller passes, the message is valid JSON.
void append_json_string(std::string_view text, std::string& out);

}  // namespace rtce::stream_json

namespace rtce {

// A provider's stream whose messages are JSON objects with an "event" (Twilio's, Telnyx's):
// the order every such stream keeps — connected, one start, then media, dtmf and mark naming
// the started stream, stop — read once here; a dialect says how its start reads, what its
// stream id is called, and what other events it has.
class JsonStreamCodec : public MediaStreamCodec {
 public:
  // Media, dtmf and mark need the start first; after it, they and stop must name its stream.
  // A stop before start is accepted (a stream that failed to begin).
  MediaStreamReadResult read(std::string_view text) final;
  bool started() const final { return started_; }
  bool stopped() const { return stopped_; }
  // The start message's contents; empty fields before started().
  const MediaStreamStart& start() const { return start_; }

 protected:
  explicit JsonStreamCodec(std::string_view stream_id_key) : stream_id_key_(stream_id_key) {}
  // The dialect's start message (the whole message), or nullopt: bad_start.
  virtual std::optional<MediaStreamStart> parse_start(const nlohmann::json& message) const = 0;
  // An event only this dialect has; nullopt: unknown_event.
  virtual std::optional<MediaStreamReadResult> read_other(std::string_view /*event*/,
                                                          const nlohmann::json& /*message*/) const {
    return std::nullopt;
  }
  bool names_our_stream(const nlohmann::json& message) const;

 private:
  const std::string_view stream_id_key_;
  bool started_ = false;
  bool stopped_ = false;
  MediaStreamStart start_;
  // Decoded media payloads, reused: once it has grown to a full message, reading media
  // allocates nothing but the JSON tree.
  std::vector<uint8_t> payload_;
};

}  // namespace rtce
