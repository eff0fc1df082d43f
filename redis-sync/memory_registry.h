// memory_registry.h — the in-memory Registry (the embedded default when no Redis URL is
// configured). The data lives in a MemoryRegistryBackend that several clients (workers,
// or a "restarted" client in tests) share; its clock is injectable so tests drive TTLs.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clock.h"
#include "redis_registry.h"  // RegistryOptions
#include "registry.h"
#include "watch_diff.h"

namespace rtce {

class MemoryRegistryBackend {
 public:
  using Clock = std::function<Nanos()>;
  explicit MemoryRegistryBackend(Clock clock = monotonic_now) : clock_(std::move(clock)) {}

 private:
  friend class MemoryRegistry;
  struct Entry {
    EndpointRecord record;
    Nanos expires_at;
  };
  std::vector<EndpointRecord> live_locked();  // sweeps expired entries
  void notify();

  std::mutex mutex_;
  Clock clock_;
  std::map<EndpointId, Entry> endpoints_;
  std::map<std::string, std::pair<EndpointId, uint16_t>, std::less<>> pod_ranges_;
  uint32_t next_id_ = 1;
  std::vector<std::pair<std::weak_ptr<int>, std::function<void()>>> watchers_;
};

class MemoryRegistry final : public Registry {
 public:
  MemoryRegistry(boost::asio::io_context& io, std::shared_ptr<MemoryRegistryBackend> backend,
                 RegistryOptions options);
  ~MemoryRegistry() override;

  void register_endpoint(const EndpointRecord& record, DoneCallback done = {}) override;
  void heartbeat(EndpointId id, uint32_t load, bool draining, DoneCallback done = {}) override;
  void deregister(EndpointId id, DoneCallback done = {}) override;
  void list(ListCallback done) override;
  void watch(WatchCallback on_change) override;
  void allocate_endpoint_ids(std::string_view pod_identity, uint16_t count, AllocateCallback done) override;

  bool connected() const override { return true; }
  const SyncCounters& counters() const override { return counters_; }
  // Re-lists now instead of at the next interval (tests that drive the clock).
  void resync();

 private:
  template <typename Fn>
  void complete_later(Fn&& fn);
  void arm_relist_timer();

  boost::asio::io_context& io_;
  std::shared_ptr<MemoryRegistryBackend> backend_;
  RegistryOptions options_;
  SyncCounters counters_;
  WatchCallback on_change_;
  EndpointSetDiff diff_;
  bool watching_ = false;
  boost::asio::steady_timer relist_timer_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace rtce
