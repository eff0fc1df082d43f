// echo_backend_test.cpp — the in-process echo backend: loopback returns every frame once,
// after the delay and never from inside a send; parrot replays an utterance after silence.
// Its Realtime events are in echo_backend_events_test.cpp.
#include <gtest/gtest.h>

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cmath>

#include "backend.h"
#include "test_support.h"

namespace rtce::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class EchoBackendTest : public ::testing::Test {
 protected:
  void send(BackendConnection& backend, const std::vector<int16_t>& frame) {
    listener.inside_send = true;
    backend.send_audio(frame);
    listener.inside_send = false;
  }

  boost::asio::io_context io;
  RecordingListener listener;
  BackendCounters counters;
};

TEST_F(EchoBackendTest, LoopbackReturnsEachFrameOnceAfterTheDelayAtTheSendersPace) {
  EchoBackendConfig config;
  config.loopback_delay = 200'000'000;
  auto backend = make_echo_backend(config, session_16k("echo"), listener, counters);
  DeadlineDriver backend_deadlines(io, backend);

  // The caller sends one frame every 20 ms from a timer, as a session would.
  constexpr int kFrames = 10;
  std::vector<Clock::time_point> sent_at;
  boost::asio::steady_timer pacer(io);
  std::function<void()> tick = [&] {
    sent_at.push_back(Clock::now());
    send(*backend, numbered_frame(16000, static_cast<int>(sent_at.size()) - 1));
    if (sent_at.size() == kFrames) return;
    pacer.expires_after(20ms);
    pacer.async_wait([&](boost::system::error_code) { tick(); });
  };
  tick();

  ASSERT_TRUE(run_until(io, [&] { return listener.audio.size() >= kFrames; }));
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(listener.audio[i], numbered_frame(16000, i)) << "frame " << i;
    auto delay = listener.audio_times[i] - sent_at[i];
    EXPECT_GE(delay, 200ms) << "frame " << i;
    EXPECT_LT(delay, 400ms) << "frame " << i;
  }
  run_for(io, 100ms);
  EXPECT_EQ(listener.audio.size(), static_cast<size_t>(kFrames)) << "each frame comes back once";
  EXPECT_EQ(counters.frames_sent.get(), static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counters.frames_received.get(), static_cast<uint64_t>(kFrames));
}

// The delay line starts at the delay plus a few frames and grows with a burst, up to the delay
// plus one second; beyond that the oldest frames go (counted), and the rest play in order.
TEST_F(EchoBackendTest, LoopbackBurstGrowsTheDelayLineUpToItsBound) {
  EchoBackendConfig config;
  config.loopback_delay = 100'000'000;  // 5 frames: the bound is 5 + 50
  auto backend = make_echo_backend(config, session_16k("echo"), listener, counters);
  DeadlineDriver backend_deadlines(io, backend);
  constexpr int kBurst = 60;
  for (int i = 0; i < kBurst; ++i) send(*backend, numbered_frame(16000, i));
  EXPECT_EQ(counters.frames_dropped_outbound.get(), 5u);
  ASSERT_TRUE(run_until(io, [&] { return listener.audio.size() >= 55; }));
  for (int i = 0; i < 55; ++i) EXPECT_EQ(listener.audio[i], numbered_frame(16000, i + 5)) << "frame " << i;
}

TEST_F(EchoBackendTest, LoopbackClearsOnDemoClearAndStopsAtClose) {
  EchoBackendConfig config;
  config.loopback_delay = 100'000'000;
  auto backend = make_echo_backend(config, session_16k("echo"), listener, counters);
  DeadlineDriver backend_deadlines(io, backend);
  for (int i = 0; i < 5; ++i) send(*backend, numbered_frame(16000, i));
  backend->send_event({{"type", "demo.clear"}});
  ASSERT_TRUE(run_until(io, [&] { return listener.clears == 1; }));
  run_for(io, 150ms);
  EXPECT_TRUE(listener.audio.empty()) << "cleared frames were played";

  for (int i = 0; i < 5; ++i) send(*backend, numbered_frame(16000, i));
  backend->close("bye");
  run_for(io, 150ms);
  EXPECT_TRUE(listener.audio.empty()) << "frames played after close";
  EXPECT_TRUE(listener.closed.empty());
}

TEST_F(EchoBackendTest, ParrotReplaysAnUtteranceOnceAfterSilence) {
  EchoBackendConfig config;
  config.mode = EchoBackendConfig::Mode::parrot;
  auto backend = make_echo_backend(config, session_16k("echo"), listener, counters);
  DeadlineDriver backend_deadlines(io, backend);
  const std::vector<int16_t> silence(320, 0);

  for (int i = 0; i < 20; ++i) send(*backend, silence);  // nothing to repeat yet
  for (int i = 0; i < 25; ++i) send(*backend, tone_frame(i));
  for (int i = 0; i < 34; ++i) send(*backend, silence);  // 680 ms: still inside the hangover
  run_for(io, 50ms);
  EXPECT_TRUE(listener.audio.empty()) << "replayed before the hangover ended";

  send(*backend, silence);  // 700 ms of silence: the utterance is over
  auto replay_start = Clock::now();
  ASSERT_TRUE(run_until(io, [&] { return listener.audio.size() >= 25; }));
  for (int i = 0; i < 25; ++i) EXPECT_EQ(listener.audio[i], tone_frame(i)) << "frame " << i;
  // Paced at 20 ms a frame, not dumped at once.
  EXPECT_GE(listener.audio_times[24] - replay_start, 24 * 20ms - 5ms);
  // The replay is a response (the events themselves: echo_backend_events_test.cpp).
  ASSERT_TRUE(run_until(
      io, [&] { return !listener.events.empty() && listener.events.back()["type"] == "response.done"; }));
  EXPECT_EQ(listener.events[3]["type"], "response.created");

  for (int i = 0; i < 50; ++i) send(*backend, silence);
  run_for(io, 100ms);
  EXPECT_EQ(listener.audio.size(), 25u) << "the utterance is replayed once";
}

TEST_F(EchoBackendTest, ParrotCutsAnEndlessUtteranceAtTenSeconds) {
  EchoBackendConfig config;
  config.mode = EchoBackendConfig::Mode::parrot;
  auto backend = make_echo_backend(config, session_16k("echo"), listener, counters);
  DeadlineDriver backend_deadlines(io, backend);
  for (int i = 0; i < 500; ++i) send(*backend, tone_frame(i));
  ASSERT_TRUE(run_until(io, [&] { return listener.events.size() >= 4; }));
  EXPECT_EQ(listener.events[1]["type"], "input_audio_buffer.speech_stopped");
  EXPECT_EQ(listener.events[1]["audio_end_ms"], 10000);
  EXPECT_EQ(listener.events[3]["type"], "response.created");
  ASSERT_TRUE(run_until(io, [&] { return listener.audio.size() >= 3; }));
  EXPECT_EQ(listener.audio[2], tone_frame(2));
}

TEST_F(EchoBackendTest, WrongFrameSizesAreCountedNotEchoed) {
  auto backend = make_echo_backend(EchoBackendConfig{}, session_16k("echo"), listener, counters);
  DeadlineDriver backend_deadlines(io, backend);
  send(*backend, std::vector<int16_t>(100, 1));
  EXPECT_EQ(counters.frames_dropped_outbound.get(), 1u);
  run_for(io, 600ms);
  EXPECT_TRUE(listener.audio.empty());
}

TEST_F(EchoBackendTest, DestroyedFromItsOwnCallbackIsSafe) {
  EchoBackendConfig config;
  config.loopback_delay = 10'000'000;
  std::unique_ptr<BackendConnection> backend =
      make_echo_backend(config, session_16k("echo"), listener, counters);
  DeadlineDriver backend_deadlines(io, backend);
  listener.on_audio = [&] { backend.reset(); };
  for (int i = 0; i < 3; ++i) send(*backend, numbered_frame(16000, i));
  ASSERT_TRUE(run_until(io, [&] { return backend == nullptr; }));
  io.restart();
  io.run_for(200ms);
  EXPECT_EQ(listener.audio.size(), 1u);
}

}  // namespace
}  // namespace rtce::testing
