// fuzz_twilio_stream.cc — libFuzzer over the phone-provider pieces that read untrusted
// input. The input's lines are messages to one TwilioStreamCodec and one TelnyxStreamCodec,
// so that each one's state carries across them; the whole input is also a webhook form
// body, whose first line is the URL and second the signature, and a Telnyx webhook body
// checked against a fixed key. Asserts that each read is exactly an event or a refusal,
// that a refusal changes nothing, that media is whole frames and survives our own media
// message, that our outbound messages are JSON objects, that escaped XML attributes carry
// no markup, that a signature we compute is one we accept, and that a random Ed25519
// signature is not.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "form_urlencoded.h"
#include "realtime_dialect.h"  // base64_decode
#include "telnyx_stream.h"
#include "telnyx_webhook.h"
#include "twilio_stream.h"
#include "twilio_webhook.h"

namespace {

using json = nlohmann::json;

void check_outbound(std::string_view line) {
  for (const std::string& text : {rtce::twilio_mark_message(line, line), rtce::twilio_clear_message(line)}) {
    const json message = json::parse(text, nullptr, false);
    if (!message.is_object() || !message["streamSid"].is_string()) abort();
  }
  const json mark = json::parse(rtce::telnyx_mark_message(line), nullptr, false);
  if (!mark.is_object() || !mark["mark"]["name"].is_string()) abort();
  const std::string escaped = rtce::xml_attribute_escape(line);
  for (const char c : escaped)
    if (c == '<' || c == '>' || c == '"' || c == '\'' || static_cast<unsigned char>(c) < 0x20) abort();
}

// Our own media message with `ulaw` carries `ulaw`: Twilio's read back through the reader
// (it names the stream); Telnyx's, which names none, through its JSON and base64.
bool echoes(rtce::TwilioStreamCodec& reader, std::span<const uint8_t> ulaw, std::string& scratch) {
  const std::string expected(ulaw.begin(), ulaw.end());
  rtce::twilio_media_message(reader.start().stream_sid, ulaw, scratch);
  const rtce::MediaStreamReadResult echo = reader.read(scratch);
  return echo.event && std::string(echo.event->ulaw.begin(), echo.event->ulaw.end()) == expected;
}
bool echoes(rtce::TelnyxStreamCodec&, std::span<const uint8_t> ulaw, std::string& scratch) {
  rtce::telnyx_media_message(ulaw, scratch);
  const json message = json::parse(scratch, nullptr, false);
  std::vector<uint8_t> decoded;
  return message.is_object() && message["media"]["payload"].is_string() &&
         rtce::base64_decode(message["media"]["payload"].get<std::string>(), decoded) &&
         std::equal(decoded.begin(), decoded.end(), ulaw.begin(), ulaw.end());
}

template <typename Codec>
void check_read(Codec& reader, std::string_view line, std::string& scratch) {
  const bool started = reader.started();
  const bool stopped = reader.stopped();
  const std::string stream_sid = reader.start().stream_sid;
  const rtce::MediaStreamReadResult r = reader.read(line);
  if (r.event.has_value() == r.refusal.has_value()) abort();
  if (r.refusal) {
    if (reader.started() != started || reader.stopped() != stopped || reader.start().stream_sid != stream_sid)
      abort();
    if (rtce::media_stream_refusal_name(*r.refusal) == "unknown") abort();
    return;
  }
  switch (r.event->kind) {
    case rtce::MediaStreamEventKind::start:
      if (started || !reader.started() || r.event->start != &reader.start()) abort();
      if (reader.start().stream_sid.empty() || reader.start().call_sid.empty()) abort();
      break;
    case rtce::MediaStreamEventKind::media: {
      const auto ulaw = r.event->ulaw;
      if (!started || ulaw.empty() || ulaw.size() % rtce::kTwilioFrameBytes != 0 ||
          ulaw.size() > rtce::kMaxMediaFrames * rtce::kTwilioFrameBytes)
        abort();
      const std::vector<uint8_t> audio(ulaw.begin(), ulaw.end());  // the next read reuses the buffer
      if (!echoes(reader, audio, scratch)) abort();
      break;
    }
    case rtce::MediaStreamEventKind::dtmf:
    case rtce::MediaStreamEventKind::mark:
      if (!started) abort();
      break;
    case rtce::MediaStreamEventKind::stop:
      if (!reader.stopped()) abort();
      break;
    case rtce::MediaStreamEventKind::error:
      // Only Telnyx reports errors, and their text is bounded.
      if (!std::is_same_v<Codec, rtce::TelnyxStreamCodec> ||
          r.event->text.size() > rtce::kTelnyxMaxErrorTextBytes)
        abort();
      break;
    case rtce::MediaStreamEventKind::connected: break;
  }
}

void check_webhook(std::string_view input) {
  const auto fields = rtce::parse_form_urlencoded(input, 16);
  if (!fields) return;
  if (fields->size() > 16) abort();
  const size_t first_line = input.find('\n');
  const std::string_view url = input.substr(0, first_line);
  const std::string_view rest = first_line == std::string_view::npos ? "" : input.substr(first_line + 1);
  const std::string_view signature = rest.substr(0, rest.find('\n'));
  (void)rtce::twilio_signature_valid("fuzz-token", url, *fields, signature);
  if (!rtce::twilio_signature_valid("fuzz-token", url, *fields,
                                    rtce::twilio_signature("fuzz-token", url, *fields)))
    abort();
}

// RFC 8032 §7.1 TEST 1's key; whatever the fuzzer sends as timestamp and signature, it is
// not that key's signature of this body (a forgery found here would be a broken verifier).
void check_telnyx_webhook(std::string_view input) {
  static const std::array<uint8_t, 32> kKey =
      *rtce::telnyx_public_key_from_base64("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=");
  (void)rtce::telnyx_public_key_from_base64(input);
  const size_t first_line = input.find('\n');
  const std::string_view timestamp = input.substr(0, first_line);
  const std::string_view rest = first_line == std::string_view::npos ? "" : input.substr(first_line + 1);
  const size_t second_line = rest.find('\n');
  const std::string_view signature = rest.substr(0, second_line);
  const std::string_view body = second_line == std::string_view::npos ? "" : rest.substr(second_line + 1);
  if (rtce::telnyx_signature_valid(kKey, timestamp, body, signature, 1'700'000'000, 1'000'000'000)) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  rtce::TwilioStreamCodec reader;
  rtce::TelnyxStreamCodec telnyx;
  std::string scratch;
  std::string_view rest = input;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    check_read(reader, line, scratch);
    check_read(telnyx, line, scratch);
    check_outbound(line);
  }
  check_webhook(input);
  check_telnyx_webhook(input);
  return 0;
}
