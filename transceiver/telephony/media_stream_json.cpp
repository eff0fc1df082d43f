// media_stream_json.cpp — see media_stream_json.h.
#include "media_stream_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "json_depth.h"
#include "realtime_dialect.h"  // base64_decode

namespace rtce::stream_json {

std::optional<MediaStreamRefusal> parse_message(std::string_view text, size_t max_bytes, size_t max_depth,
                                                json& message) {
  if (text.size() > max_bytes) return MediaStreamRefusal::too_large;
  if (json_nests_deeper_than(text, max_depth)) return MediaStreamRefusal::too_deep;
  message = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) return MediaStreamRefusal::not_json;
  if (!message.is_object() || !string_member(message, "event")) return MediaStreamRefusal::not_an_event;
  return std::nullopt;
}

const json* member(const json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() ? &*it : nullptr;
}

const std::string* string_member(const json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

const json* object_member(const json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_object() ? &*it : nullptr;
}

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

std::optional<uint64_t> decimal_member(const json& object, std::string_view key, uint64_t fallback) {
  const json* value = member(object, key);
  return value ? decimal(*value) : std::optional<uint64_t>(fallback);
}

std::optional<MediaStreamRefusal> decode_payload(std::string_view payload, size_t frame_bytes,
                                                 size_t max_frames, std::vector<uint8_t>& out) {
  const size_t max_bytes = max_frames * frame_bytes;
  const size_t max_chars = (max_bytes + 2) / 3 * 4;
  if (payload.size() > max_chars) return MediaStreamRefusal::bad_payload_size;
  if (!base64_decode(payload, out)) return MediaStreamRefusal::bad_media;
  if (out.empty() || out.size() % frame_bytes != 0 || out.size() > max_bytes)
    return MediaStreamRefusal::bad_payload_size;
  return std::nullopt;
}

bool is_dtmf_digit(char c) {
  return (c >= '0' && c <= '9') || c == '*' || c == '#' || (c >= 'A' && c <= 'D');
}

MediaStreamReadResult read_dtmf(const json& message) {
  const json* dtmf = object_member(message, "dtmf");
  const std::string* digit = dtmf ? string_member(*dtmf, "digit") : nullptr;
  if (!digit || digit->size() != 1 || !is_dtmf_digit((*digit)[0]))
    return refuse(MediaStreamRefusal::bad_dtmf);
  return accept(MediaStreamEvent{.kind = MediaStreamEventKind::dtmf, .digit = (*digit)[0]});
}

MediaStreamReadResult read_mark(const json& message, size_t max_name_bytes) {
  const json* mark = object_member(message, "mark");
  const std::string* name = mark ? string_member(*mark, "name") : nullptr;
  if (!name || name->size() > max_name_bytes) return refuse(MediaStreamRefusal::bad_mark);
  return accept(MediaStreamEvent{.kind = MediaStreamEventKind::mark, .mark_name = *name});
}

bool read_custom_parameters(const json& value, size_t max_count, size_t max_bytes,
                            std::vector<std::pair<std::string, std::string>>& out) {
  if (!value.is_object() || value.size() > max_count) return false;
  for (const auto& [name, item] : value.items()) {
    // A value's JSON text replaces bytes that are not UTF-8 rather than throwing.
    std::string text = item.is_string() ? item.get<std::string>()
                                        : item.dump(-1, ' ', false, json::error_handler_t::replace);
    if (name.size() > max_bytes || text.size() > max_bytes) return false;
    out.emplace_back(name, std::move(text));
  }
  return true;
}

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

MediaStreamReadResult read_media(const json& message, size_t frame_bytes, size_t max_frames,
                                 std::vector<uint8_t>& payload) {
  const auto bad = [] { return refuse(MediaStreamRefusal::bad_media); };
  const json* media = object_member(message, "media");
  if (!media) return bad();
  if (const auto it = media->find("track"); it != media->end() && (!it->is_string() || *it != "inbound"))
    return bad();
  const auto chunk = decimal_member(*media, "chunk", 0);
  const auto timestamp = decimal_member(*media, "timestamp", 0);
  if (!chunk || !timestamp) return bad();
  const std::string* text = string_member(*media, "payload");
  if (!text) return bad();
  if (const auto refusal = decode_payload(*text, frame_bytes, max_frames, payload)) return refuse(*refusal);
  return accept(MediaStreamEvent{
      .kind = MediaStreamEventKind::media, .ulaw = payload, .chunk = *chunk, .timestamp_ms = *timestamp});
}

bool is_mulaw_8k_mono(const json& format, std::string_view rate_key,
                      std::initializer_list<std::string_view> encodings) {
  if (!format.is_object()) return false;
  const std::string* encoding = string_member(format, "encoding");
  const json* rate = member(format, rate_key);
  const json* channels = member(format, "channels");
  if (!encoding || std::find(encodings.begin(), encodings.end(), *encoding) == encodings.end()) return false;
  return rate && decimal(*rate) == 8000u && channels && decimal(*channels) == 1u;
}

}  // namespace rtce::stream_json

namespace rtce {

MediaStreamReadResult JsonStreamCodec::read(std::string_view text) {
  using stream_json::accept;
  using stream_json::refuse;
  stream_json::json message;
  if (const auto refusal =
          stream_json::parse_message(text, kTwilioMaxMessageBytes, kTwilioMaxJsonDepth, message))
    return refuse(*refusal);
  const std::string& event = *stream_json::string_member(message, "event");
  if (event == "connected") return accept(MediaStreamEventKind::connected);
  if (event == "start") {
    if (started_) return refuse(MediaStreamRefusal::repeated_start);
    auto parsed = parse_start(message);
    if (!parsed) return refuse(MediaStreamRefusal::bad_start);
    start_ = std::move(*parsed);
    started_ = true;
    return accept(MediaStreamEvent{.kind = MediaStreamEventKind::start, .start = &start_});
  }
  if (event == "stop") {
    if (started_ && !names_our_stream(message)) return refuse(MediaStreamRefusal::stream_mismatch);
    stopped_ = true;
    return accept(MediaStreamEventKind::stop);
  }
  if (event != "media" && event != "dtmf" && event != "mark")
    return read_other(event, message).value_or(refuse(MediaStreamRefusal::unknown_event));
  if (!started_) return refuse(MediaStreamRefusal::before_start);
  if (!names_our_stream(message)) return refuse(MediaStreamRefusal::stream_mismatch);
  if (event == "media") return stream_json::read_media(message, kTwilioFrameBytes, kMaxMediaFrames, payload_);
  if (event == "dtmf") return stream_json::read_dtmf(message);
  return stream_json::read_mark(message, kTwilioMaxMarkNameBytes);
}

bool JsonStreamCodec::names_our_stream(const nlohmann::json& message) const {
  const std::string* id = stream_json::string_member(message, stream_id_key_);
  return id && *id == start_.stream_sid;
}

}  // namespace rtce
