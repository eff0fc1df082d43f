// media_stream.h — what every phone provider's media-stream WebSocket comes down to, sans
// I/O: the events a stream's inbound messages are read into (start, 20 ms G.711 media, DTMF,
// marks played back, stop), the named refusals of hostile or broken messages, and the codec
// interface a provider's dialect implements (twilio_stream.h, telnyx_stream.h), so that the
// phone session that drives a Call is written once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vocab.h"

namespace rtce {

// The bounds of every provider's stream (Twilio's names: its stream came first).
inline constexpr size_t kTwilioFrameBytes = 160;  // 20 ms of 8 kHz μ-law
inline constexpr size_t kMaxMediaFrames = 10;     // per inbound media message
// Bigger messages are refused by the WebSocket itself (close 1009), and by the reader.
inline constexpr size_t kTwilioMaxMessageBytes = 16 * 1024;
// A provider's messages nest three levels (start.customParameters); anything deeper is hostile.
inline constexpr size_t kTwilioMaxJsonDepth = 8;
// Twilio's sids are 34 characters; the stream's goes back in every media message we send.
inline constexpr size_t kTwilioMaxSidBytes = 64;
inline constexpr size_t kTwilioMaxCustomParameters = 32;
inline constexpr size_t kTwilioMaxCustomParameterBytes = 1024;  // a name, or a value
inline constexpr size_t kTwilioMaxMarkNameBytes = 256;

// Why an inbound message was refused: the enum, and a sentence for logs.
#define RTCE_MEDIA_STREAM_REFUSALS(X)                                                                      \
  X(too_large, "the message is larger than 16 KiB")                                                        \
  X(too_deep, "the JSON nests deeper than 8 levels")                                                       \
  X(not_json, "the text message is not valid JSON")                                                        \
  X(not_an_event, "the message is not a JSON object with a string \"event\"")                              \
  X(unknown_event, "the event is not one the provider's stream has (connected, start, media, dtmf, ...)")  \
  X(before_start, "a media, dtmf or mark message came before the start message")                           \
  X(repeated_start, "a second start message")                                                              \
  X(bad_start,                                                                                             \
    "the start message lacks the stream's or the call's id (or one is too long), its media format is not " \
    "G.711 mu-law at 8000 Hz mono, or its custom parameters are not at most 32 of at most 1 KiB each")     \
  X(stream_mismatch, "the stream id is not the one the start message named")                               \
  X(bad_media, "a media message has no valid base64 payload, a track other than inbound, or a bad number") \
  X(bad_payload_size, "a media payload is empty, not whole 160-byte frames, or more than 10 frames")       \
  X(bad_dtmf, "a dtmf message's digit is not one of 0-9, *, #, A-D")                                       \
  X(bad_mark, "a mark message has no string name, or one longer than 256 bytes")

RTCE_DECLARE_MESSAGE_VOCAB(MediaStreamRefusal, RTCE_MEDIA_STREAM_REFUSALS, media_stream_refusal_name,
                           media_stream_refusal_message);

// What the start message said about the call.
struct MediaStreamStart {
  std::string stream_sid;
  std::string call_sid;
  std::string account_sid;  // empty when absent
  std::vector<std::string> tracks;
  // The <Parameter>s of the TwiML, sorted by name (they arrive as a JSON object, whose
  // order means nothing); a value that is not a JSON string is its JSON text. At most
  // kTwilioMaxCustomParameters, each name and value at most kTwilioMaxCustomParameterBytes,
  // else the start is bad_start.
  std::vector<std::pair<std::string, std::string>> custom_parameters;
};

enum class MediaStreamEventKind : uint8_t { connected, start, media, dtmf, mark, stop, error };

struct MediaStreamEvent {
  MediaStreamEventKind kind = MediaStreamEventKind::connected;
  const MediaStreamStart* start = nullptr;  // start: the reader's copy (lives as long as the reader)
  std::span<const uint8_t> ulaw;            // media: the decoded payload, valid until the next read()
  uint64_t chunk = 0;                       // media: the provider's counter of media messages, from 1
  uint64_t timestamp_ms = 0;                // media: from the start of the stream
  char digit = 0;                           // dtmf: 0-9 * # A-D
  std::string mark_name;                    // mark: the name of a mark we sent, now played
  // error: what the provider says went wrong with the stream (Telnyx's "error" event: its
  // code, title and detail), for logs; the stream goes on, so the reader is not refused.
  std::string text;
};

// Exactly one of the two is set.
struct MediaStreamReadResult {
  std::optional<MediaStreamEvent> event;
  std::optional<MediaStreamRefusal> refusal;
};

// One provider's dialect of the media-stream WebSocket, for one stream: reads the provider's
// messages in order and writes ours (after the start, which names the stream).
class MediaStreamCodec {
 public:
  virtual ~MediaStreamCodec() = default;
  virtual MediaStreamReadResult read(std::string_view text) = 0;
  virtual bool started() const = 0;
  // 20 ms of G.711 (the payload of one media message) into `out` (replaced; reused, so that a
  // warm string allocates nothing).
  virtual void media_message(std::span<const uint8_t> g711, std::string& out) const = 0;
  // A mark the provider plays back once the media sent before it has played (or was cleared).
  virtual std::string mark_message(std::string_view name) const = 0;
  // Drop the media buffered and not yet played (barge-in).
  virtual std::string clear_message() const = 0;
};

}  // namespace rtce
