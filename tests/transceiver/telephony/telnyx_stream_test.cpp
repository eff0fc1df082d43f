// telnyx_stream_test.cpp — the Telnyx media-streaming codec: a whole call in the shapes of
// Telnyx's documentation (out of order, as Telnyx allows), the start's mapping onto
// MediaStreamStart, every refusal, error events, and the outbound messages read back as
// JSON.
#include "telnyx_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "media_stream_test_util.h"
#include "realtime_dialect.h"  // base64_decode

namespace rtce {
namespace {

using json = nlohmann::json;
using R = MediaStreamRefusal;

constexpr std::string_view kStreamId = "32DE0DEA-53CB-4B21-89A4-9E1819C043BC";
constexpr std::string_view kCallControlId = "v3:MdI91X4lWFEs7IgbBEOT9M4AigoY08M0WWZFISt1Yw2axZ_IiE4pqg";
constexpr std::string_view kUserId = "3E6F995F-85F7-4705-9741-53B116D28237";

// The shapes of developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket.
std::string connected_message() { return R"({"event":"connected","version":"1.0.0"})"; }

std::string start_message(std::string_view stream_id = kStreamId) {
  return R"({"event":"start","sequence_number":"1","stream_id":")" + s(stream_id) +
         R"(","start":{"user_id":")" + s(kUserId) + R"(","call_control_id":")" + s(kCallControlId) +
         R"(","client_state":"aGF2ZSBhIG5pY2UgZGF5ID1d",)"
         R"("media_format":{"encoding":"PCMU","sample_rate":8000,"channels":1},)"
         R"("custom_parameters":{"FirstName":"Jane","LastName":"Doe"}}})";
}

std::string media_message(std::string_view payload, std::string_view chunk = "\"2\"",
                          std::string_view timestamp = "\"5\"", std::string_view stream_id = kStreamId) {
  return R"({"event":"media","sequence_number":"4","stream_id":")" + s(stream_id) +
         R"(","media":{"track":"inbound","chunk":)" + s(chunk) + R"(,"timestamp":)" + s(timestamp) +
         R"(,"payload":")" + s(payload) + R"("}})";
}

std::string dtmf_message(std::string_view digit) {
  return R"({"event":"dtmf","stream_id":")" + s(kStreamId) +
         R"(","occurred_at":"2024-01-01T00:00:00Z",)"
         R"("sequence_number":"5","dtmf":{"digit":")" +
         s(digit) + R"("}})";
}

std::string mark_message(std::string_view name) {
  return R"({"event":"mark","sequence_number":"6","stream_id":")" + s(kStreamId) + R"(","mark":{"name":")" +
         s(name) + R"("}})";
}

std::string error_message(std::string_view stream_id = kStreamId) {
  return R"({"event":"error","sequence_number":"7","stream_id":")" + s(stream_id) +
         R"(","payload":{"code":100003,"title":"malformed_frame","detail":"The provided frame is malformed"}})";
}

std::string stop_message(std::string_view stream_id = kStreamId) {
  return R"({"event":"stop","sequence_number":"8","stream_id":")" + s(stream_id) +
         R"(","stop":{"user_id":")" + s(kUserId) + R"(","call_control_id":")" + s(kCallControlId) + R"("}})";
}

TelnyxStreamCodec started_reader() {
  return read_past_start<TelnyxStreamCodec>(connected_message(), start_message());
}

// media_message with its defaults, for the shared assertion blocks.
std::string media_with(std::string_view payload) { return media_message(payload); }

TEST(TelnyxStreamCodec, ReadsADocumentedCall) {
  TelnyxStreamCodec reader;
  EXPECT_FALSE(reader.started());
  auto r = reader.read(connected_message());
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::connected));

  r = reader.read(start_message());
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::start));
  ASSERT_EQ(r.event->start, &reader.start());
  EXPECT_TRUE(reader.started());
  EXPECT_EQ(reader.start().stream_sid, kStreamId);
  EXPECT_EQ(reader.start().call_sid, kCallControlId);
  EXPECT_EQ(reader.start().account_sid, kUserId);
  EXPECT_TRUE(reader.start().tracks.empty());
  const std::vector<std::pair<std::string, std::string>> parameters = {{"FirstName", "Jane"},
                                                                       {"LastName", "Doe"}};
  EXPECT_EQ(reader.start().custom_parameters, parameters);

  // Telnyx does not promise order: chunk 3 before 2 is read as it comes.
  for (const uint64_t chunk : {1u, 3u, 2u}) {
    const auto audio = frames(1, static_cast<uint8_t>(chunk));
    r = reader.read(media_message(base64(audio), "\"" + std::to_string(chunk) + "\"",
                                  "\"" + std::to_string(chunk * 20) + "\""));
    ASSERT_NO_FATAL_FAILURE(expect_media(r, chunk, chunk * 20, audio));
  }

  r = reader.read(dtmf_message("#"));
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::dtmf));
  EXPECT_EQ(r.event->digit, '#');

  r = reader.read(mark_message("reply-1"));
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::mark));
  EXPECT_EQ(r.event->mark_name, "reply-1");

  r = reader.read(error_message());
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::error));
  EXPECT_EQ(r.event->text, "100003 malformed_frame: The provided frame is malformed");
  EXPECT_FALSE(reader.stopped());

  r = reader.read(stop_message());
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::stop));
  EXPECT_TRUE(reader.stopped());
}

TEST(TelnyxStreamCodec, StartDefaultsAndAlternatives) {
  // No media_format: Telnyx's default, PCMU at 8 kHz. No user_id, no custom_parameters.
  TelnyxStreamCodec bare;
  ASSERT_TRUE(bare.read(R"({"event":"start","stream_id":"S1","start":{"call_control_id":"v3:c"}})").event);
  EXPECT_EQ(bare.start().stream_sid, "S1");
  EXPECT_EQ(bare.start().call_sid, "v3:c");
  EXPECT_EQ(bare.start().account_sid, "");
  EXPECT_TRUE(bare.start().custom_parameters.empty());
  // stream_id inside start (older docs), the older encoding name, numbers as strings, and
  // non-string parameters as their JSON text.
  TelnyxStreamCodec older;
  const auto r =
      older.read(R"({"event":"start","start":{"stream_id":"S2","call_control_id":"v2:c",)"
                 R"("media_format":{"encoding":"audio/x-mulaw","sample_rate":"8000","channels":"1"},)"
                 R"("custom_parameters":{"n":5,"o":{"k":[1,true]},"z":null}}})");
  ASSERT_TRUE(r.event) << media_stream_refusal_name(*r.refusal);
  EXPECT_EQ(older.start().stream_sid, "S2");
  const std::vector<std::pair<std::string, std::string>> parameters = {
      {"n", "5"}, {"o", R"({"k":[1,true]})"}, {"z", "null"}};
  EXPECT_EQ(older.start().custom_parameters, parameters);
  // A long v2 call_control_id, far over Twilio's 64-byte sid bound.
  TelnyxStreamCodec v2;
  const std::string long_id = "v2:" + std::string(kTelnyxMaxIdBytes - 3, 'x');
  EXPECT_TRUE(
      v2.read(R"({"event":"start","stream_id":"S3","start":{"call_control_id":")" + long_id + "\"}}").event);
  EXPECT_EQ(v2.start().call_sid, long_id);
}

TEST(TelnyxStreamCodec, ReusesItsPayloadBuffer) {
  TelnyxStreamCodec reader = started_reader();
  expect_reuses_its_payload_buffer(reader, media_with);
}

TEST(TelnyxStreamCodec, RefusesMessagesThatAreNotEvents) {
  TelnyxStreamCodec reader;
  EXPECT_EQ(refusal_of(reader, "{\"event\":"), R::not_json);
  EXPECT_EQ(refusal_of(reader, R"({"event":7})"), R::not_an_event);
  // Our own outbound clear is not something Telnyx sends us.
  EXPECT_EQ(refusal_of(reader, R"({"event":"clear"})"), R::unknown_event);
  expect_refuses_text_that_is_not_an_event(reader, connected_message());
}

TEST(TelnyxStreamCodec, RefusesMediaDtmfAndMarkBeforeStartButNotErrorOrStop) {
  TelnyxStreamCodec reader;
  expect_refuses_before_start(reader, media_message(base64(frames(1))), dtmf_message("1"), mark_message("m"));
  const auto r = reader.read(error_message("any"));
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::error));
  EXPECT_TRUE(reader.read(stop_message("any")).event);
  EXPECT_TRUE(reader.stopped());
}

TEST(TelnyxStreamCodec, RefusesASecondStartAndKeepsTheFirst) {
  TelnyxStreamCodec reader = started_reader();
  EXPECT_EQ(refusal_of(reader, start_message("other")), R::repeated_start);
  EXPECT_EQ(reader.start().stream_sid, kStreamId);
}

TEST(TelnyxStreamCodec, RefusesBadStarts) {
  const auto start_with = [](const std::string& inner) {
    return R"({"event":"start","stream_id":"S1","start":{)" + inner + "}}";
  };
  const auto format = [](std::string_view encoding, std::string_view rate, std::string_view channels) {
    return R"("call_control_id":"c","media_format":{"encoding":)" + s(encoding) + R"(,"sample_rate":)" +
           s(rate) + R"(,"channels":)" + s(channels) + "}";
  };
  const std::string too_many = R"("call_control_id":"c","custom_parameters":{)" +
                               numbered_custom_parameters(kTwilioMaxCustomParameters + 1) + "}";
  const std::string long_id(kTelnyxMaxIdBytes + 1, 'x');
  expect_bad_starts<TelnyxStreamCodec>({
      R"({"event":"start","stream_id":"S1"})",
      R"({"event":"start","stream_id":"S1","start":"x"})",
      R"({"event":"start","start":{"call_control_id":"c"}})",                 // no stream_id
      R"({"event":"start","stream_id":"","start":{"call_control_id":"c"}})",  // empty
      R"({"event":"start","stream_id":5,"start":{"call_control_id":"c"}})",
      R"({"event":"start","stream_id":")" + long_id + R"(","start":{"call_control_id":"c"}})",
      R"({"event":"start","stream_id":"S1","start":{"stream_id":"S2","call_control_id":"c"}})",
      start_with(""),  // no call_control_id
      start_with(R"("call_control_id":"")"),
      start_with(R"("call_control_id":7)"),
      start_with(R"("call_control_id":")" + long_id + "\""),
      start_with(R"("call_control_id":"c","user_id":3)"),
      start_with(R"("call_control_id":"c","user_id":")" + long_id + "\""),
      start_with(R"("call_control_id":"c","media_format":"PCMU")"),
      start_with(R"("call_control_id":"c","media_format":{})"),
      start_with(format("\"PCMA\"", "8000", "1")),
      start_with(format("\"pcmu\"", "8000", "1")),
      start_with(format("\"G722\"", "16000", "1")),
      start_with(format("\"PCMU\"", "16000", "1")),
      start_with(format("\"PCMU\"", "8000", "2")),
      start_with(format("\"PCMU\"", "\"8k\"", "1")),
      start_with(format("1", "8000", "1")),
      start_with(R"("call_control_id":"c","media_format":{"encoding":"PCMU","sample_rate":8000})"),
      start_with(R"("call_control_id":"c","custom_parameters":[])"),
      start_with(too_many),
      start_with(R"("call_control_id":"c","custom_parameters":{"p":")" +
                 std::string(kTwilioMaxCustomParameterBytes + 1, 'v') + "\"}"),
      start_with(R"("call_control_id":"c","custom_parameters":{")" +
                 std::string(kTwilioMaxCustomParameterBytes + 1, 'n') + "\":\"v\"}"),
  });
}

TEST(TelnyxStreamCodec, RefusesAnotherStreamsMessages) {
  TelnyxStreamCodec reader = started_reader();
  const std::string payload = base64(frames(1));
  EXPECT_EQ(refusal_of(reader, media_message(payload, "\"1\"", "\"5\"", "other")), R::stream_mismatch);
  EXPECT_EQ(refusal_of(reader, R"({"event":"media","media":{"payload":")" + payload + R"("}})"),
            R::stream_mismatch);  // our own outbound shape, which names no stream
  EXPECT_EQ(refusal_of(reader, R"({"event":"dtmf","dtmf":{"digit":"1"}})"), R::stream_mismatch);
  EXPECT_EQ(refusal_of(reader, R"({"event":"mark","stream_id":5,"mark":{"name":"m"}})"), R::stream_mismatch);
  EXPECT_EQ(refusal_of(reader, error_message("other")), R::stream_mismatch);
  EXPECT_EQ(refusal_of(reader, stop_message("other")), R::stream_mismatch);
  EXPECT_FALSE(reader.stopped());
  // An error that names no stream is still reported.
  const auto r = reader.read(R"({"event":"error","payload":{"title":"t"}})");
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->text, "t");
}

TEST(TelnyxStreamCodec, RefusesBadMedia) {
  TelnyxStreamCodec reader = started_reader();
  const std::string id = s(kStreamId);
  const std::string payload = base64(frames(1));
  const std::vector<std::string> bad = {
      R"({"event":"media","stream_id":")" + id + R"("})",
      R"({"event":"media","stream_id":")" + id + R"(","media":"x"})",
      R"({"event":"media","stream_id":")" + id + R"(","media":{"chunk":"1"}})",
      R"({"event":"media","stream_id":")" + id + R"(","media":{"payload":7}})",
      R"({"event":"media","stream_id":")" + id + R"(","media":{"track":"outbound","payload":")" + payload +
          R"("}})",
      R"({"event":"media","stream_id":")" + id + R"(","media":{"track":"inbound_track","payload":")" +
          payload + R"("}})",
      R"({"event":"media","stream_id":")" + id + R"(","media":{"track":null,"payload":")" + payload +
          R"("}})",
      media_message("not base64!"),
      media_message(payload.substr(1)),
      media_message(payload, "\"x\""),
      media_message(payload, "-1"),
      media_message(payload, "\"1\"", "1.5"),
      media_message(payload, "\"1\"", "\"\""),
  };
  for (const std::string& text : bad) EXPECT_EQ(refusal_of(reader, text), R::bad_media) << text;
}

TEST(TelnyxStreamCodec, RefusesPayloadsThatAreNotWholeFrames) {
  TelnyxStreamCodec reader = started_reader();
  expect_refuses_payloads_that_are_not_whole_frames(reader, media_with);
}

TEST(TelnyxStreamCodec, DtmfDigitsAndMarkNames) {
  TelnyxStreamCodec reader = started_reader();
  ASSERT_NO_FATAL_FAILURE(expect_dtmf_digits(reader, dtmf_message));
  EXPECT_EQ(refusal_of(reader, R"({"event":"dtmf","stream_id":")" + s(kStreamId) + R"("})"), R::bad_dtmf);

  const std::string longest(kTwilioMaxMarkNameBytes, 'm');
  const auto r = reader.read(mark_message(longest));
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->mark_name, longest);
  EXPECT_EQ(refusal_of(reader, mark_message(longest + "m")), R::bad_mark);
  EXPECT_EQ(refusal_of(reader, R"({"event":"mark","stream_id":")" + s(kStreamId) + R"(","mark":{}})"),
            R::bad_mark);
}

TEST(TelnyxStreamCodec, ErrorTextIsWhateverThePayloadHasCutToItsBound) {
  TelnyxStreamCodec reader;
  const auto text_of = [&](const std::string& payload) {
    const auto r = reader.read(R"({"event":"error","stream_id":"S","payload":)" + payload + "}");
    EXPECT_TRUE(r.event) << payload;
    return r.event ? r.event->text : std::string("(refused)");
  };
  EXPECT_EQ(text_of(R"({"code":"100002","title":"unknown_error"})"), "100002 unknown_error");
  EXPECT_EQ(text_of(R"({"detail":"d"})"), "d");
  EXPECT_EQ(text_of(R"({"code":1,"title":{},"detail":"d"})"), "1: d");
  EXPECT_EQ(text_of(R"("not an object")"), "");
  EXPECT_EQ(reader.read(R"({"event":"error"})").event->text, "");
  // Cut at kTelnyxMaxErrorTextBytes, never inside a UTF-8 sequence ("é" is 2 bytes).
  std::string detail = std::string(kTelnyxMaxErrorTextBytes - 1, 'd') + "é";
  const std::string cut = text_of(R"({"detail":")" + detail + "\"}");
  EXPECT_EQ(cut, std::string(kTelnyxMaxErrorTextBytes - 1, 'd'));
}

TEST(TelnyxOutbound, MessagesParseBack) {
  const auto audio = frames(2, 0x7F);
  std::string out = "stale";
  telnyx_media_message(audio, out);
  const json media = json::parse(out, nullptr, false);
  ASSERT_TRUE(media.is_object()) << out;
  EXPECT_EQ(media, json({{"event", "media"}, {"media", {{"payload", base64(audio)}}}}));
  std::vector<uint8_t> decoded;
  ASSERT_TRUE(base64_decode(media["media"]["payload"].get<std::string>(), decoded));
  EXPECT_EQ(decoded, audio);
  const std::string first = out;
  telnyx_media_message(audio, out);
  EXPECT_EQ(out, first);

  EXPECT_EQ(json::parse(telnyx_mark_message("reply-7")),
            json({{"event", "mark"}, {"mark", {{"name", "reply-7"}}}}));
  EXPECT_EQ(json::parse(telnyx_clear_message()), json({{"event", "clear"}}));
  const std::string hostile = std::string("a\"b\\c\n\x01\0", 8) + "é\x80";
  const json mark = json::parse(telnyx_mark_message(hostile), nullptr, false);
  ASSERT_TRUE(mark.is_object());
  EXPECT_EQ(mark["mark"]["name"], std::string("a\"b\\c\n\x01\0", 8) + "é\uFFFD");

  // Through the codec's interface, the same messages.
  const TelnyxStreamCodec reader = started_reader();
  const MediaStreamCodec& codec = reader;
  std::string via_codec;
  codec.media_message(audio, via_codec);
  EXPECT_EQ(via_codec, first);
  EXPECT_EQ(codec.mark_message("m"), telnyx_mark_message("m"));
  EXPECT_EQ(codec.clear_message(), telnyx_clear_message());
}

}  // namespace
}  // namespace rtce
