// twilio_stream.cpp — see twilio_stream.h.
#include "twilio_stream.h"

#include <nlohmann/json.hpp>

#include "media_stream_json.h"
#include "realtime_dialect.h"  // base64_append

namespace rtce {

using stream_json::append_json_string;
using stream_json::json;
using stream_json::member;
using stream_json::object_member;
using stream_json::string_member;

std::optional<MediaStreamStart> TwilioStreamCodec::parse_start(const json& message) const {
  const json* start = object_member(message, "start");
  if (!start) return std::nullopt;
  // The sid is in the message and in its start object; either will do, but not two.
  const std::string* outer_sid = string_member(message, "streamSid");
  const std::string* inner_sid = string_member(*start, "streamSid");
  const std::string* stream_sid = inner_sid ? inner_sid : outer_sid;
  const auto valid_sid = [](const std::string* sid) {
    return sid && !sid->empty() && sid->size() <= kTwilioMaxSidBytes;
  };
  if (!valid_sid(stream_sid) || (outer_sid && inner_sid && *outer_sid != *inner_sid)) return std::nullopt;
  const std::string* call_sid = string_member(*start, "callSid");
  if (!valid_sid(call_sid)) return std::nullopt;

  // Only what we can decode: 8 kHz mono μ-law, the one format Twilio streams today.
  const json* format = object_member(*start, "mediaFormat");
  if (!format || !stream_json::is_mulaw_8k_mono(*format, "sampleRate", {"audio/x-mulaw"}))
    return std::nullopt;

  MediaStreamStart parsed;
  parsed.stream_sid = *stream_sid;
  parsed.call_sid = *call_sid;
  if (const auto it = start->find("accountSid"); it != start->end()) {
    if (!it->is_string() || it->get_ref<const std::string&>().size() > kTwilioMaxSidBytes)
      return std::nullopt;
    parsed.account_sid = it->get<std::string>();
  }
  if (const auto it = start->find("tracks"); it != start->end()) {
    if (!it->is_array()) return std::nullopt;
    for (const json& track : *it) {
      if (!track.is_string()) return std::nullopt;
      parsed.tracks.push_back(track.get<std::string>());
    }
  }
  if (const json* parameters = member(*start, "customParameters");
      parameters &&
      !stream_json::read_custom_parameters(*parameters, kTwilioMaxCustomParameters,
                                           kTwilioMaxCustomParameterBytes, parsed.custom_parameters))
    return std::nullopt;
  return parsed;
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
  twilio_media_message(start().stream_sid, g711, out);
}

std::string TwilioStreamCodec::mark_message(std::string_view name) const {
  return twilio_mark_message(start().stream_sid, name);
}

std::string TwilioStreamCodec::clear_message() const { return twilio_clear_message(start().stream_sid); }

}  // namespace rtce
