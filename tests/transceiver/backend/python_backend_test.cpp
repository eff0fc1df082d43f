// python_backend_test.cpp — the documented example backend (examples/python_backend) is
// started with /usr/bin/python3 and exchanges audio and a barge-in with the real client.
// Fails, with the reason, when python3-websockets is not installed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "backend.h"
#include "child_server.h"
#include "test_support.h"

extern char** environ;

namespace rtce::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";

TEST(PythonExampleBackend, EchoesAudioAndSendsClearOnDemoClear) {
  std::string probe = std::string(kPython) + " -c 'import websockets' >/dev/null 2>&1";
  if (access(kPython, X_OK) != 0 || std::system(probe.c_str()) != 0) {
    FAIL() << kPython << " with python3-websockets is needed (scripts/install-deps.sh installs it)";
  }
  ChildServer python;
  std::string error;
  ASSERT_TRUE(
      python.start({kPython, std::string(RTCE_SOURCE_DIR) + "/examples/python_backend/echo_backend.py",
                    "--host", "127.0.0.1", "--port", "0"},
                   &error))
      << error;

  boost::asio::io_context io;
  RecordingListener listener;
  BackendCounters counters;
  WebSocketBackendConfig config;
  config.url = python.url();
  BackendSessionInfo info;
  info.session_id = "py";
  info.sample_rate = 16000;
  auto backend = make_websocket_backend(io, config, info, listener, counters);

  for (int i = 0; i < 10; ++i) backend->send_audio(numbered_frame(16000, i));
  ASSERT_TRUE(run_until(
      io, [&] { return listener.audio.size() >= 10; }, 5000ms))
      << "echoed " << listener.audio.size()
      << " frames; closed: " << (listener.closed.empty() ? "no" : listener.closed[0]);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(listener.audio[i], numbered_frame(16000, i)) << "frame " << i;

  backend->send_event({{"type", "demo.clear"}});
  ASSERT_TRUE(run_until(
      io, [&] { return listener.clears == 1; }, 5000ms));
  EXPECT_EQ(counters.protocol_errors.get(), 0u);
  EXPECT_TRUE(listener.closed.empty());

  backend->close("test over");
  backend.reset();
  io.restart();
  io.run_for(3s);
  EXPECT_TRUE(io.stopped()) << "the goodbye did not finish";
}

}  // namespace
}  // namespace rtce::testing
