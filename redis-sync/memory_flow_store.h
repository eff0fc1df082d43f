// memory_flow_store.h — the in-memory FlowStore (the embedded default). Flows live in a
// MemoryFlowBackend shared by its clients, bounded in size, with TTLs on an injectable
// clock; expired flows are invisible at once and reclaimed lazily.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "clock.h"
#include "flow_store.h"

namespace rtce {

class MemoryFlowBackend {
 public:
  using Clock = std::function<Nanos()>;
  explicit MemoryFlowBackend(Clock clock = monotonic_now, size_t max_flows = 1'000'000)
      : clock_(std::move(clock)), max_flows_(max_flows) {}

  size_t size();  // live and not yet reclaimed
  void sweep();   // reclaims expired flows now

 private:
  friend class MemoryFlowStore;
  struct Entry {
    rtce_flow_key key;
    FlowRecord record;
    Nanos expires_at;
  };
  static std::string text_key(const rtce_flow_key& key);
  void sweep_locked(Nanos now);

  std::mutex mutex_;
  Clock clock_;
  size_t max_flows_;
  std::unordered_map<std::string, Entry> flows_;
};

class MemoryFlowStore final : public FlowStore {
 public:
  MemoryFlowStore(boost::asio::io_context& io, std::shared_ptr<MemoryFlowBackend> backend);
  ~MemoryFlowStore() override;

  void put(const rtce_flow_key& key, FlowRecord record, Millis ttl, DoneCallback done = {}) override;
  void put_many(std::span<const FlowEntry> flows, Millis ttl) override;
  void refresh(const rtce_flow_key& key, Millis ttl, DoneCallback done = {}) override;
  void get(const rtce_flow_key& key, GetCallback done) override;
  void del(const rtce_flow_key& key, DoneCallback done = {}) override;
  void restore(BatchCallback on_batch, DoneCallback done) override;

  bool connected() const override { return true; }
  const SyncCounters& counters() const override { return counters_; }

 private:
  bool put_locked(const rtce_flow_key& key, FlowRecord record, Nanos expires_at);
  template <typename Fn>
  void complete_later(Fn&& fn);

  boost::asio::io_context& io_;
  std::shared_ptr<MemoryFlowBackend> backend_;
  SyncCounters counters_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace rtce
