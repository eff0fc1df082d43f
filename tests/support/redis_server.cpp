// redis_server.cpp — spawning and driving a private redis-server (plaintext, TLS, sentinel),
// and run_process(), the fork/exec helper the Redis fixtures run redis-cli and openssl with.
#include "redis_server.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include "redis_topology.h"

namespace rtce::test {

namespace {

// The child side of a fork: die with the parent (never outlive a crashed test), then exec.
// Only async-signal-safe calls: the argv is prepared before fork().
[[noreturn]] void exec_child(pid_t parent, const char* path, char* const* argv, int out_fd, int err_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  const int devnull = open("/dev/null", O_RDWR);
  dup2(devnull, STDIN_FILENO);
  dup2(out_fd >= 0 ? out_fd : devnull, STDOUT_FILENO);
  dup2(err_fd >= 0 ? err_fd : devnull, STDERR_FILENO);
  execv(path, argv);
  _exit(127);
}

std::vector<char*> c_argv(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  return argv;
}

// redis-cli's human-readable (--no-raw) form of one output line, reduced to its leaf: the
// "1) 2) " prefixes of (nested) arrays dropped, a quoted string unescaped. Unlike --raw
// it tells an error, nil and an array apart from a string, and keeps one value a line.
enum class Leaf { kValue, kNil, kEmpty, kError };
Leaf parse_cli_line(std::string_view line, std::string& value, bool& in_array) {
  size_t i = 0;
  for (;;) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i && j + 1 < line.size() && line[j] == ')' && line[j + 1] == ' ') {
      in_array = true;
      i = j + 2;
      continue;
    }
    break;
  }
  std::string_view rest = line.substr(i);
  value.clear();
  if (rest == "(nil)") return Leaf::kNil;
  if (rest == "(empty array)" || rest == "(empty list or set)") {
    in_array = true;
    return Leaf::kEmpty;
  }
  if (rest.starts_with("(error)")) return Leaf::kError;
  if (rest.starts_with("(integer) ")) {
    value = rest.substr(10);
    return Leaf::kValue;
  }
  if (rest.size() >= 2 && rest.front() == '"' && rest.back() == '"') {
    rest = rest.substr(1, rest.size() - 2);
    for (size_t k = 0; k < rest.size(); ++k) {
      if (rest[k] != '\\' || k + 1 >= rest.size()) {
        value += rest[k];
        continue;
      }
      const char c = rest[++k];
      switch (c) {
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'x':
          if (k + 2 < rest.size()) {
            value += static_cast<char>(std::strtol(std::string(rest.substr(k + 1, 2)).c_str(), nullptr, 16));
            k += 2;
          }
          break;
        default: value += c;
      }
    }
    return Leaf::kValue;
  }
  value = rest;  // a status reply (OK) or a verbatim word
  return Leaf::kValue;
}

// redis-cli prints these replies raw even with --no-raw (redis-cli.c, cliSendCommand): INFO
// and the multi-line CLUSTER / CLIENT / MEMORY / LATENCY reports.
bool cli_prints_raw(const std::vector<std::string>& args) {
  auto is = [](const std::string& arg, std::string_view word) {
    return arg.size() == word.size() && std::equal(arg.begin(), arg.end(), word.begin(),
                                                   [](char a, char b) { return std::tolower(a) == b; });
  };
  if (args.empty()) return false;
  if (is(args[0], "info") || is(args[0], "lolwut")) return true;
  if (args.size() != 2) return false;
  return (is(args[0], "cluster") && (is(args[1], "nodes") || is(args[1], "info"))) ||
         (is(args[0], "client") && is(args[1], "list")) ||
         (is(args[0], "memory") && (is(args[1], "stats") || is(args[1], "doctor"))) ||
         (is(args[0], "latency") && (is(args[1], "graph") || is(args[1], "doctor")));
}

void flatten(const redisReply* reply, std::vector<std::string>& out) {
  switch (reply->type) {
    case REDIS_REPLY_INTEGER: out.push_back(std::to_string(reply->integer)); break;
    case REDIS_REPLY_NIL: out.emplace_back(); break;
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < reply->elements; ++i) flatten(reply->element[i], out);
      break;
    default: out.emplace_back(reply->str != nullptr ? std::string(reply->str, reply->len) : std::string());
  }
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  ProcessResult result;
  if (args.empty()) return result;
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return result;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return result;
  }
  auto argv = c_argv(args);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) exec_child(parent, argv[0], argv.data(), out_pipe[1], err_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool timed_out = false;
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now())
            .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    if (poll(fds, 2, static_cast<int>(left)) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = !timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool RedisServer::available() { return access(kRedisServerPath, X_OK) == 0; }

uint16_t RedisServer::free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

uint16_t RedisServer::free_cluster_port() {
  // The kernel's free ports come from the ephemeral range (32768..60999 on Debian): retry
  // until one leaves room for its bus port and that one is free too.
  for (int attempt = 0; attempt < 200; ++attempt) {
    const uint16_t port = free_port();
    if (port == 0 || port > 65535 - 10000) continue;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port + 10000));
    const bool bus_free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (bus_free) return port;
  }
  return 0;
}

RedisServer::RedisServer(uint16_t port, std::string password)
    : RedisServer(RedisServerOptions{.port = port, .password = std::move(password)}) {}

RedisServer::RedisServer(RedisServerOptions options)
    : options_(std::move(options)), port_(options_.port != 0 ? options_.port : free_port()) {
  if (options_.tls != nullptr && !options_.tls_only) plain_port_ = free_port();
  if (options_.dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rtce-redis-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) {
      dir_ = tmpl;
      own_dir_ = true;
    } else {
      dir_ = "/tmp";
    }
  } else {
    dir_ = options_.dir;
  }
}

RedisServer::~RedisServer() {
  resume();
  kill();
  if (own_dir_) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string RedisServer::url() const {
  return std::string(tls() ? "rediss" : "redis") + "://127.0.0.1:" + std::to_string(port_);
}

bool RedisServer::start(std::chrono::milliseconds deadline) {
  if (pid_ > 0) return true;
  // A sentinel runs as Debian's redis-sentinel (scripts/install-deps.sh installs it), what
  // operators run; redis-server --sentinel (the same code) where it is missing.
  const bool sentinel_binary = options_.sentinel && access(kRedisSentinelPath, X_OK) == 0;
  const char* program = sentinel_binary ? kRedisSentinelPath : kRedisServerPath;
  std::vector<std::string> args{program};
  if (!options_.config_file.empty()) {
    args.push_back(options_.config_file.starts_with('/') ? options_.config_file
                                                         : dir_ + "/" + options_.config_file);
  }
  if (options_.sentinel && !sentinel_binary) args.push_back("--sentinel");
  const auto* tls = options_.tls;
  args.insert(args.end(), {"--port", std::to_string(tls != nullptr ? plain_port_ : port_), "--bind",
                           "127.0.0.1", "--daemonize", "no", "--dir", dir_, "--loglevel", "warning"});
  if (!options_.sentinel) {  // a sentinel keeps no data
    args.insert(args.end(), {"--save", "", "--appendonly", "no"});
  }
  if (tls != nullptr) {
    const bool own_cert = !options_.tls_cert_file.empty();
    args.insert(args.end(), {"--tls-port", std::to_string(port_), "--tls-cert-file",
                             own_cert ? options_.tls_cert_file : tls->server_cert(), "--tls-key-file",
                             own_cert ? options_.tls_key_file : tls->server_key(), "--tls-ca-cert-file",
                             tls->ca_cert(), "--tls-auth-clients", options_.tls_auth_clients ? "yes" : "no"});
  }
  if (!options_.password.empty()) args.insert(args.end(), {"--requirepass", options_.password});
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  auto argv = c_argv(args);
  // The server's log is worth keeping when a topology misbehaves: it goes to its directory.
  const std::string log_path = dir_ + "/redis.log";
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) exec_child(parent, program, argv.data(), log_fd, log_fd);
  if (log_fd >= 0) close(log_fd);
  if (pid < 0) return false;
  pid_ = pid;
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (command({"PING"}) == "PONG") return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {  // died (port taken?)
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
  return false;
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisServer::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::vector<std::string> RedisServer::cli_args() const {
  std::vector<std::string> args{kRedisCliPath, "-h", "127.0.0.1", "-p", std::to_string(port_)};
  if (const auto* tls = options_.tls) {
    args.insert(args.end(), {"--tls", "--cacert", tls->ca_cert()});
    // A test that serves a certificate of its own (an expired one) still inspects the server.
    if (!options_.tls_cert_file.empty()) args.push_back("--insecure");
    if (options_.tls_auth_clients)
      args.insert(args.end(), {"--cert", tls->client_cert(), "--key", tls->client_key()});
  }
  if (!options_.password.empty()) args.insert(args.end(), {"--no-auth-warning", "-a", options_.password});
  return args;
}

RedisServer::Reply RedisServer::query(const std::vector<std::string>& args) const {
  return tls() ? query_cli(args) : query_hiredis(args);
}

RedisServer::Reply RedisServer::query_hiredis(const std::vector<std::string>& args) const {
  const timeval timeout{1, 0};
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port_, timeout);
  if (context == nullptr) return {};
  Reply result;
  if (context->err == 0) {
    redisSetTimeout(context, timeout);
    if (!options_.password.empty()) {
      auto* auth = static_cast<redisReply*>(redisCommand(context, "AUTH %s", options_.password.c_str()));
      if (auth != nullptr) freeReplyObject(auth);
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& arg : args) {
      argv.push_back(arg.data());
      lens.push_back(arg.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context, static_cast<int>(args.size()), argv.data(), lens.data()));
    if (reply != nullptr) {
      if (reply->type != REDIS_REPLY_ERROR) {
        result.ok = true;
        result.array = reply->type == REDIS_REPLY_ARRAY;
        if (result.array || reply->type != REDIS_REPLY_NIL) flatten(reply, result.elements);
      }
      freeReplyObject(reply);
    }
  }
  redisFree(context);
  return result;
}

RedisServer::Reply RedisServer::query_cli(const std::vector<std::string>& args) const {
  auto argv = cli_args();
  argv.push_back("--no-raw");  // typed output: see parse_cli_line
  argv.insert(argv.end(), args.begin(), args.end());
  const auto run = run_process(argv, std::chrono::milliseconds(5000));
  Reply result;
  if (run.exit_code != 0 || run.out.empty()) return result;
  if (cli_prints_raw(args)) {
    // One text reply printed as is (no quotes, no escapes): the whole output is the value.
    if (run.out.starts_with("(error)") || run.out.starts_with("ERR") || run.out.starts_with("NOAUTH"))
      return {};
    std::string text = run.out;
    if (text.ends_with('\n')) text.pop_back();
    return {.ok = true, .array = false, .elements = {std::move(text)}};
  }
  // redis-cli prints a connection failure on stderr and "(error) ..." for an error reply.
  size_t start = 0;
  while (start < run.out.size()) {
    size_t end = run.out.find('\n', start);
    if (end == std::string::npos) end = run.out.size();
    std::string value;
    bool in_array = false;
    const Leaf leaf = parse_cli_line(std::string_view(run.out).substr(start, end - start), value, in_array);
    if (leaf == Leaf::kError) return {};
    result.array = result.array || in_array;
    if (leaf == Leaf::kValue || (leaf == Leaf::kNil && in_array)) result.elements.push_back(value);
    start = end + 1;
  }
  result.ok = true;
  return result;
}

std::string RedisServer::command(const std::vector<std::string>& args) const {
  const Reply reply = query(args);
  if (!reply.ok || reply.array || reply.elements.empty()) return {};
  return reply.elements.front();
}

std::vector<std::string> RedisServer::command_array(const std::vector<std::string>& args) const {
  Reply reply = query(args);
  return reply.ok ? std::move(reply.elements) : std::vector<std::string>{};
}

}  // namespace rtce::test
