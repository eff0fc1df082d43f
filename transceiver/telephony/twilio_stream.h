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

#include "vocab.h"

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

// Why an inbound message was refused: the enum, and a sentence for logs.
#define RTCE_TWILIO_STREAM_REFUSALS(X)                                                                     \
  X(too_large, "the message is larger than 16 KiB")                                                        \
  X(too_deep, "the JSON nests deeper than 8 levels")                                                       \
  X(not_json, "the text message is not valid JSON")                                                        \
  X(not_an_event, "the message is not a JSON object with a string \"event\"")                              \
  X(unknown_event, "the event is not connected, start, media, dtmf, mark or stop")                         \
  X(before_start, "a media, dtmf or mark message came before the start message")                           \
  X(repeated_start, "a second start message")                                                              \
  X(bad_start,                                                                                             \
    "the start message lacks streamSid or callSid (or one is over 64 bytes), its media format is not "     \
    "audio/x-mulaw at 8000 Hz mono, or its customParameters are not at most 32 of at most 1 KiB each")     \
  X(stream_mismatch, "the streamSid is not the one the start message named")                               \
  X(bad_media, "a media message has no valid base64 payload, a track other than inbound, or a bad number") \
  X(bad_payload_size, "a media payload is empty, not whole 160-byte frames, or more than 10 frames")       \
  X(bad_dtmf, "a dtmf message's digit is not one of 0-9, *, #, A-D")                                       \
  X(bad_mark, "a mark message has no string name, or one longer than 256 bytes")

RTCE_DECLARE_MESSAGE_VOCAB(TwilioStreamRefusal, RTCE_TWILIO_STREAM_REFUSALS, twilio_stream_refusal_name,
                           twilio_stream_refusal_message);

// What the start message said about the call.
struct TwilioStart {
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

enum class TwilioEventKind : uint8_t { connected, start, media, dtmf, mark, stop };

struct TwilioEvent {
  TwilioEventKind kind = TwilioEventKind::connected;
  const TwilioStart* start = nullptr;  // start: the reader's copy (lives as long as the reader)
  std::span<const uint8_t> ulaw;       // media: the decoded payload, valid until the next read()
  uint64_t chunk = 0;                  // media: Twilio's counter of media messages, from 1
  uint64_t timestamp_ms = 0;           // media: from the start of the stream
  char digit = 0;                      // dtmf: 0-9 * # A-D
  std::string mark_name;               // mark: the name of a mark we sent, now played
};

// Exactly one of the two is set.
struct TwilioReadResult {
  std::optional<TwilioEvent> event;
  std::optional<TwilioStreamRefusal> refusal;
};

class TwilioStreamReader {
 public:
  // One inbound text message. Media, dtmf and mark need the start first; after it, they and
  // stop must name its streamSid. A stop before start is accepted (Twilio may end a stream
  // that never started); after stop, messages are still read.
  TwilioReadResult read(std::string_view text);

  bool started() const { return started_; }
  bool stopped() const { return stopped_; }
  // The start message's contents; empty fields before started().
  const TwilioStart& start() const { return start_; }

 private:
  TwilioReadResult read_start(const nlohmann::json& message);
  TwilioReadResult read_media(const nlohmann::json& message);
  bool names_our_stream(const nlohmann::json& message) const;

  bool started_ = false;
  bool stopped_ = false;
  TwilioStart start_;
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
