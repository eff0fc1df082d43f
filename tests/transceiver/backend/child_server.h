// child_server.h — a test server as a child process (posix_spawn, stdout on a pipe) whose
// first stdout line names the ws:// or wss:// URL it listens on, read with a deadline;
// SIGTERM and reaped on destruction. The Python backends of the backend tests run in it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

extern char** environ;

namespace rtce::testing {

// A child process whose first stdout line names the URL it listens on.
class ChildServer {
 public:
  bool start(std::vector<std::string> args, std::string* error) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return fail(error, "pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0].c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      pid_ = -1;
      return fail(error, "posix_spawn failed");
    }
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{out[0], POLLIN, 0};
      if (poll(&pfd, 1, 100) <= 0) continue;
      char chunk[256];
      ssize_t n = read(out[0], chunk, sizeof chunk);
      if (n <= 0) break;
      line.append(chunk, static_cast<size_t>(n));
    }
    ::close(out[0]);
    auto at = line.find("ws");
    auto end = line.find('\n');
    if (at == std::string::npos || end == std::string::npos) return fail(error, "no listening line: " + line);
    url_ = line.substr(at, end - at);
    return true;
  }

  ~ChildServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }

  const std::string& url() const { return url_; }
  // The port of url(), for URLs that name the host differently.
  std::string port() const { return url_.substr(url_.rfind(':') + 1, url_.size() - url_.rfind(':') - 2); }

 private:
  static bool fail(std::string* error, std::string message) {
    *error = std::move(message);
    return false;
  }

  pid_t pid_ = -1;
  std::string url_;
};

}  // namespace rtce::testing
