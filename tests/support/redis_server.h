// redis_server.h — a private redis-server for tests and the benchmark: a free loopback
// port, no persistence, its own temporary directory, started and awaited (PING) with a
// deadline, killed on destruction and when the parent dies. Also kill/pause/resume for
// outage tests, TLS (certificates from redis_topology.h), sentinel mode (a config file
// plus --sentinel) for the topologies of redis_topology.h, and run_process(): the
// redis-cli / openssl subprocesses those fixtures drive.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rtce::test {

inline constexpr const char* kRedisServerPath = "/usr/bin/redis-server";
inline constexpr const char* kRedisCliPath = "/usr/bin/redis-cli";
inline constexpr const char* kRedisSentinelPath = "/usr/bin/redis-sentinel";

class TestCertificates;  // redis_topology.h

// A program run to completion: argv[0] is the path (execv, no shell), killed after the
// timeout (exit_code -1 then). stdout and stderr are captured separately.
struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

struct RedisServerOptions {
  uint16_t port = 0;  // 0: a free port. With tls, the TLS port.
  std::string password;
  std::vector<std::string> extra_args;    // appended to the command line (--name value ...)
  const TestCertificates* tls = nullptr;  // listen with --tls-port using server.crt/key
  bool tls_only = true;                   // with tls: --port 0 (else also a plaintext port)
  bool tls_auth_clients = false;          // with tls: clients must present a certificate
  std::string tls_cert_file;              // with tls: served instead of server.crt (with tls_key_file)
  std::string tls_key_file;
  std::string dir;          // empty: a temporary directory of its own
  std::string config_file;  // passed first; relative: in dir (a sentinel rewrites it)
  bool sentinel = false;    // run as a sentinel (--sentinel)
};

class RedisServer {
 public:
  static bool available();
  static uint16_t free_port();
  // A free port p whose cluster bus port p + 10000 is free too (and <= 65535).
  static uint16_t free_cluster_port();

  // port 0: a free port. A password makes the server require AUTH (command() sends it).
  explicit RedisServer(uint16_t port = 0, std::string password = {});
  explicit RedisServer(RedisServerOptions options);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Spawns the server (again, on the same port and directory) and waits until it answers
  // PING.
  bool start(std::chrono::milliseconds deadline = std::chrono::milliseconds(5000));
  void kill();    // SIGKILL and reap
  void pause();   // SIGSTOP: connections stay open, nothing is answered
  void resume();  // SIGCONT
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }              // the port url() names
  uint16_t plain_port() const { return plain_port_; }  // plaintext port; 0 when TLS only
  bool tls() const { return options_.tls != nullptr; }
  const std::string& password() const { return options_.password; }
  const std::string& dir() const { return dir_; }
  // "redis://127.0.0.1:<port>", or "rediss://..." with TLS.
  std::string url() const;

  // A blocking command on a fresh connection (test setup and inspection only): hiredis for
  // plaintext, redis-cli for TLS (hiredis 0.14 has no TLS). Returns the reply as text
  // (integers in decimal), or "" on failure, an error reply or an array.
  std::string command(const std::vector<std::string>& args) const;
  // The same, for array replies: the elements flattened depth-first (nil as ""); a scalar
  // reply is one element. Empty on failure or an error reply.
  std::vector<std::string> command_array(const std::vector<std::string>& args) const;
  // The redis-cli arguments that reach this server (path, -h, -p, TLS and auth options),
  // for callers that run redis-cli themselves (--cluster create, a wrong CA, ...).
  std::vector<std::string> cli_args() const;

 private:
  struct Reply {
    bool ok = false;
    bool array = false;
    std::vector<std::string> elements;
  };
  Reply query(const std::vector<std::string>& args) const;
  Reply query_hiredis(const std::vector<std::string>& args) const;
  Reply query_cli(const std::vector<std::string>& args) const;

  RedisServerOptions options_;
  uint16_t port_;
  uint16_t plain_port_ = 0;
  std::string dir_;
  bool own_dir_ = false;
  pid_t pid_ = -1;
};

}  // namespace rtce::test
