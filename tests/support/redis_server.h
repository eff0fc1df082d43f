// redis_server.h — a private redis-server for tests and the benchmark: a free loopback
// port, no persistence, started and awaited (PING) with a deadline, killed on
// destruction and when the parent dies. Also kill/pause/resume for outage tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rtce::test {

inline constexpr const char* kRedisServerPath = "/usr/bin/redis-server";

class RedisServer {
 public:
  static bool available();
  static uint16_t free_port();

  // port 0: a free port. A password makes the server require AUTH (command() sends it).
  explicit RedisServer(uint16_t port = 0, std::string password = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Spawns the server (again, on the same port) and waits until it answers PING.
  bool start(std::chrono::milliseconds deadline = std::chrono::milliseconds(5000));
  void kill();    // SIGKILL and reap
  void pause();   // SIGSTOP: connections stay open, nothing is answered
  void resume();  // SIGCONT
  bool running() const { return pid_ > 0; }
  uint16_t port() const { return port_; }

  // A blocking command on a fresh connection (test setup and inspection only). Returns
  // the reply as text (integers in decimal), or "" on failure.
  std::string command(const std::vector<std::string>& args) const;

 private:
  uint16_t port_;
  std::string password_;
  pid_t pid_ = -1;
};

}  // namespace rtce::test
