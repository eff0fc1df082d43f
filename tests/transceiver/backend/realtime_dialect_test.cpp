// realtime_dialect_test.cpp — the realtime dialect's socket-free codec: base64 against the
// RFC 4648 vectors and hostile input, the resamplers' lengths and a tone's frequency through
// them, the 20 ms framing of deltas with the remainder carried across messages, barge-in,
// the pinned audio formats, and malformed deltas refused with their reason.
#include "realtime_dialect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

namespace rtce {
namespace {

std::vector<int16_t> tone(int rate, double hz, size_t samples, double amplitude = 8000, size_t offset = 0) {
  std::vector<int16_t> out(samples);
  for (size_t i = 0; i < samples; ++i)
    out[i] = static_cast<int16_t>(std::lround(
        amplitude * std::sin(2 * std::numbers::pi * hz * static_cast<double>(i + offset) / rate)));
  return out;
}

// The tone's frequency from the rising zero crossings, skipping the filter's start-up.
double measured_hz(const std::vector<int16_t>& pcm, int rate, size_t skip) {
  size_t first = 0, last = 0, crossings = 0;
  for (size_t i = skip + 1; i < pcm.size(); ++i) {
    if (pcm[i - 1] < 0 && pcm[i] >= 0) {
      if (crossings == 0) first = i;
      last = i;
      ++crossings;
    }
  }
  if (crossings < 2) return 0;
  return static_cast<double>(crossings - 1) * rate / static_cast<double>(last - first);
}

std::string b64(const std::vector<int16_t>& pcm) {
  std::string out;
  base64_append({reinterpret_cast<const uint8_t*>(pcm.data()), pcm.size() * 2}, out);
  return out;
}

std::string delta_event(const std::vector<int16_t>& pcm, const char* type = "response.output_audio.delta") {
  return nlohmann::json{{"type", type}, {"event_id", "e1"}, {"delta", b64(pcm)}}.dump();
}

// The samples of the append event `text`, checked for shape on the way.
std::vector<int16_t> appended_samples(const std::string& text) {
  auto event = nlohmann::json::parse(text);
  EXPECT_EQ(event["type"], "input_audio_buffer.append");
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(base64_decode(event["audio"].get<std::string>(), bytes));
  std::vector<int16_t> pcm(bytes.size() / 2);
  std::memcpy(pcm.data(), bytes.data(), pcm.size() * 2);
  return pcm;
}

TEST(Base64, Rfc4648VectorsAndRoundTrips) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (auto [plain, coded] : vectors) {
    std::string out = "x";  // appends
    base64_append({reinterpret_cast<const uint8_t*>(plain), std::strlen(plain)}, out);
    EXPECT_EQ(out, std::string("x") + coded);
    std::vector<uint8_t> back;
    ASSERT_TRUE(base64_decode(coded, back)) << coded;
    EXPECT_EQ(std::string(back.begin(), back.end()), plain);
  }
  std::mt19937 rng(7);
  for (size_t n = 0; n < 200; ++n) {
    std::vector<uint8_t> bytes(n);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    std::string coded;
    base64_append(bytes, coded);
    std::vector<uint8_t> back;
    ASSERT_TRUE(base64_decode(coded, back));
    EXPECT_EQ(back, bytes);
  }
}

TEST(Base64, RefusesWhatIsNotStrictBase64) {
  std::vector<uint8_t> out;
  for (const char* bad : {"Zg=", "Z", "Zg", "Z===", "====", "Zg=a", "Zg==Zg==", "Zm9v!AAA", "Zm9v AAA",
                          "Zm-_", "Zm9\n", "\xff\xff\xff\xff"}) {
    EXPECT_FALSE(base64_decode(bad, out)) << bad;
  }
}

TEST(Resampler, LengthsAreExactForTheSessionRates) {
  for (int rate : {16000, 24000, 48000}) {
    Resampler up(rate, kRealtimeSampleRate), down(kRealtimeSampleRate, rate);
    std::vector<int16_t> at24, back;
    const size_t frame = static_cast<size_t>(rate / 50);
    for (int i = 0; i < 50; ++i) up.process(tone(rate, 440, frame, 8000, i * frame), at24);
    EXPECT_EQ(at24.size(), 50u * 480) << rate;
    down.process(at24, back);
    EXPECT_EQ(back.size(), 50u * frame) << rate;
  }
}

TEST(Resampler, ATonesFrequencySurvivesBothWays) {
  for (int rate : {16000, 48000}) {
    for (double hz : {300.0, 1000.0, 3000.0}) {
      Resampler up(rate, kRealtimeSampleRate);
      std::vector<int16_t> at24;
      up.process(tone(rate, hz, static_cast<size_t>(rate)), at24);  // one second
      EXPECT_NEAR(measured_hz(at24, kRealtimeSampleRate, 200), hz, hz * 0.005) << rate << " up " << hz;

      Resampler down(kRealtimeSampleRate, rate);
      std::vector<int16_t> back;
      down.process(tone(kRealtimeSampleRate, hz, kRealtimeSampleRate), back);
      EXPECT_NEAR(measured_hz(back, rate, 400), hz, hz * 0.005) << rate << " down " << hz;
    }
  }
}

// The filter keeps the last milliseconds of its input: a phone call's 16 -> 8 kHz resampler
// once played them at the start of the next reply (and after a barge-in).
TEST(Resampler, FlushPushesOutTheTailAndResetForgetsIt) {
  auto peak = [](const std::vector<int16_t>& pcm, size_t from, size_t to) {
    int m = 0;
    for (size_t i = from; i < std::min(to, pcm.size()); ++i) m = std::max(m, std::abs(int{pcm[i]}));
    return m;
  };
  const std::vector<int16_t> silence(320, 0);
  for (bool flush : {true, false}) {
    Resampler down(16000, 8000);
    std::vector<int16_t> out;
    down.process(tone(16000, 1000, 320, 8000), out);  // 20 ms of sound, to its last sample
    const size_t sound = out.size();
    if (flush) {
      down.flush(out);
      EXPECT_GT(out.size(), sound) << "the tail comes out";
      EXPECT_GT(peak(out, sound, out.size()), 1000) << "and it is the sound's end";
    } else {
      down.reset();
    }
    std::vector<int16_t> next;
    down.process(silence, next);  // the next segment begins with silence
    EXPECT_LT(peak(next, 0, next.size()), 50) << (flush ? "after flush" : "after reset") << ": no old sound";
  }
}

TEST(RealtimeDialect, AppendEventsCarry24kHzPcmPerFrame) {
  for (int rate : {16000, 24000, 48000}) {
    RealtimeDialect dialect(rate);
    std::string text;
    const size_t frame = static_cast<size_t>(rate / 50);
    std::vector<int16_t> all;
    for (int i = 0; i < 25; ++i) {
      ASSERT_TRUE(dialect.encode_audio(tone(rate, 1000, frame, 8000, i * frame), text));
      auto pcm = appended_samples(text);
      EXPECT_EQ(pcm.size(), 480u) << rate << " frame " << i;
      all.insert(all.end(), pcm.begin(), pcm.end());
    }
    EXPECT_NEAR(measured_hz(all, kRealtimeSampleRate, 200), 1000, 5) << rate;
  }
  // At 24 kHz nothing is converted: the bytes go through as they are.
  RealtimeDialect same(24000);
  std::string text;
  auto frame = tone(24000, 700, 480);
  ASSERT_TRUE(same.encode_audio(frame, text));
  EXPECT_EQ(appended_samples(text), frame);
}

TEST(RealtimeDialect, DeltasAreCutIntoFramesAndTheRemainderCarriesOver) {
  RealtimeDialect dialect(24000);  // no conversion: the framing is checked sample for sample
  std::vector<int16_t> sent, received;
  int16_t next = 0;
  for (size_t size : {100u, 379u, 1u, 960u, 1441u, 0u, 479u}) {
    std::vector<int16_t> delta(size);
    for (auto& s : delta) s = next++;
    sent.insert(sent.end(), delta.begin(), delta.end());
    RealtimeInbound in = dialect.decode_text(delta_event(delta));
    ASSERT_EQ(in.kind, RealtimeInboundKind::audio);
    for (size_t i = 0; i < in.frames; ++i) {
      auto frame = dialect.frame(i);
      ASSERT_EQ(frame.size(), 480u);
      received.insert(received.end(), frame.begin(), frame.end());
    }
    EXPECT_EQ(received.size() + dialect.pending_samples(), sent.size());
    EXPECT_LT(dialect.pending_samples(), 480u);
  }
  ASSERT_EQ(received.size(), sent.size() / 480 * 480);
  EXPECT_TRUE(std::equal(received.begin(), received.end(), sent.begin()));
}

TEST(RealtimeDialect, DeltasAreResampledToTheSessionRate) {
  for (int rate : {16000, 48000}) {
    RealtimeDialect dialect(rate);
    std::vector<int16_t> received;
    const auto source = tone(kRealtimeSampleRate, 1000, 24000);
    // Uneven deltas, and the beta event name for half of them.
    size_t at = 0;
    for (size_t size = 777; at < source.size(); size = size * 3 % 2000 + 1) {
      size_t n = std::min(size, source.size() - at);
      std::vector<int16_t> delta(source.begin() + at, source.begin() + at + n);
      at += n;
      auto in = dialect.decode_text(
          delta_event(delta, at % 2 ? "response.audio.delta" : "response.output_audio.delta"));
      ASSERT_EQ(in.kind, RealtimeInboundKind::audio);
      for (size_t i = 0; i < in.frames; ++i) {
        auto frame = dialect.frame(i);
        ASSERT_EQ(frame.size(), static_cast<size_t>(rate / 50));
        received.insert(received.end(), frame.begin(), frame.end());
      }
    }
    EXPECT_EQ(received.size() + dialect.pending_samples(), static_cast<size_t>(rate)) << rate;
    EXPECT_NEAR(measured_hz(received, rate, 400), 1000, 5) << rate;
  }
}

TEST(RealtimeDialect, MalformedMessagesAreRefusedWithTheirReason) {
  RealtimeDialect dialect(16000);
  const std::pair<std::string, RealtimeDialectError> cases[] = {
      {"", RealtimeDialectError::not_json},
      {"{\"type\":", RealtimeDialectError::not_json},
      {"\xff", RealtimeDialectError::not_json},
      {"[]", RealtimeDialectError::not_an_event},
      {"{}", RealtimeDialectError::not_an_event},
      {R"({"type":7})", RealtimeDialectError::not_an_event},
      {R"({"type":""})", RealtimeDialectError::not_an_event},
      {R"({"type":"response.output_audio.delta"})", RealtimeDialectError::bad_delta},
      {R"({"type":"response.output_audio.delta","delta":12})", RealtimeDialectError::bad_delta},
      {R"({"type":"response.output_audio.delta","delta":"not base64!"})", RealtimeDialectError::bad_delta},
      {R"({"type":"response.audio.delta","delta":"AA=="})", RealtimeDialectError::odd_delta},
      {R"({"type":"response.audio.delta","delta":"AAAA"})", RealtimeDialectError::odd_delta},
  };
  for (const auto& [text, error] : cases) {
    RealtimeInbound in = dialect.decode_text(text);
    EXPECT_EQ(in.kind, RealtimeInboundKind::invalid) << text;
    ASSERT_TRUE(in.error.has_value()) << text;
    EXPECT_EQ(*in.error, error) << text << ": " << realtime_dialect_error_name(*in.error);
  }
  EXPECT_EQ(*RealtimeDialect::decode_binary().error, RealtimeDialectError::binary_frame);
  EXPECT_EQ(realtime_dialect_error_name(RealtimeDialectError::odd_delta), "odd_delta");
  EXPECT_FALSE(realtime_dialect_error_message(RealtimeDialectError::binary_frame).empty());
  // After all that, audio still flows.
  auto in = dialect.decode_text(delta_event(std::vector<int16_t>(480 * 3)));
  EXPECT_EQ(in.kind, RealtimeInboundKind::audio);
  EXPECT_EQ(in.frames + (dialect.pending_samples() > 0 ? 1 : 0), 3u)
      << "3 frames give 3 frames or 2 + a remainder";
}

TEST(RealtimeDialect, SpeechStartedIsABargeInAndIsPassedOn) {
  RealtimeDialect dialect(24000);
  ASSERT_EQ(dialect.decode_text(delta_event(std::vector<int16_t>(700))).frames, 1u);
  EXPECT_EQ(dialect.pending_samples(), 220u);
  auto in = dialect.decode_text(
      R"({"type":"input_audio_buffer.speech_started","event_id":"e9","audio_start_ms":1200})");
  EXPECT_EQ(in.kind, RealtimeInboundKind::clear);
  EXPECT_EQ(in.event["audio_start_ms"], 1200);
  EXPECT_EQ(dialect.pending_samples(), 220u)
      << "the Call's clear drops the tail (discard_output), not decode";
  dialect.clear_pending();
  EXPECT_EQ(dialect.pending_samples(), 0u);
}

TEST(RealtimeDialect, OtherEventsPassThrough) {
  RealtimeDialect dialect(16000);
  for (
      const char* text :
      {R"({"type":"session.created","event_id":"e","session":{}})",
       R"({"type":"error","event_id":"e","error":{"type":"invalid_request_error","code":"x","message":"m"}})",
       R"({"type":"response.done","event_id":"e"})", R"({"type":"input_audio_buffer.speech_stopped"})",
       R"({"type":"response.output_audio.done"})"}) {
    auto in = dialect.decode_text(text);
    EXPECT_EQ(in.kind, RealtimeInboundKind::event) << text;
    EXPECT_EQ(in.event, nlohmann::json::parse(text));
  }
}

TEST(RealtimeDialect, SessionUpdatePinsTheAudioFormats) {
  RealtimeDialect dialect(16000);
  const nlohmann::json pcm24 = {{"type", "audio/pcm"}, {"rate", 24000}};
  auto none = nlohmann::json::parse(dialect.session_update(nullptr));
  EXPECT_EQ(none["type"], "session.update");
  EXPECT_EQ(none["session"]["type"], "realtime");
  EXPECT_EQ(none["session"]["audio"]["input"]["format"], pcm24);
  EXPECT_EQ(none["session"]["audio"]["output"]["format"], pcm24);

  nlohmann::json config = {{"type", "realtime"},
                           {"instructions", "be brief"},
                           {"audio",
                            {{"input", {{"format", {{"type", "audio/pcmu"}}}, {"noise_reduction", nullptr}}},
                             {"output", {{"voice", "alloy"}}}}}};
  auto update = nlohmann::json::parse(dialect.session_update(config));
  EXPECT_EQ(update["session"]["instructions"], "be brief");
  EXPECT_EQ(update["session"]["audio"]["input"]["format"], pcm24);
  EXPECT_TRUE(update["session"]["audio"]["input"].contains("noise_reduction"));
  EXPECT_EQ(update["session"]["audio"]["output"]["voice"], "alloy");
  EXPECT_EQ(update["session"]["audio"]["output"]["format"], pcm24);

  // A client's own session.update on its way to the backend is pinned the same way.
  auto client = nlohmann::json::parse(
      dialect.encode_event({{"type", "session.update"}, {"event_id", "c1"}, {"session", config}}));
  EXPECT_EQ(client["event_id"], "c1");
  EXPECT_EQ(client["session"]["audio"]["input"]["format"], pcm24);
  nlohmann::json other = {{"type", "response.create"}, {"response", {{"instructions", "hi"}}}};
  EXPECT_EQ(nlohmann::json::parse(dialect.encode_event(other)), other);
}

}  // namespace
}  // namespace rtce
