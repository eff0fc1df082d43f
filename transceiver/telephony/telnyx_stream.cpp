// telnyx_stream.cpp — see telnyx_stream.h.
#include "telnyx_stream.h"

#include <nlohmann/json.hpp>

#include "media_stream_json.h"
#include "realtime_dialect.h"  // base64_append

namespace rtce {

using stream_json::accept;
using stream_json::append_json_string;
using stream_json::json;
using stream_json::member;
using stream_json::object_member;
using stream_json::refuse;
using stream_json::string_member;

namespace {

bool valid_id(const std::string* id) { return id && !id->empty() && id->size() <= kTelnyxMaxIdBytes; }

// `text` cut to at most `limit` bytes, not inside a UTF-8 sequence (the parser let only
// well-formed UTF-8 through, so backing off continuation bytes finds a boundary).
void truncate_utf8(std::string& text, size_t limit) {
  if (text.size() <= limit) return;
  size_t cut = limit;
  while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
}

// "<code> <title>: <detail>", each part when present: Telnyx's error payload for a log line.
std::string error_text(const json& message) {
  std::string text;
  const json* payload = object_member(message, "payload");
  if (!payload) return text;
  if (const json* code = member(*payload, "code"); code && (code->is_number() || code->is_string()))
    text = code->is_string() ? code->get<std::string>() : code->dump();
  if (const std::string* title = string_member(*payload, "title"); title && !title->empty())
    text.append(text.empty() ? "" : " ").append(*title);
  if (const std::string* detail = string_member(*payload, "detail"); detail && !detail->empty())
    text.append(text.empty() ? "" : ": ").append(*detail);
  truncate_utf8(text, kTelnyxMaxErrorTextBytes);
  return text;
}

}  // namespace

std::optional<MediaStreamReadResult> TelnyxStreamCodec::read_other(std::string_view event,
                                                                   const json& message) const {
  if (event != "error") return std::nullopt;
  if (started() && member(message, "stream_id") && !names_our_stream(message))
    return refuse(MediaStreamRefusal::stream_mismatch);
  return accept(MediaStreamEvent{.kind = MediaStreamEventKind::error, .text = error_text(message)});
}

std::optional<MediaStreamStart> TelnyxStreamCodec::parse_start(const json& message) const {
  const json* start = object_member(message, "start");
  if (!start) return std::nullopt;
  // The current docs put stream_id beside start, older ones inside it; either will do, but
  // not two different ones.
  const std::string* outer_id = string_member(message, "stream_id");
  const std::string* inner_id = string_member(*start, "stream_id");
  const std::string* stream_id = inner_id ? inner_id : outer_id;
  if (!valid_id(stream_id) || (outer_id && inner_id && *outer_id != *inner_id)) return std::nullopt;
  const std::string* call_control_id = string_member(*start, "call_control_id");
  if (!valid_id(call_control_id)) return std::nullopt;

  // Only what we can decode: 8 kHz mono μ-law. Without media_format the stream has Telnyx's
  // default codec, PCMU; the current docs spell it "PCMU", older ones "audio/x-mulaw".
  if (const json* format = member(*start, "media_format");
      format && !stream_json::is_mulaw_8k_mono(*format, "sample_rate", {"PCMU", "audio/x-mulaw"}))
    return std::nullopt;

  MediaStreamStart parsed;
  parsed.stream_sid = *stream_id;
  parsed.call_sid = *call_control_id;
  if (const json* user_id = member(*start, "user_id")) {
    if (!user_id->is_string() || user_id->get_ref<const std::string&>().size() > kTelnyxMaxIdBytes)
      return std::nullopt;
    parsed.account_sid = user_id->get<std::string>();
  }
  if (const json* parameters = member(*start, "custom_parameters");
      parameters &&
      !stream_json::read_custom_parameters(*parameters, kTwilioMaxCustomParameters,
                                           kTwilioMaxCustomParameterBytes, parsed.custom_parameters))
    return std::nullopt;
  return parsed;
}

void telnyx_media_message(std::span<const uint8_t> ulaw, std::string& out) {
  out.clear();
  out.append(R"({"event":"media","media":{"payload":")");
  base64_append(ulaw, out);
  out.append("\"}}");
}

std::string telnyx_mark_message(std::string_view name) {
  std::string out(R"({"event":"mark","mark":{"name":)");
  append_json_string(name, out);
  out.append("}}");
  return out;
}

std::string telnyx_clear_message() { return R"({"event":"clear"})"; }

void TelnyxStreamCodec::media_message(std::span<const uint8_t> g711, std::string& out) const {
  telnyx_media_message(g711, out);
}

std::string TelnyxStreamCodec::mark_message(std::string_view name) const { return telnyx_mark_message(name); }

std::string TelnyxStreamCodec::clear_message() const { return telnyx_clear_message(); }

}  // namespace rtce
