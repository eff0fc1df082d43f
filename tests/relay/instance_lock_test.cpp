// instance_lock_test.cpp — one relay per VIP (issue 15 item 14): the abstract-socket lock,
// what a second instance learns (the holder's pid), the join announcement, and the locks
// a relay configuration takes (VIPs; XDP interfaces and pin path outside userspace mode).
#include "instance_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "relay_service.h"

namespace rtce {
namespace {

using namespace std::chrono_literals;

// Unique per test process, so parallel test runs never share a name.
std::string unique_name(const std::string& what) { return "test/" + std::to_string(::getpid()) + "/" + what; }

template <typename Predicate>
bool wait_until(Predicate&& done, std::chrono::milliseconds timeout = 2000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

TEST(InstanceLock, OneHolderPerNameReleasedWithTheObject) {
  const std::string name = unique_name("one-holder");
  auto first = InstanceLock::try_acquire(name);
  ASSERT_TRUE(first);
  EXPECT_EQ(InstanceLock::try_acquire(name), nullptr);
  EXPECT_TRUE(InstanceLock::try_acquire(unique_name("another-name")));
  first.reset();
  EXPECT_TRUE(InstanceLock::try_acquire(name)) << "the name is free once the holder is gone";
  EXPECT_EQ(InstanceLock::holder(name, false), std::nullopt);
}

TEST(InstanceLock, AskingNamesTheHolderAndOnlyAJoinerIsReported) {
  std::atomic<int> joins{0};
  std::atomic<pid_t> joiner{0};
  auto lock = InstanceLock::try_acquire(unique_name("join"), [&](pid_t pid) {
    joiner = pid;
    ++joins;
  });
  ASSERT_TRUE(lock);
  EXPECT_EQ(InstanceLock::holder(lock->name(), false), ::getpid());
  EXPECT_EQ(InstanceLock::holder(lock->name(), true), ::getpid());
  ASSERT_TRUE(wait_until([&] { return joins.load() > 0; }));
  EXPECT_EQ(joiner.load(), ::getpid());
  std::this_thread::sleep_for(300ms);  // past the holder's read wait: the plain question stays unreported
  EXPECT_EQ(joins.load(), 1);
}

TEST(InstanceLock, LongNamesStayDistinct) {
  const std::string base = unique_name(std::string(200, 'p'));
  auto a = InstanceLock::try_acquire(base + "a");
  auto b = InstanceLock::try_acquire(base + "b");
  EXPECT_TRUE(a);
  EXPECT_TRUE(b) << "names longer than sun_path must not collapse into one";
}

RelayConfig config_on(uint16_t port) {
  RelayConfig config;
  config.listen = {*SocketAddress::parse("127.0.0.1:" + std::to_string(port)),
                   *SocketAddress::parse("[::1]:" + std::to_string(port))};
  return config;
}

TEST(TakeInstanceLocks, RefusesAServedVipUnlessJoining) {
  // A port number no other test uses with this pid-free name: the lock names the VIP only,
  // so pick one from our pid to stay clear of parallel runs.
  const uint16_t port = static_cast<uint16_t>(20000 + ::getpid() % 20000);
  auto first = take_instance_locks(config_on(port));
  EXPECT_EQ(first.size(), 2u);
  try {
    take_instance_locks(config_on(port));
    FAIL() << "a second relay on the same VIPs must be refused";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("VIP 127.0.0.1:" + std::to_string(port) +
                           " is already served by another "
                           "rtcedge-relay (pid " +
                           std::to_string(::getpid()) + ")"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("--join-existing"), std::string::npos) << message;
  }
  RelayConfig joining = config_on(port);
  joining.join_existing = true;
  EXPECT_TRUE(take_instance_locks(joining).empty()) << "a joiner holds none of the served names";
  first.clear();
  EXPECT_EQ(take_instance_locks(config_on(port)).size(), 2u);
}

TEST(TakeInstanceLocks, XdpModeAlsoLocksInterfacesAndThePinPath) {
  const uint16_t port = static_cast<uint16_t>(40000 + ::getpid() % 20000);
  RelayConfig xdp = config_on(port);
  xdp.mode = "xdp";
  xdp.xdp_interfaces = {"rtce-test" + std::to_string(::getpid() % 100000)};
  xdp.xdp_pin_path = "/sys/fs/bpf/rtcedge-test-" + std::to_string(::getpid());
  auto first = take_instance_locks(xdp);
  EXPECT_EQ(first.size(), 4u);  // two VIPs, one interface, the pin path
  // Another VIP, same interface: still a second XDP instance on it.
  RelayConfig other = config_on(static_cast<uint16_t>(port + 1));
  other.mode = "auto";
  other.xdp_interfaces = xdp.xdp_interfaces;
  other.xdp_pin_path = "/sys/fs/bpf/rtcedge-test-other-" + std::to_string(::getpid());
  try {
    take_instance_locks(other);
    FAIL() << "a second XDP instance on the same interface must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("XDP interface " + xdp.xdp_interfaces[0]), std::string::npos)
        << e.what();
  }
  // Userspace mode on other VIPs takes no XDP lock.
  RelayConfig userspace = other;
  userspace.mode = "userspace";
  EXPECT_EQ(take_instance_locks(userspace).size(), 2u);
}

}  // namespace
}  // namespace rtce
