// twilio_stream.cpp — see twilio_stream.h.
#include "twilio_stream.h"

#include <nlohmann/json.hpp>

#include "json_depth.h"
#include "realtime_dialect.h"  // base64_append, base64_decode

namespace rtce {
namespace {

using json = nlohmann::json;

MediaStreamReadResult refuse(MediaStreamRefusal refusal) {
  return {.event = std::nullopt, .refusal = refusal};
}
MediaStreamReadResult accept(MediaStreamEvent event) {
  return {.event = std::move(event), .refusal = std::nullopt};
}
MediaStreamReadResult accept(MediaStreamEventKind kind) { return accept(MediaStreamEvent{.kind = kind}); }

// The member `key` of `object`, or nullptr.
const json* member(const json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() ? &*it : nullptr;
}

// The member `key` of `object` when it is a string, else nullptr.
const std::string* string_member(const json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

// The member `key` of `object` when it is an object, else nullptr.
const json* object_member(const json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_object() ? &*it : nullptr;
}

// Twilio sends its counters as decimal strings ("chunk":"1"); a JSON number is taken too.
std::optional<uint64_t> decimal(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) {
    const auto n = value.get<int64_t>();
    return n >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(n)) : std::nullopt;
  }
  if (!value.is_string()) return std::nullopt;
  const auto& text = value.get_ref<const std::string&>();
  if (text.empty() || text.size() > 19) return std::nullopt;  // 19 digits cannot overflow
  uint64_t n = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// A missing member is `fallback`; a present one must be a decimal.
std::optional<uint64_t> decimal_member(const json& object, std::string_view key, uint64_t fallback) {
  const json* value = member(object, key);
  return value ? decimal(*value) : std::optional<uint64_t>(fallback);
}

bool is_dtmf_digit(char c) {
  return (c >= '0' && c <= '9') || c == '*' || c == '#' || (c >= 'A' && c <= 'D');
}

// The length of the well-formed UTF-8 sequence (RFC 3629) at the start of `text`, or 0.
size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](size_t i) { return i < text.size() ? static_cast<uint8_t>(text[i]) : 0; };
  const auto continuation = [&](size_t i) { return (byte(i) & 0xC0) == 0x80; };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return continuation(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    // E0 needs A0.. (no overlong forms), ED stops at 9F (no surrogates).
    const uint8_t low = lead == 0xE0 ? 0xA0 : 0x80;
    const uint8_t high = lead == 0xED ? 0x9F : 0xBF;
    return byte(1) >= low && byte(1) <= high && continuation(2) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    // F0 needs 90.. (no overlong forms), F4 stops at 8F (nothing above U+10FFFF).
    const uint8_t low = lead == 0xF0 ? 0x90 : 0x80;
    const uint8_t high = lead == 0xF4 ? 0x8F : 0xBF;
    return byte(1) >= low && byte(1) <= high && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

// Appends `text` as a JSON string, quotes included. A byte that is not part of well-formed
// UTF-8 becomes U+FFFD, so that whatever the caller passes, the message is valid JSON.
void append_json_string(std::string_view text, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      out.append("\\u00").push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    } else if (c >= 0x80) {
      const size_t length = utf8_sequence_length(text.substr(i));
      if (length == 0) {
        out.append("\\ufffd");
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    } else {
      out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  out.push_back('"');
}

}  // namespace

MediaStreamReadResult TwilioStreamCodec::read(std::string_view text) {
  if (text.size() > kTwilioMaxMessageBytes) return refuse(MediaStreamRefusal::too_large);
  if (json_nests_deeper_than(text, kTwilioMaxJsonDepth)) return refuse(MediaStreamRefusal::too_deep);
  const json message = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) return refuse(MediaStreamRefusal::not_json);
  if (!message.is_object()) return refuse(MediaStreamRefusal::not_an_event);
  const std::string* event = string_member(message, "event");
  if (!event) return refuse(MediaStreamRefusal::not_an_event);

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
  if (*event == "dtmf") {
    const json* dtmf = object_member(message, "dtmf");
    const std::string* digit = dtmf ? string_member(*dtmf, "digit") : nullptr;
    if (!digit || digit->size() != 1 || !is_dtmf_digit((*digit)[0]))
      return refuse(MediaStreamRefusal::bad_dtmf);
    return accept(MediaStreamEvent{.kind = MediaStreamEventKind::dtmf, .digit = (*digit)[0]});
  }
  const json* mark = object_member(message, "mark");
  const std::string* name = mark ? string_member(*mark, "name") : nullptr;
  if (!name || name->size() > kTwilioMaxMarkNameBytes) return refuse(MediaStreamRefusal::bad_mark);
  return accept(MediaStreamEvent{.kind = MediaStreamEventKind::mark, .mark_name = *name});
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
  if (!format) return bad();
  const std::string* encoding = string_member(*format, "encoding");
  const json* rate_member = member(*format, "sampleRate");
  const json* channels_member = member(*format, "channels");
  const auto rate = rate_member ? decimal(*rate_member) : std::nullopt;
  const auto channels = channels_member ? decimal(*channels_member) : std::nullopt;
  if (!encoding || *encoding != "audio/x-mulaw" || rate != 8000u || channels != 1u) return bad();

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
  if (const auto it = start->find("customParameters"); it != start->end()) {
    if (!it->is_object() || it->size() > kTwilioMaxCustomParameters) return bad();
    for (const auto& [name, value] : it->items()) {
      std::string text = value.is_string() ? value.get<std::string>()
                                           : value.dump(-1, ' ', false, json::error_handler_t::replace);
      if (name.size() > kTwilioMaxCustomParameterBytes || text.size() > kTwilioMaxCustomParameterBytes)
        return bad();
      parsed.custom_parameters.emplace_back(name, std::move(text));
    }
  }
  start_ = std::move(parsed);
  started_ = true;
  return accept(MediaStreamEvent{.kind = MediaStreamEventKind::start, .start = &start_});
}

MediaStreamReadResult TwilioStreamCodec::read_media(const json& message) {
  const auto bad = [] { return refuse(MediaStreamRefusal::bad_media); };
  const json* media = object_member(message, "media");
  if (!media) return bad();
  // A bidirectional stream carries the caller only; "outbound" would be our own audio.
  if (const auto it = media->find("track"); it != media->end() && (!it->is_string() || *it != "inbound"))
    return bad();
  const auto chunk = decimal_member(*media, "chunk", 0);
  const auto timestamp = decimal_member(*media, "timestamp", 0);
  if (!chunk || !timestamp) return bad();
  const std::string* payload = string_member(*media, "payload");
  if (!payload) return bad();
  // Sized before decoding: a payload longer than the largest allowed costs no decode.
  constexpr size_t kMaxPayloadChars = (kMaxMediaFrames * kTwilioFrameBytes + 2) / 3 * 4;
  if (payload->size() > kMaxPayloadChars) return refuse(MediaStreamRefusal::bad_payload_size);
  if (!base64_decode(*payload, payload_)) return bad();
  if (payload_.empty() || payload_.size() % kTwilioFrameBytes != 0 ||
      payload_.size() > kMaxMediaFrames * kTwilioFrameBytes)
    return refuse(MediaStreamRefusal::bad_payload_size);
  return accept(MediaStreamEvent{
      .kind = MediaStreamEventKind::media, .ulaw = payload_, .chunk = *chunk, .timestamp_ms = *timestamp});
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
