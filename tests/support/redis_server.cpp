// redis_server.cpp — spawning and driving a private redis-server.
#include "redis_server.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <utility>

namespace rtce::test {

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

RedisServer::RedisServer(uint16_t port, std::string password)
    : port_(port != 0 ? port : free_port()), password_(std::move(password)) {}

RedisServer::~RedisServer() {
  resume();
  kill();
}

bool RedisServer::start(std::chrono::milliseconds deadline) {
  if (pid_ > 0) return true;
  const std::string port = std::to_string(port_);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
    if (getppid() != parent) _exit(1);
    const int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    std::vector<const char*> argv{"redis-server", "--port", port.c_str(),   "--bind",     "127.0.0.1",
                                  "--save",       "",       "--appendonly", "no",         "--daemonize",
                                  "no",           "--dir",  "/tmp",         "--loglevel", "warning"};
    if (!password_.empty()) {
      argv.push_back("--requirepass");
      argv.push_back(password_.c_str());
    }
    argv.push_back(nullptr);
    execv(kRedisServerPath, const_cast<char* const*>(argv.data()));
    _exit(127);
  }
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

std::string RedisServer::command(const std::vector<std::string>& args) const {
  const timeval timeout{1, 0};
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port_, timeout);
  if (context == nullptr) return {};
  std::string result;
  if (context->err == 0) {
    redisSetTimeout(context, timeout);
    if (!password_.empty()) {
      auto* auth = static_cast<redisReply*>(redisCommand(context, "AUTH %s", password_.c_str()));
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
      if (reply->type == REDIS_REPLY_INTEGER) {
        result = std::to_string(reply->integer);
      } else if (reply->str != nullptr && reply->type != REDIS_REPLY_ERROR) {
        result.assign(reply->str, reply->len);
      }
      freeReplyObject(reply);
    }
  }
  redisFree(context);
  return result;
}

}  // namespace rtce::test
