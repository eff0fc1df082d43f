// instance_lock.h — "one relay per VIP" (and per XDP interface and pin path) on a host.
//
// SO_REUSEPORT lets a second relay bind a VIP that is already served: it joins the socket
// group silently and the kernel hands it a share of the live flows, which it does not know
// (without a shared flow store they are lost). So each relay holds one lock per VIP, per
// XDP interface and per pin path: an abstract unix socket name, which
//   - lives in the network namespace, the scope of both an SO_REUSEPORT group and an
//     interface name (relays in different namespaces on the same address do not clash);
//   - is released by the kernel when the process exits, even on SIGKILL (no stale files);
//   - lets a joiner tell the holder it joined, and learn the holder's pid (SO_PEERCRED).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace rtce {

class InstanceLock {
 public:
  // Called on the lock's own thread with the pid of a process that announced it joined.
  using OnJoin = std::function<void(pid_t joiner)>;

  // The lock, or nullptr when another process holds `name`. Throws std::system_error when
  // the socket cannot be created at all.
  static std::unique_ptr<InstanceLock> try_acquire(const std::string& name, OnJoin on_join = {});
  // The pid of the process holding `name`, or nullopt when nobody holds it any more (or
  // it cannot be asked). With announce_join the holder is told that this process joins
  // anyway (its OnJoin runs); without, it only learns that someone asked.
  static std::optional<pid_t> holder(const std::string& name, bool announce_join);

  ~InstanceLock();
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;

  const std::string& name() const { return name_; }

 private:
  InstanceLock(std::string name, int listen_fd, int stop_fd, OnJoin on_join);
  void serve();

  std::string name_;
  int listen_fd_;
  int stop_fd_;  // eventfd: wakes serve() to return
  OnJoin on_join_;
  std::thread thread_;
};

// The names, one definition each: what the lock stands for, readable in `ss -xl`.
std::string vip_lock_name(const std::string& vip);
std::string xdp_interface_lock_name(const std::string& interface);
std::string xdp_pin_path_lock_name(const std::string& pin_path);

}  // namespace rtce
