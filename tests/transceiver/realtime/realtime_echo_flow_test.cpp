// realtime_echo_flow_test.cpp — the oai-events channel wired to the echo backend the way a
// session wires them (client events -> send_event, backend events -> on_backend_event,
// played audio -> on_output_started/stopped): the agents SDK's connect, sendMessage and
// interrupt() work end to end with no backend, at the event level.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "realtime_events.h"

namespace rtce {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// The session's side: plays what the backend sends, tells the channel when output starts
// and when its (one-frame) queue runs dry.
struct FlowSession : BackendListener {
  void on_backend_audio(std::span<const int16_t>) override {
    ++frames_played;
    if (!playing) {
      playing = true;
      channel->on_output_started(monotonic_now());
    }
    last_audio = std::chrono::steady_clock::now();
  }
  void on_backend_clear() override {}
  void on_backend_event(const json& event) override { channel->on_backend_event(event, monotonic_now()); }
  void on_backend_closed(std::string_view) override {}
  // Called every loop turn: 40 ms without a frame is a drained queue.
  void poll() {
    if (playing && std::chrono::steady_clock::now() - last_audio > 40ms) {
      playing = false;
      channel->on_output_stopped(monotonic_now());
    }
  }

  RealtimeEventChannel* channel = nullptr;
  bool playing = false;
  int frames_played = 0;
  std::chrono::steady_clock::time_point last_audio{};
};

class RealtimeEchoFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RealtimeEventChannel::Callbacks cb;
    cb.send_to_client = [this](std::string_view text) { to_client.push_back(json::parse(text)); };
    cb.send_to_backend = [this](const json& event) { backend->send_event(event); };
    cb.clear_output = [this] {
      ++clears;
      session.playing = false;
    };
    channel = std::make_unique<RealtimeEventChannel>(nullptr, RealtimeEventChannel::Limits{}, std::move(cb));
    session.channel = channel.get();
    EchoBackendConfig config;
    config.mode = EchoBackendConfig::Mode::parrot;
    BackendSessionInfo info;
    info.session_id = "flow";
    info.sample_rate = 16000;
    backend = make_echo_backend(io, config, info, session, counters);
  }

  void client(const json& event) {
    const std::string text = event.dump();
    channel->on_client_message({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, false,
                               monotonic_now());
  }
  const json* find(std::string_view type, size_t from = 0) const {
    for (size_t i = from; i < to_client.size(); ++i)
      if (to_client[i]["type"] == type) return &to_client[i];
    return nullptr;
  }
  // Runs the loop until `type` reached the client, or 3 s passed.
  bool wait_for(std::string_view type, size_t from = 0) {
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    while (!find(type, from)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      io.run_one_for(5ms);
      if (io.stopped()) io.restart();
      session.poll();
    }
    return true;
  }
  void speak(int tone_frames) {
    std::vector<int16_t> frame(320);
    for (int f = 0; f < 20 + tone_frames + 35; ++f) {
      const bool tone = f >= 20 && f < 20 + tone_frames;
      for (size_t i = 0; i < frame.size(); ++i) {
        frame[i] = tone ? static_cast<int16_t>(8000 * std::sin(0.1 * static_cast<double>(i + 320 * f))) : 0;
      }
      backend->send_audio(frame);
    }
  }

  boost::asio::io_context io;
  BackendCounters counters;
  FlowSession session;
  std::unique_ptr<RealtimeEventChannel> channel;
  std::unique_ptr<BackendConnection> backend;
  std::vector<json> to_client;
  int clears = 0;
};

TEST_F(RealtimeEchoFlowTest, ConnectSendMessageAndSpeakAndInterrupt) {
  channel->on_open(monotonic_now());
  ASSERT_EQ(to_client.at(0)["type"], "session.created");
  client({{"type", "session.update"},
          {"session", {{"type", "realtime"}, {"model", "gpt-realtime"}, {"instructions", "echo"}}}});
  ASSERT_TRUE(find("session.updated"));

  // sendMessage("hello"): the echo's reply reaches the client as a text response.
  client({{"type", "conversation.item.create"},
          {"item",
           {{"type", "message"},
            {"role", "user"},
            {"content", {{{"type", "input_text"}, {"text", "hello"}}}}}}});
  client({{"type", "response.create"}});
  ASSERT_TRUE(wait_for("response.done"));
  EXPECT_EQ(find("response.output_text.delta")->at("delta"), "hello");

  // Speech: VAD events, then the replay between output_audio_buffer.started and .stopped,
  // all carrying the replay's response id.
  size_t mark = to_client.size();
  speak(25);
  ASSERT_TRUE(wait_for("output_audio_buffer.stopped", mark));
  ASSERT_TRUE(find("input_audio_buffer.speech_started", mark));
  ASSERT_TRUE(find("input_audio_buffer.speech_stopped", mark));
  const json& created = *find("response.created", mark);
  EXPECT_EQ(find("output_audio_buffer.started", mark)->at("response_id"), created["response"]["id"]);
  EXPECT_EQ(find("output_audio_buffer.stopped", mark)->at("response_id"), created["response"]["id"]);
  EXPECT_EQ(session.frames_played, 25);

  // interrupt() during a replay: response.cancel then output_audio_buffer.clear.
  mark = to_client.size();
  speak(100);
  ASSERT_TRUE(wait_for("output_audio_buffer.started", mark));
  client({{"type", "response.cancel"}});
  client({{"type", "output_audio_buffer.clear"}});
  const int played_at_interrupt = session.frames_played;
  EXPECT_EQ(clears, 2);
  ASSERT_TRUE(wait_for("response.done", mark));
  EXPECT_EQ(find("response.done", mark)->at("response")["status"], "cancelled");
  const auto quiet_until = std::chrono::steady_clock::now() + 100ms;
  while (std::chrono::steady_clock::now() < quiet_until) {
    io.run_one_for(5ms);
    if (io.stopped()) io.restart();
    session.poll();
  }
  EXPECT_EQ(session.frames_played, played_at_interrupt) << "audio after interrupt()";
  size_t cleared = 0;
  for (size_t i = mark; i < to_client.size(); ++i)
    cleared += to_client[i]["type"] == "output_audio_buffer.cleared";
  EXPECT_EQ(cleared, 1u);
  EXPECT_FALSE(find("output_audio_buffer.stopped", mark)) << "the cleared output does not also stop";

  for (const json& e : to_client) EXPECT_TRUE(e["event_id"].is_string()) << e;
  EXPECT_EQ(channel->stats().errors_sent, 0u);
  backend->close("done");
}

}  // namespace
}  // namespace rtce
