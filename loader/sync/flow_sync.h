// flow_sync.h — the relay's link to the shared flow store (redis-sync): new flows are
// written, active flows refreshed, and a worker's flow miss is looked up, on one thread
// of its own, so that Redis is never on a worker's packet path.
//
// Workers (and the XDP event thread) talk to it through a FlowSyncChannel each: two
// single-producer single-consumer rings, requests in and lookup replies out. Pushing never
// blocks or allocates; a full ring is a counted drop (a put lost that way is written again
// at the next refresh; a lookup lost that way times out in the worker). One eventfd wakes
// the sync thread, at most once per producer batch.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/lockfree/spsc_queue.hpp>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "clock.h"
#include "redis_flow_store.h"
#include "relaxed_counter.h"
#include "relay_core.h"
#include "rtce_flow.h"

namespace rtce {

struct FlowSyncRequest {
  enum class Op : uint8_t { put, lookup };
  Op op = Op::put;
  FlowRole role = FlowRole::local;  // put only
  uint16_t endpoint_id = 0;         // put only: the endpoint, or an ingress flow's cluster
  rtce_flow_key key{};
  sockaddr_in6 via{};  // put of an owner flow: the ingress relay it comes from (v4-mapped)
};

struct FlowLookupReply {
  rtce_flow_key key{};
  uint16_t endpoint_id = 0;         // 0: the store has no such flow, or could not answer
  FlowRole role = FlowRole::local;  // ingress: endpoint_id is the owning cluster
  sockaddr_in6 via{};               // owner: the ingress relay the flow comes from (v4-mapped)
  bool store_reachable = true;
};

class FlowSyncChannel final : public FlowStoreOutbox {
 public:
  static constexpr size_t kRequestCapacity = 8192;
  static constexpr size_t kReplyCapacity = 4096;

  // Producer side (one thread). False when the ring is full (counted).
  bool push(const FlowSyncRequest& request);
  bool put(const rtce_flow_key& key, uint16_t endpoint_id) override {
    return push(FlowSyncRequest{FlowSyncRequest::Op::put, FlowRole::local, endpoint_id, key});
  }
  bool put_ingress(const rtce_flow_key& key, uint8_t cluster) override {
    return push(FlowSyncRequest{FlowSyncRequest::Op::put, FlowRole::ingress, cluster, key});
  }
  bool put_owner(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& via) override {
    return push(FlowSyncRequest{FlowSyncRequest::Op::put, FlowRole::owner, endpoint_id, key, via});
  }
  bool lookup(const rtce_flow_key& key) override {
    return push(FlowSyncRequest{FlowSyncRequest::Op::lookup, FlowRole::local, 0, key});
  }
  // Consumer side of replies (the producer's thread).
  template <typename Fn>
  size_t drain_replies(Fn&& fn) {
    return replies_.consume_all(fn);
  }
  // Called on the sync thread after replies were pushed; set before the sync starts.
  void set_reply_waker(std::function<void()> wake) { wake_replies_ = std::move(wake); }

  RelaxedCounter requests_dropped;
  RelaxedCounter replies_dropped;

 private:
  friend class FlowSync;
  boost::lockfree::spsc_queue<FlowSyncRequest, boost::lockfree::capacity<kRequestCapacity>> requests_;
  boost::lockfree::spsc_queue<FlowLookupReply, boost::lockfree::capacity<kReplyCapacity>> replies_;
  std::function<void()> wake_replies_;
};

struct FlowSyncCounters {
  RelaxedCounter puts;             // flows handed to the store (new and refreshed)
  RelaxedCounter lookups;          // lookups sent
  RelaxedCounter lookups_found;    // ... that named an endpoint or a peer cluster
  RelaxedCounter lookups_missing;  // ... the store answered: no such flow
  RelaxedCounter lookups_failed;   // ... the store could not answer (down, timeout)
};

class FlowSync {
 public:
  struct Options {
    RedisOptions redis;
    uint8_t cluster = 0;
    Millis ttl{120'000};
  };
  // One channel per producer thread. Starts the sync thread; it connects in the
  // background (Redis down is not an error: requests fail and are counted).
  FlowSync(Options options, size_t channels);
  ~FlowSync();
  FlowSync(const FlowSync&) = delete;
  FlowSync& operator=(const FlowSync&) = delete;

  FlowSyncChannel& channel(size_t i) { return *channels_[i]; }
  // Wakes the sync thread; producers call it once after a batch of pushes.
  void notify();

  bool connected() const { return connected_.load(std::memory_order_relaxed); }
  const SyncCounters& store_counters() const { return store_->counters(); }
  const FlowSyncCounters& counters() const { return counters_; }
  Millis ttl() const { return options_.ttl; }

 private:
  void arm_wakeup();
  void schedule_tick();
  void drain();
  bool store_down_for_long() const;

  // Down longer than this (a connect timeout and a backoff step): lookups fail at once.
  static constexpr Nanos kStoreDownAfter = 2'000'000'000;

  Options options_;
  boost::asio::io_context io_;
  std::unique_ptr<RedisFlowStore> store_;
  std::vector<std::unique_ptr<FlowSyncChannel>> channels_;
  FlowSyncCounters counters_;
  struct Wakeup;
  std::unique_ptr<Wakeup> wakeup_;
  std::atomic<bool> signaled_{false};
  std::atomic<bool> connected_{false};
  std::vector<FlowEntry> put_batch_;          // sync thread only
  Nanos store_seen_up_at_ = monotonic_now();  // sync thread only; the start counts as up
  std::thread thread_;
};

// Between the core's (role, id, via) and the store's record: local flows name an endpoint,
// ingress flows their owning cluster, owner flows an endpoint and the ingress relay (`via`).
FlowRecord to_flow_record(FlowRole role, uint16_t id, const sockaddr_in6& via = {});
FlowLookupReply to_lookup_reply(const rtce_flow_key& key, const std::optional<FlowRecord>& record);

}  // namespace rtce
