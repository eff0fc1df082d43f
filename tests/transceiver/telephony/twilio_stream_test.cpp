// twilio_stream_test.cpp — the Media Streams codec: a whole call as Twilio's documentation
// shows its messages, every refusal, counters as strings and as numbers, and the outbound
// messages read back as JSON (and through a reader, for the media payload's base64).
#include "twilio_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "media_stream_test_util.h"
#include "realtime_dialect.h"  // base64_decode

namespace rtce {
namespace {

using json = nlohmann::json;
using R = MediaStreamRefusal;

constexpr std::string_view kStreamSid = "MZ18ad3ab5a668481ce02b83e7395059f0";
constexpr std::string_view kCallSid = "CA8b5a1e4e0d3c5f6a7b8c9d0e1f2a3b4c";
constexpr std::string_view kAccountSid = "AC1fb1e5bd6d1f4a3e9c9f2b8a7d6c5e4f";

// The shapes of https://www.twilio.com/docs/voice/media-streams/websocket-messages.
std::string connected_message() { return R"({"event":"connected","protocol":"Call","version":"1.0.0"})"; }

std::string start_message(std::string_view stream_sid = kStreamSid) {
  return R"({"event":"start","sequenceNumber":"1","start":{"accountSid":")" + std::string(kAccountSid) +
         R"(","streamSid":")" + std::string(stream_sid) + R"(","callSid":")" + std::string(kCallSid) +
         R"(","tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1},)"
         R"("customParameters":{"FirstName":"Jane","LastName":"Doe","RemoteParty":"Bob"}},"streamSid":")" +
         std::string(stream_sid) + R"("})";
}

std::string media_message(std::string_view payload, std::string_view chunk = "\"1\"",
                          std::string_view timestamp = "\"5\"", std::string_view stream_sid = kStreamSid) {
  return R"({"event":"media","sequenceNumber":"3","media":{"track":"inbound","chunk":)" + std::string(chunk) +
         R"(,"timestamp":)" + std::string(timestamp) + R"(,"payload":")" + std::string(payload) +
         R"("},"streamSid":")" + std::string(stream_sid) + R"("})";
}

std::string dtmf_message(std::string_view digit) {
  return R"({"event":"dtmf","streamSid":")" + std::string(kStreamSid) +
         R"(","sequenceNumber":"5","dtmf":{"track":"inbound_track","digit":")" + std::string(digit) +
         R"("}})";
}

std::string mark_message(std::string_view name) {
  return R"({"event":"mark","sequenceNumber":"4","streamSid":")" + std::string(kStreamSid) +
         R"(","mark":{"name":")" + std::string(name) + R"("}})";
}

std::string stop_message(std::string_view stream_sid = kStreamSid) {
  return R"({"event":"stop","sequenceNumber":"5","stop":{"accountSid":")" + std::string(kAccountSid) +
         R"(","callSid":")" + std::string(kCallSid) + R"("},"streamSid":")" + std::string(stream_sid) +
         R"("})";
}

// A reader that has read connected and start.
TwilioStreamCodec started_reader() {
  return read_past_start<TwilioStreamCodec>(connected_message(), start_message());
}

// media_message with its defaults, for the shared assertion blocks.
std::string media_with(std::string_view payload) { return media_message(payload); }

TEST(TwilioStreamCodec, ReadsADocumentedCall) {
  TwilioStreamCodec reader;
  EXPECT_FALSE(reader.started());

  auto r = reader.read(connected_message());
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::connected));
  EXPECT_FALSE(r.refusal);

  r = reader.read(start_message());
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::start));
  ASSERT_EQ(r.event->start, &reader.start());
  EXPECT_TRUE(reader.started());
  EXPECT_EQ(reader.start().stream_sid, kStreamSid);
  EXPECT_EQ(reader.start().call_sid, kCallSid);
  EXPECT_EQ(reader.start().account_sid, kAccountSid);
  EXPECT_EQ(reader.start().tracks, std::vector<std::string>{"inbound"});
  // nlohmann's object keeps its keys sorted, so the parameters come in name order.
  const std::vector<std::pair<std::string, std::string>> parameters = {
      {"FirstName", "Jane"}, {"LastName", "Doe"}, {"RemoteParty", "Bob"}};
  EXPECT_EQ(reader.start().custom_parameters, parameters);

  for (uint64_t chunk = 1; chunk <= 3; ++chunk) {
    const auto audio = frames(1, static_cast<uint8_t>(chunk));
    r = reader.read(media_message(base64(audio), "\"" + std::to_string(chunk) + "\"",
                                  "\"" + std::to_string(chunk * 20 - 15) + "\""));
    ASSERT_NO_FATAL_FAILURE(expect_media(r, chunk, chunk * 20 - 15, audio));
  }

  r = reader.read(dtmf_message("1"));
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::dtmf));
  EXPECT_EQ(r.event->digit, '1');

  r = reader.read(mark_message("my label"));
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::mark));
  EXPECT_EQ(r.event->mark_name, "my label");

  EXPECT_FALSE(reader.stopped());
  r = reader.read(stop_message());
  ASSERT_TRUE(is_event(r, MediaStreamEventKind::stop));
  EXPECT_TRUE(reader.stopped());
}

TEST(TwilioStreamCodec, ReusesItsPayloadBuffer) {
  TwilioStreamCodec reader = started_reader();
  expect_reuses_its_payload_buffer(reader, media_with);
}

TEST(TwilioStreamCodec, TakesCountersAsStringsOrNumbers) {
  TwilioStreamCodec reader = started_reader();
  const std::string payload = base64(frames(2));
  auto r = reader.read(media_message(payload, "7", "140"));
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->chunk, 7u);
  EXPECT_EQ(r.event->timestamp_ms, 140u);
  EXPECT_EQ(r.event->ulaw.size(), 2 * kTwilioFrameBytes);
  r = reader.read(media_message(payload, "\"18446744073709551615\"", "\"0\""));
  EXPECT_EQ(r.refusal, R::bad_media);  // 20 digits: more than we parse
  r = reader.read(media_message(payload, "\"1234567890123456789\"", "9007199254740993"));
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->chunk, 1234567890123456789u);
  EXPECT_EQ(r.event->timestamp_ms, 9007199254740993u);
  // Without chunk and timestamp (the shape of our own outbound media), both are 0.
  r = reader.read(R"({"event":"media","streamSid":")" + s(kStreamSid) + R"(","media":{"payload":")" +
                  payload + R"("}})");
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->chunk, 0u);
  // The media format's numbers may be strings too.
  TwilioStreamCodec strings;
  std::string start = start_message();
  start.replace(start.find("8000"), 4, "\"8000\"");
  start.replace(start.find("\"channels\":1"), 12, "\"channels\":\"1\"");
  EXPECT_TRUE(strings.read(start).event);
}

TEST(TwilioStreamCodec, StartTakesEitherStreamSidAndDumpsNonStringParameters) {
  TwilioStreamCodec reader;
  const std::string start = R"({"event":"start","start":{"callSid":"CA1","streamSid":"MZ1",)"
                            R"("mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1},)"
                            R"("customParameters":{"n":5,"o":{"k":[1,true]},"s":"x","z":null}}})";
  const auto r = reader.read(start);
  ASSERT_TRUE(r.event) << media_stream_refusal_name(*r.refusal);
  EXPECT_EQ(reader.start().stream_sid, "MZ1");
  EXPECT_EQ(reader.start().account_sid, "");
  EXPECT_TRUE(reader.start().tracks.empty());
  const std::vector<std::pair<std::string, std::string>> parameters = {
      {"n", "5"}, {"o", R"({"k":[1,true]})"}, {"s", "x"}, {"z", "null"}};
  EXPECT_EQ(reader.start().custom_parameters, parameters);
  // Only the outer streamSid: fine as well.
  TwilioStreamCodec outer;
  EXPECT_TRUE(outer
                  .read(R"({"event":"start","streamSid":"MZ2","start":{"callSid":"CA1",)"
                        R"("mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}}})")
                  .event);
  EXPECT_EQ(outer.start().stream_sid, "MZ2");
}

TEST(TwilioStreamCodec, RefusesMessagesThatAreNotEvents) {
  TwilioStreamCodec reader;
  EXPECT_EQ(refusal_of(reader, "[[[[[[[[]]]]]]]]"), R::not_an_event);  // 8 levels: parsed
  EXPECT_EQ(refusal_of(reader, ""), R::not_json);
  EXPECT_EQ(refusal_of(reader, R"({"event":"connected")"), R::not_json);
  EXPECT_EQ(refusal_of(reader, R"("start")"), R::not_an_event);
  EXPECT_EQ(refusal_of(reader, R"({"type":"start"})"), R::not_an_event);
  EXPECT_EQ(refusal_of(reader, R"({"event":1})"), R::not_an_event);
  EXPECT_EQ(refusal_of(reader, R"({"event":"clear","streamSid":"MZ1"})"), R::unknown_event);
  // And the refusals every dialect shares; last, a message of exactly the limit is read.
  expect_refuses_text_that_is_not_an_event(reader, connected_message());
}

TEST(TwilioStreamCodec, RefusesMediaDtmfAndMarkBeforeStart) {
  TwilioStreamCodec reader;
  expect_refuses_before_start(reader, media_message(base64(frames(1))), dtmf_message("1"), mark_message("m"));
  // A stop may come without a start (a stream that failed to begin).
  EXPECT_TRUE(reader.read(stop_message("MZ-anything")).event);
  EXPECT_TRUE(reader.stopped());
}

TEST(TwilioStreamCodec, RefusesASecondStartAndKeepsTheFirst) {
  TwilioStreamCodec reader = started_reader();
  EXPECT_EQ(refusal_of(reader, start_message("MZother")), R::repeated_start);
  EXPECT_EQ(reader.start().stream_sid, kStreamSid);
}

TEST(TwilioStreamCodec, RefusesBadStarts) {
  const std::string format = R"("mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1})";
  const auto start_with = [](const std::string& inner) {
    return R"({"event":"start","start":{)" + inner + "}}";
  };
  const std::string too_many =
      R"("customParameters":{)" + numbered_custom_parameters(kTwilioMaxCustomParameters + 1) + "}";
  const std::string long_value =
      R"("customParameters":{"p":")" + std::string(kTwilioMaxCustomParameterBytes + 1, 'v') + "\"}";
  const std::string long_name =
      R"("customParameters":{")" + std::string(kTwilioMaxCustomParameterBytes + 1, 'n') + "\":\"v\"}";
  expect_bad_starts<TwilioStreamCodec>({
      R"({"event":"start"})",
      R"({"event":"start","start":"MZ1"})",
      start_with(R"("callSid":"CA1",)" + format),                 // no streamSid
      start_with(R"("streamSid":"","callSid":"CA1",)" + format),  // empty streamSid
      start_with(R"("streamSid":"MZ1",)" + format),               // no callSid
      start_with(R"("streamSid":")" + std::string(kTwilioMaxSidBytes + 1, 'M') + R"(","callSid":"CA1",)" +
                 format),
      start_with(R"("streamSid":"MZ1","callSid":")" + std::string(kTwilioMaxSidBytes + 1, 'C') + "\"," +
                 format),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","accountSid":")" +
                 std::string(kTwilioMaxSidBytes + 1, 'A') + "\"," + format),
      start_with(R"("streamSid":"MZ1","callSid":7,)" + format),  // callSid not a string
      start_with(R"("streamSid":"MZ1","callSid":"CA1")"),        // no mediaFormat
      start_with(R"("streamSid":"MZ1","callSid":"CA1","mediaFormat":{"encoding":"audio/x-alaw",)"
                 R"("sampleRate":8000,"channels":1})"),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","mediaFormat":{"encoding":"audio/x-mulaw",)"
                 R"("sampleRate":16000,"channels":1})"),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","mediaFormat":{"encoding":"audio/x-mulaw",)"
                 R"("sampleRate":8000,"channels":2})"),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","mediaFormat":{"encoding":"audio/x-mulaw",)"
                 R"("sampleRate":8000})"),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","mediaFormat":{"encoding":"audio/x-mulaw",)"
                 R"("sampleRate":"8k","channels":1})"),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","accountSid":1,)" + format),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","tracks":"inbound",)" + format),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","tracks":[1],)" + format),
      start_with(R"("streamSid":"MZ1","callSid":"CA1","customParameters":[],)" + format),
      start_with(R"("streamSid":"MZ1","callSid":"CA1",)" + too_many + "," + format),
      start_with(R"("streamSid":"MZ1","callSid":"CA1",)" + long_value + "," + format),
      start_with(R"("streamSid":"MZ1","callSid":"CA1",)" + long_name + "," + format),
      // Two different sids in one start.
      R"({"event":"start","streamSid":"MZ2","start":{"streamSid":"MZ1","callSid":"CA1",)" + format + "}}",
  });
  // At the limits: 32 parameters, 1 KiB names and values.
  const std::string most =
      R"("customParameters":{)" + numbered_custom_parameters(kTwilioMaxCustomParameters) + "}";
  TwilioStreamCodec at_limit;
  EXPECT_TRUE(at_limit.read(start_with(R"("streamSid":"MZ1","callSid":"CA1",)" + most + "," + format)).event);
  EXPECT_EQ(at_limit.start().custom_parameters.size(), kTwilioMaxCustomParameters);
  const std::string longest = R"("customParameters":{")" + std::string(kTwilioMaxCustomParameterBytes, 'n') +
                              "\":\"" + std::string(kTwilioMaxCustomParameterBytes, 'v') + "\"}";
  TwilioStreamCodec longest_reader;
  EXPECT_TRUE(
      longest_reader.read(start_with(R"("streamSid":"MZ1","callSid":"CA1",)" + longest + "," + format))
          .event);
}

TEST(TwilioStreamCodec, RefusesAnotherStreamsMessages) {
  TwilioStreamCodec reader = started_reader();
  const std::string payload = base64(frames(1));
  EXPECT_EQ(refusal_of(reader, media_message(payload, "\"1\"", "\"5\"", "MZother")), R::stream_mismatch);
  EXPECT_EQ(refusal_of(reader, R"({"event":"dtmf","dtmf":{"digit":"1"}})"), R::stream_mismatch);
  EXPECT_EQ(refusal_of(reader, R"({"event":"mark","streamSid":5,"mark":{"name":"m"}})"), R::stream_mismatch);
  EXPECT_EQ(refusal_of(reader, stop_message("MZother")), R::stream_mismatch);
  EXPECT_FALSE(reader.stopped());
}

TEST(TwilioStreamCodec, RefusesBadMedia) {
  TwilioStreamCodec reader = started_reader();
  const std::string sid = s(kStreamSid);
  const std::string payload = base64(frames(1));
  const std::vector<std::string> bad = {
      R"({"event":"media","streamSid":")" + sid + R"("})",
      R"({"event":"media","streamSid":")" + sid + R"(","media":"x"})",
      R"({"event":"media","streamSid":")" + sid + R"(","media":{"chunk":"1"}})",
      R"({"event":"media","streamSid":")" + sid + R"(","media":{"payload":7}})",
      R"({"event":"media","streamSid":")" + sid + R"(","media":{"track":"outbound","payload":")" + payload +
          R"("}})",
      R"({"event":"media","streamSid":")" + sid + R"(","media":{"track":1,"payload":")" + payload + R"("}})",
      media_message("not base64!"),
      media_message(payload.substr(1)),                               // length not a multiple of 4
      media_message(payload.substr(0, payload.size() - 4) + "A=A="),  // padding inside
      media_message(payload, "\"x\""),
      media_message(payload, "\"-1\""),
      media_message(payload, "-1"),
      media_message(payload, "1.5"),
      media_message(payload, "\"1\"", "\"\""),
      media_message(payload, "\"1\"", "null"),
  };
  for (const std::string& text : bad) EXPECT_EQ(refusal_of(reader, text), R::bad_media) << text;
}

TEST(TwilioStreamCodec, RefusesPayloadsThatAreNotWholeFrames) {
  TwilioStreamCodec reader = started_reader();
  expect_refuses_payloads_that_are_not_whole_frames(reader, media_with);
}

TEST(TwilioStreamCodec, DtmfDigits) {
  TwilioStreamCodec reader = started_reader();
  ASSERT_NO_FATAL_FAILURE(expect_dtmf_digits(reader, dtmf_message));
  for (const char* digit : {" ", "\\u0000"})
    EXPECT_EQ(refusal_of(reader, dtmf_message(digit)), R::bad_dtmf) << digit;
  const std::string sid = s(kStreamSid);
  EXPECT_EQ(refusal_of(reader, R"({"event":"dtmf","streamSid":")" + sid + R"("})"), R::bad_dtmf);
  EXPECT_EQ(refusal_of(reader, R"({"event":"dtmf","streamSid":")" + sid + R"(","dtmf":{"digit":1}})"),
            R::bad_dtmf);
}

TEST(TwilioStreamCodec, MarkNames) {
  TwilioStreamCodec reader = started_reader();
  const std::string longest(kTwilioMaxMarkNameBytes, 'm');
  auto r = reader.read(mark_message(longest));
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->mark_name, longest);
  r = reader.read(mark_message(""));
  ASSERT_TRUE(r.event);  // an empty name is a name
  EXPECT_EQ(refusal_of(reader, mark_message(longest + "m")), R::bad_mark);
  const std::string sid = s(kStreamSid);
  EXPECT_EQ(refusal_of(reader, R"({"event":"mark","streamSid":")" + sid + R"("})"), R::bad_mark);
  EXPECT_EQ(refusal_of(reader, R"({"event":"mark","streamSid":")" + sid + R"(","mark":{}})"), R::bad_mark);
  EXPECT_EQ(refusal_of(reader, R"({"event":"mark","streamSid":")" + sid + R"(","mark":{"name":1}})"),
            R::bad_mark);
}

TEST(TwilioStreamCodec, EveryRefusalHasANameAndASentence) {
  std::set<std::string_view> names;
  for (int i = 0; i <= static_cast<int>(R::bad_mark); ++i) {
    const auto refusal = static_cast<R>(i);
    EXPECT_FALSE(media_stream_refusal_message(refusal).empty());
    EXPECT_TRUE(names.insert(media_stream_refusal_name(refusal)).second);
  }
  EXPECT_EQ(media_stream_refusal_name(R::bad_payload_size), "bad_payload_size");
  EXPECT_EQ(media_stream_refusal_name(static_cast<R>(200)), "unknown");
}

TEST(TwilioOutbound, MediaMessageParsesBackAndItsPayloadRoundTrips) {
  const auto audio = frames(3, 0x7F);
  std::string out = "stale contents";
  twilio_media_message(kStreamSid, audio, out);
  const json message = json::parse(out, nullptr, false);
  ASSERT_TRUE(message.is_object()) << out;
  EXPECT_EQ(message["event"], "media");
  EXPECT_EQ(message["streamSid"], kStreamSid);
  EXPECT_EQ(message["media"]["payload"], base64(audio));
  EXPECT_EQ(message.size(), 3u);
  EXPECT_EQ(message["media"].size(), 1u);
  std::vector<uint8_t> decoded;
  ASSERT_TRUE(base64_decode(message["media"]["payload"].get<std::string>(), decoded));
  EXPECT_EQ(decoded, audio);
  // And through a reader, as an echo of ourselves would arrive.
  TwilioStreamCodec reader = started_reader();
  const auto r = reader.read(out);
  ASSERT_TRUE(r.event);
  EXPECT_EQ(std::vector<uint8_t>(r.event->ulaw.begin(), r.event->ulaw.end()), audio);
  // Reused: the second call replaces the first.
  const std::string first = out;
  twilio_media_message(kStreamSid, audio, out);
  EXPECT_EQ(out, first);
}

TEST(TwilioOutbound, MarkAndClearMessagesParseBack) {
  const json mark = json::parse(twilio_mark_message(kStreamSid, "reply-7"), nullptr, false);
  ASSERT_TRUE(mark.is_object());
  EXPECT_EQ(mark, json({{"event", "mark"}, {"streamSid", kStreamSid}, {"mark", {{"name", "reply-7"}}}}));
  const json clear = json::parse(twilio_clear_message(kStreamSid), nullptr, false);
  EXPECT_EQ(clear, json({{"event", "clear"}, {"streamSid", kStreamSid}}));
}

TEST(TwilioOutbound, EscapesHostileStrings) {
  const std::string hostile = std::string("a\"b\\c\n\x01\0", 8) + "é€😀";
  const json mark = json::parse(twilio_mark_message(hostile, hostile), nullptr, false);
  ASSERT_TRUE(mark.is_object());
  EXPECT_EQ(mark["streamSid"], hostile);
  EXPECT_EQ(mark["mark"]["name"], hostile);
  std::string out;
  twilio_media_message(hostile, {}, out);
  const json media = json::parse(out, nullptr, false);
  ASSERT_TRUE(media.is_object()) << out;
  EXPECT_EQ(media["streamSid"], hostile);
  EXPECT_EQ(media["media"]["payload"], "");
  // Bytes that are not UTF-8 (a lone continuation, an overlong '/', a surrogate, a cut
  // sequence) become U+FFFD, one per byte, and the message stays JSON.
  const std::string broken = "x\x80y\xC0\xAFz\xED\xA0\x80w\xE2\x82";
  const json clear = json::parse(twilio_clear_message(broken), nullptr, false);
  ASSERT_TRUE(clear.is_object());
  EXPECT_EQ(clear["streamSid"], "x\uFFFDy\uFFFD\uFFFDz\uFFFD\uFFFD\uFFFDw\uFFFD\uFFFD");
}

}  // namespace
}  // namespace rtce
