// twilio_stream.cpp — see twilio_stream.h.
#include "twilio_stream.h"

#include <nlohmann/json.hpp>

#include "media_stream_json.h"
#include "realtime_dialect.h"  // base64_append

namespace rtce {

using stream_json::accept;
using stream_json::append_json_string;
using stream_json::decimal;
using stream_json::decimal_member;
using stream_json::json;
using stream_json::member;
using stream_json::object_member;
using stream_json::refuse;
using stream_json::string_member;

MediaStreamReadResult TwilioStreamCodec::read(std::string_view text) {
  json message;
  if (const auto refusal =
          stream_json::parse_message(text, kTwilioMaxMessageBytes, kTwilioMaxJsonDepth, message))
    return refuse(*refusal);
  const std::string* event = string_member(message, "event");

  if (*event == "connected") return accept(MediaStreamEventKind::connected);
  if (*event == "start") return read_start(message);
  if (*event == "stop") {
    if (started_ && !names_our_stream(message)) return refuse(MediaStreamRefusal::stream_mismatch);
    stopped_ = true;
    return accept(MediaStreamEventKind::stop);
  }
  if (*event != "media" && *event != "dtmf" && *event != "mark")
    return refuse(MediaStreamRefusal::unknown_event);
  if (!started_) return refuse(MediaStreamRefusal::before_start);
  if (!names_our_stream(message)) return refuse(MediaStreamRefusal::stream_mismatch);
  if (*event == "media") return read_media(message);
  if (*event == "dtmf") return stream_json::read_dtmf(message);
  return stream_json::read_mark(message, kTwilioMaxMarkNameBytes);
}

bool TwilioStreamCodec::names_our_stream(const json& message) const {
  const std::string* sid = string_member(message, "streamSid");
  return sid && *sid == start_.stream_sid;
}

MediaStreamReadResult TwilioStreamCodec::read_start(const json& message) {
  if (started_) return refuse(MediaStreamRefusal::repeated_start);
  const auto bad = [] { return refuse(MediaStreamRefusal::bad_start); };
  const json* start = object_member(message, "start");
  if (!start) return bad();
  // The sid is in the message and in its start object; either will do, but not two.
  const std::string* outer_sid = string_member(message, "streamSid");
  const std::string* inner_sid = string_member(*start, "streamSid");
  const std::string* stream_sid = inner_sid ? inner_sid : outer_sid;
  const auto valid_sid = [](const std::string* sid) {
    return sid && !sid->empty() && sid->size() <= kTwilioMaxSidBytes;
  };
  if (!valid_sid(stream_sid) || (outer_sid && inner_sid && *outer_sid != *inner_sid)) return bad();
  const std::string* call_sid = string_member(*start, "callSid");
  if (!valid_sid(call_sid)) return bad();

  // Only what we can decode: 8 kHz mono μ-law, the one format Twilio streams today.
  const json* format = object_member(*start, "mediaFormat");
  if (!format || !stream_json::is_mulaw_8k_mono(*format, "sampleRate", {"audio/x-mulaw"})) return bad();

  MediaStreamStart parsed;
  parsed.stream_sid = *stream_sid;
  parsed.call_sid = *call_sid;
  if (const auto it = start->find("accountSid"); it != start->end()) {
    if (!it->is_string() || it->get_ref<const std::string&>().size() > kTwilioMaxSidBytes) return bad();
    parsed.account_sid = it->get<std::string>();
  }
  if (const auto it = start->find("tracks"); it != start->end()) {
    if (!it->is_array()) return bad();
    for (const json& track : *it) {
      if (!track.is_string()) return bad();
      parsed.tracks.push_back(track.get<std::string>());
    }
  }
  if (const json* parameters = member(*start, "customParameters");
      parameters &&
      !stream_json::read_custom_parameters(*parameters, kTwilioMaxCustomParameters,
                                           kTwilioMaxCustomParameterBytes, parsed.custom_parameters))
    return bad();
  start_ = std::move(parsed);
  started_ = true;
  return accept(MediaStreamEvent{.kind = MediaStreamEventKind::start, .start = &start_});
}

MediaStreamReadResult TwilioStreamCodec::read_media(const json& message) {
  return stream_json::read_media(message, kTwilioFrameBytes, kMaxMediaFrames, payload_);
}

void twilio_media_message(std::string_view stream_sid, std::span<const uint8_t> ulaw, std::string& out) {
  out.clear();
  out.append(R"({"event":"media","streamSid":)");
  append_json_string(stream_sid, out);
  out.append(R"(,"media":{"payload":")");
  base64_append(ulaw, out);
  out.append("\"}}");
}

std::string twilio_mark_message(std::string_view stream_sid, std::string_view name) {
  std::string out(R"({"event":"mark","streamSid":)");
  append_json_string(stream_sid, out);
  out.append(R"(,"mark":{"name":)");
  append_json_string(name, out);
  out.append("}}");
  return out;
}

std::string twilio_clear_message(std::string_view stream_sid) {
  std::string out(R"({"event":"clear","streamSid":)");
  append_json_string(stream_sid, out);
  out.push_back('}');
  return out;
}

void TwilioStreamCodec::media_message(std::span<const uint8_t> g711, std::string& out) const {
  twilio_media_message(start_.stream_sid, g711, out);
}

std::string TwilioStreamCodec::mark_message(std::string_view name) const {
  return twilio_mark_message(start_.stream_sid, name);
}

std::string TwilioStreamCodec::clear_message() const { return twilio_clear_message(start_.stream_sid); }

}  // namespace rtce
