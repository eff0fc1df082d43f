// python_backend_test.cpp — the documented example backend (examples/python_backend) is
// started with /usr/bin/python3 and exchanges audio and a barge-in with the real client.
// Skipped, with the reason, when python3-websockets is not installed.
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
#include "test_support.h"

extern char** environ;

namespace rtce::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";

// The example as a child process; its first stdout line names the port it listens on.
class PythonBackend {
 public:
  bool start(std::string* error) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return fail(error, "pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::string script = std::string(RTCE_SOURCE_DIR) + "/examples/python_backend/echo_backend.py";
    const char* argv[] = {kPython, script.c_str(), "--host", "127.0.0.1", "--port", "0", nullptr};
    int rc = posix_spawn(&pid_, kPython, &actions, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      pid_ = -1;
      return fail(error, "posix_spawn failed");
    }
    // Read the "listening on ws://127.0.0.1:<port>/" line with a deadline.
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{out[0], POLLIN, 0};
      if (poll(&pfd, 1, 100) <= 0) continue;
      char chunk[256];
      ssize_t n = read(out[0], chunk, sizeof chunk);
      if (n <= 0) break;
      line.append(chunk, static_cast<size_t>(n));
    }
    ::close(out[0]);
    auto at = line.find("ws://");
    auto end = line.find('\n');
    if (at == std::string::npos || end == std::string::npos) return fail(error, "no listening line: " + line);
    url_ = line.substr(at, end - at);
    return true;
  }

  ~PythonBackend() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }

  const std::string& url() const { return url_; }

 private:
  static bool fail(std::string* error, std::string message) {
    *error = std::move(message);
    return false;
  }

  pid_t pid_ = -1;
  std::string url_;
};

TEST(PythonExampleBackend, EchoesAudioAndSendsClearOnDemoClear) {
  std::string probe = std::string(kPython) + " -c 'import websockets' >/dev/null 2>&1";
  if (access(kPython, X_OK) != 0 || std::system(probe.c_str()) != 0) {
    GTEST_SKIP() << kPython << " with python3-websockets is needed (apt-get install python3-websockets)";
  }
  PythonBackend python;
  std::string error;
  ASSERT_TRUE(python.start(&error)) << error;

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
