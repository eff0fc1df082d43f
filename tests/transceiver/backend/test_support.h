// test_support.h — what the backend tests share: a listener that records every call, a
// loop that runs the client io_context until a condition holds or a deadline passes, and
// recognisable PCM frames.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"

namespace rtce::testing {

struct RecordingListener : BackendListener {
  void on_backend_audio(std::span<const int16_t> pcm) override {
    EXPECT_FALSE(inside_send) << "the backend called the listener from inside a send";
    audio.emplace_back(pcm.begin(), pcm.end());
    audio_times.push_back(std::chrono::steady_clock::now());
    if (on_audio) on_audio();
  }
  void on_backend_opus(std::span<const uint8_t> packet) override {
    opus.emplace_back(packet.begin(), packet.end());
  }
  void on_backend_clear() override { ++clears; }
  void on_backend_event(const nlohmann::json& event) override { events.push_back(event); }
  void on_backend_closed(std::string_view reason) override {
    closed.emplace_back(reason);
    if (on_closed) on_closed();
  }

  std::vector<std::vector<int16_t>> audio;
  std::vector<std::chrono::steady_clock::time_point> audio_times;
  std::vector<std::vector<uint8_t>> opus;
  int clears = 0;
  std::vector<nlohmann::json> events;
  std::vector<std::string> closed;
  bool inside_send = false;
  std::function<void()> on_audio;
  std::function<void()> on_closed;
};

// Runs io until pred() holds; false when the deadline passes first.
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& pred,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.run_one_for(std::chrono::milliseconds(5)) == 0 && io.stopped()) {
      io.restart();
      std::this_thread::yield();  // no client work pending: the condition waits on the server thread
    }
  }
  return true;
}

// Drives a backend's deadlines from io, as the media worker does from its wheel: a 1 ms timer
// calls on_deadline once next_deadline() has passed. Declare it after the backend it drives;
// the backend may be reset meanwhile (from its own callback, say).
class DeadlineDriver {
 public:
  DeadlineDriver(boost::asio::io_context& io, std::unique_ptr<BackendConnection>& backend)
      : timer_(io), backend_(backend) {
    arm();
  }
  ~DeadlineDriver() { timer_.cancel(); }
  DeadlineDriver(const DeadlineDriver&) = delete;
  DeadlineDriver& operator=(const DeadlineDriver&) = delete;

 private:
  void arm() {
    timer_.expires_after(std::chrono::milliseconds(1));
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;  // cancelled: the driver is gone
      const Nanos now = monotonic_now();
      if (backend_ && backend_->next_deadline() <= now) backend_->on_deadline(now);
      arm();
    });
  }
  boost::asio::steady_timer timer_;
  std::unique_ptr<BackendConnection>& backend_;
};

// Runs io for a fixed window: used only to show that something does NOT happen.
inline void run_for(boost::asio::io_context& io, std::chrono::milliseconds window) {
  auto deadline = std::chrono::steady_clock::now() + window;
  while (std::chrono::steady_clock::now() < deadline) {
    if (io.run_one_until(deadline) == 0 && io.stopped()) {
      io.restart();
      std::this_thread::yield();
    }
  }
}

// A 20 ms frame whose every sample names its sequence number and position.
inline std::vector<int16_t> numbered_frame(int sample_rate, int sequence) {
  std::vector<int16_t> frame(static_cast<size_t>(sample_rate / 50));
  for (size_t i = 0; i < frame.size(); ++i)
    frame[i] = static_cast<int16_t>(sequence * 1000 + static_cast<int>(i));
  return frame;
}

// A loud 20 ms frame at 16 kHz (a ~250 Hz tone, 8000 peak) that continues frame `sequence`'s.
inline std::vector<int16_t> tone_frame(int sequence) {
  std::vector<int16_t> frame(320);
  for (size_t i = 0; i < frame.size(); ++i)
    frame[i] = static_cast<int16_t>(8000 * std::sin(0.1 * static_cast<double>(i + 320 * sequence)));
  return frame;
}

// A 16 kHz session of this id.
inline BackendSessionInfo session_16k(std::string id) {
  BackendSessionInfo info;
  info.session_id = std::move(id);
  info.sample_rate = 16000;
  return info;
}

inline std::string frame_bytes(const std::vector<int16_t>& frame) {
  return std::string(reinterpret_cast<const char*>(frame.data()), frame.size() * sizeof(int16_t));
}

}  // namespace rtce::testing
