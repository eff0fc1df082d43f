// instance_lock.cpp — see instance_lock.h.
#include "instance_lock.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <system_error>

namespace rtce {
namespace {

constexpr const char* kPrefix = "rtcedge-relay/";
constexpr char kJoinMessage[] = "join\n";
// How long the holder waits for a connected peer to say whether it joins (it writes at once).
constexpr int kJoinMessageWaitMs = 200;

// Abstract address: sun_path[0] = '\0', then the name (no terminator; the length counts).
socklen_t abstract_address(const std::string& name, sockaddr_un& out) {
  out = {};
  out.sun_family = AF_UNIX;
  std::string text = kPrefix + name;
  const size_t room = sizeof out.sun_path - 1;
  if (text.size() > room) {
    // Long pin paths: keep a readable head and make the tail unique.
    char digest[24];
    std::snprintf(digest, sizeof digest, "#%016zx", std::hash<std::string>{}(text));
    text = text.substr(0, room - std::strlen(digest)) + digest;
  }
  std::memcpy(out.sun_path + 1, text.data(), text.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + text.size());
}

}  // namespace

std::unique_ptr<InstanceLock> InstanceLock::try_acquire(const std::string& name, OnJoin on_join) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "instance lock socket");
  sockaddr_un address;
  const socklen_t length = abstract_address(name, address);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EADDRINUSE) return nullptr;
    throw std::system_error(error, std::generic_category(), "instance lock bind " + name);
  }
  if (::listen(fd, 8) != 0) {
    const int error = errno;
    ::close(fd);
    throw std::system_error(error, std::generic_category(), "instance lock listen " + name);
  }
  const int stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop < 0) {
    const int error = errno;
    ::close(fd);
    throw std::system_error(error, std::generic_category(), "instance lock eventfd");
  }
  return std::unique_ptr<InstanceLock>(new InstanceLock(name, fd, stop, std::move(on_join)));
}

std::optional<pid_t> InstanceLock::holder(const std::string& name, bool announce_join) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_un address;
  const socklen_t length = abstract_address(name, address);
  std::optional<pid_t> holder;
  // A listening unix socket completes connect() from its backlog: this never waits on
  // the holder's thread.
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0) {
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0) holder = peer.pid;
    if (announce_join) {
      [[maybe_unused]] const ssize_t n = ::send(fd, kJoinMessage, sizeof kJoinMessage - 1, MSG_NOSIGNAL);
    }
  }
  ::close(fd);
  return holder;
}

InstanceLock::InstanceLock(std::string name, int listen_fd, int stop_fd, OnJoin on_join)
    : name_(std::move(name)), listen_fd_(listen_fd), stop_fd_(stop_fd), on_join_(std::move(on_join)) {
  thread_ = std::thread([this] { serve(); });
}

InstanceLock::~InstanceLock() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(stop_fd_);
}

void InstanceLock::serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int joiner = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (joiner < 0) continue;
    ucred peer{};
    socklen_t size = sizeof peer;
    const bool known = ::getsockopt(joiner, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0;
    // A joiner writes "join"; a refused instance only asked who holds the lock and closes.
    pollfd reply = {joiner, POLLIN, 0};
    char text[sizeof kJoinMessage] = {};
    ssize_t n = 0;
    if (::poll(&reply, 1, kJoinMessageWaitMs) > 0) n = ::recv(joiner, text, sizeof text - 1, MSG_DONTWAIT);
    ::close(joiner);
    const bool joins = n == static_cast<ssize_t>(sizeof kJoinMessage - 1) &&
                       std::memcmp(text, kJoinMessage, sizeof kJoinMessage - 1) == 0;
    if (known && joins && on_join_) on_join_(peer.pid);
  }
}

std::string vip_lock_name(const std::string& vip) { return "vip/udp/" + vip; }
std::string xdp_interface_lock_name(const std::string& interface) { return "xdp/interface/" + interface; }
std::string xdp_pin_path_lock_name(const std::string& pin_path) { return "xdp/pins" + pin_path; }

}  // namespace rtce
