// echo_backend_core_test.cpp — the echo backend on a fake clock: loopback delay exact to
// the frame, parrot VAD start/end, replay of the whole utterance once, max length.
#include "audio/echo_backend_core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

namespace rtce {
namespace {

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kFrame = 20 * kMs;
constexpr Nanos kStart = 777 * kMs;
constexpr int kRate = 16000;
constexpr size_t kSamples = 320;

std::vector<int16_t> constant(int16_t value) { return std::vector<int16_t>(kSamples, value); }

// A 20 ms slice of a 440 Hz tone at about -9 dBFS whose first sample carries `tag`.
std::vector<int16_t> speech(int tag) {
  std::vector<int16_t> pcm(kSamples);
  for (size_t i = 0; i < kSamples; ++i)
    pcm[i] = static_cast<int16_t>(12000 * std::sin(2 * std::numbers::pi * 440.0 * i / kRate));
  pcm[0] = static_cast<int16_t>(tag);
  return pcm;
}

TEST(EchoCoreTest, LevelMeter) {
  EXPECT_DOUBLE_EQ(frame_level_dbfs(constant(0)), -120.0);
  EXPECT_NEAR(frame_level_dbfs(constant(32767)), 0.0, 0.01);
  EXPECT_NEAR(frame_level_dbfs(constant(328)), -40.0, 0.1);
  EXPECT_NEAR(frame_level_dbfs(speech(0)), -11.7, 0.5);  // sine RMS = peak / sqrt(2)
}

TEST(EchoCoreTest, LoopbackDelayIsExact) {
  EchoCore core(EchoCore::Mode::loopback, kRate, 500 * kMs);
  std::vector<int16_t> out(kSamples);
  int played = 0;
  for (int tick = 0; tick < 100; ++tick) {
    const Nanos now = kStart + tick * kFrame;
    core.on_input_frame(constant(static_cast<int16_t>(tick)), now);
    // One microsecond before a frame's release it is held; at the release it plays.
    if (tick >= 25) {
      EXPECT_FALSE(core.pop_output(out, now - 1000)) << tick;
    }
    const bool got = core.pop_output(out, now);
    if (tick < 25) {
      EXPECT_FALSE(got) << tick;
      continue;
    }
    ASSERT_TRUE(got) << tick;
    EXPECT_EQ(out[0], tick - 25);  // the frame from exactly 500 ms ago
    ++played;
    EXPECT_FALSE(core.pop_output(out, now));
  }
  EXPECT_EQ(played, 75);
  EXPECT_EQ(core.frames_dropped(), 0u);
}

TEST(EchoCoreTest, LoopbackRefusesWrongFrameSizes) {
  EchoCore core(EchoCore::Mode::loopback, kRate, 0);
  core.on_input_frame(std::vector<int16_t>(100), kStart);
  EXPECT_EQ(core.frames_refused(), 1u);
  std::vector<int16_t> out(kSamples);
  EXPECT_FALSE(core.pop_output(out, kStart));
}

TEST(EchoCoreTest, ParrotReplaysTheUtteranceAfterSilence) {
  EchoCore core(EchoCore::Mode::parrot, kRate);
  std::vector<std::pair<EchoEvent, Nanos>> events;
  core.set_listener([&](EchoEvent e, Nanos t) { events.emplace_back(e, t); });
  std::vector<int16_t> out(kSamples);
  Nanos now = kStart;
  // 300 ms of quiet room noise (~-50 dBFS): nothing happens.
  for (int i = 0; i < 15; ++i, now += kFrame) {
    core.on_input_frame(constant(100), now);
    EXPECT_FALSE(core.pop_output(out, now));
  }
  EXPECT_TRUE(events.empty());
  // One second of speech.
  const Nanos speech_start = now;
  for (int i = 0; i < 50; ++i, now += kFrame) core.on_input_frame(speech(1000 + i), now);
  const Nanos last_speech = now - kFrame;
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], std::make_pair(EchoEvent::utterance_started, speech_start));
  EXPECT_TRUE(core.in_utterance());
  // Silence: the utterance ends once 700 ms have passed since the last speech frame.
  while (core.in_utterance()) {
    EXPECT_FALSE(core.pop_output(out, now));
    core.on_input_frame(constant(0), now);
    now += kFrame;
    ASSERT_LT(now, last_speech + 2000 * kMs);
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1], std::make_pair(EchoEvent::utterance_ended, last_speech + 700 * kMs));

  // The replay: the 50 speech frames in order, then 100 ms of the trailing silence.
  for (int i = 0; i < 50; ++i, now += kFrame) {
    ASSERT_TRUE(core.pop_output(out, now)) << i;
    EXPECT_EQ(out[0], 1000 + i);
    core.on_input_frame(speech(9), now);  // our own echo: ignored while replaying
  }
  for (int i = 0; i < 5; ++i, now += kFrame) {
    ASSERT_TRUE(core.pop_output(out, now));
    EXPECT_EQ(out[0], 0);
  }
  EXPECT_FALSE(core.pop_output(out, now));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].first, EchoEvent::playback_finished);
  EXPECT_EQ(core.frames_ignored(), 50u);
  EXPECT_EQ(core.utterances(), 1u);
  EXPECT_FALSE(core.replaying());
}

TEST(EchoCoreTest, ParrotCutsAnUtteranceAtTheMaximumLength) {
  VadConfig vad;
  vad.max_utterance = 2'000 * kMs;
  EchoCore core(EchoCore::Mode::parrot, kRate, 0, vad);
  int ended = 0;
  core.set_listener([&](EchoEvent e, Nanos) { ended += e == EchoEvent::utterance_ended; });
  Nanos now = kStart;
  int fed = 0;
  while (ended == 0 && fed < 500) core.on_input_frame(speech(fed++), now += kFrame);
  EXPECT_EQ(fed, 100);  // 2 s of 20 ms frames
  std::vector<int16_t> out(kSamples);
  int replayed = 0;
  while (core.pop_output(out, now)) ++replayed;
  EXPECT_EQ(replayed, 100);
  // Listening again afterwards.
  core.on_input_frame(speech(1), now);
  EXPECT_TRUE(core.in_utterance());
}

}  // namespace
}  // namespace rtce
