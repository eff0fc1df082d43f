// sync_test_support.h — driving an io_context until a condition holds (with a deadline),
// awaiting one asynchronous result, and the backends the contract tests run against:
// the same cases for Redis (a private server shared by the binary) and for memory.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "memory_flow_store.h"
#include "memory_registry.h"
#include "redis_connection.h"
#include "redis_flow_store.h"
#include "redis_registry.h"
#include "redis_server.h"

namespace rtce::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

template <typename Predicate>
bool run_until(boost::asio::io_context& io, Predicate&& done, std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    io.restart();
    if (io.run_for(5ms) == 0) std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Runs the loop for a while: pacing (heartbeats), not waiting for a result.
inline void run_for(boost::asio::io_context& io, std::chrono::milliseconds duration) {
  run_until(
      io, [] { return false; }, duration);
}

// Starts an operation whose callback takes one T and waits for it. nullopt: no callback
// within the timeout. The slot is shared so a late callback writes nowhere harmful.
template <typename T, typename Start>
std::optional<T> await(boost::asio::io_context& io, Start&& start,
                       std::chrono::milliseconds timeout = 3000ms) {
  auto slot = std::make_shared<std::optional<T>>();
  start([slot](T value) { *slot = std::move(value); });
  run_until(
      io, [&] { return slot->has_value(); }, timeout);
  return *slot;
}

inline SocketAddress addr(const char* text) { return *SocketAddress::parse(text); }

// One redis-server for the whole binary; every test uses its own cluster id (its own
// keys), so tests do not see each other's data.
inline RedisServer* shared_redis() {
  static std::unique_ptr<RedisServer> server = [] {
    auto started = std::make_unique<RedisServer>();
    if (!RedisServer::available() || !started->start()) return std::unique_ptr<RedisServer>();
    return started;
  }();
  return server.get();
}

inline uint8_t next_cluster() {
  static std::atomic<int> next{1};
  return static_cast<uint8_t>(next++ % 250 + 1);
}

inline RedisOptions redis_options(uint16_t port) {
  RedisOptions options;
  options.port = port;
  options.command_timeout = 1000ms;
  options.connect_timeout = 500ms;
  return options;
}

struct RedisBackend {
  static constexpr const char* kName = "Redis";
  static std::string unavailable() {
    if (!RedisServer::available())
      return std::string(kRedisServerPath) + " is missing (scripts/install-deps.sh installs redis-server)";
    if (shared_redis() == nullptr) return "redis-server did not start";
    return {};
  }
  uint8_t cluster = next_cluster();
  std::unique_ptr<Registry> registry(boost::asio::io_context& io, RegistryOptions options) {
    options.cluster = cluster;
    return std::make_unique<RedisRegistry>(io, redis_options(shared_redis()->port()), options);
  }
  std::unique_ptr<FlowStore> flow_store(boost::asio::io_context& io) {
    return std::make_unique<RedisFlowStore>(io, redis_options(shared_redis()->port()),
                                            FlowStoreOptions{cluster});
  }
};

struct MemoryBackend {
  static constexpr const char* kName = "Memory";
  static std::string unavailable() { return {}; }
  std::shared_ptr<MemoryRegistryBackend> registry_data = std::make_shared<MemoryRegistryBackend>();
  std::shared_ptr<MemoryFlowBackend> flow_data = std::make_shared<MemoryFlowBackend>();
  std::unique_ptr<Registry> registry(boost::asio::io_context& io, RegistryOptions options) {
    return std::make_unique<MemoryRegistry>(io, registry_data, options);
  }
  std::unique_ptr<FlowStore> flow_store(boost::asio::io_context& io) {
    return std::make_unique<MemoryFlowStore>(io, flow_data);
  }
};

struct BackendNames {
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};

using Backends = ::testing::Types<MemoryBackend, RedisBackend>;

}  // namespace rtce::test
