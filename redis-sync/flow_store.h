// flow_store.h — flows (client addr:port + VIP addr:port -> transceiver endpoint id) kept
// outside the relay, so that a restarted or re-hashed relay recovers them on the first
// non-STUN packet. Implementations: RedisFlowStore and MemoryFlowStore.
//
// Threading and callbacks: as for Registry (owner's io_context thread, never blocking,
// callbacks later on that thread, none after destruction). Redis is never on the path of
// an established flow: the relay calls put() once per new flow, refresh() at a bounded
// rate, get() on a miss.
#pragma once

#include <functional>
#include <optional>
#include <span>

#include "sync_types.h"

namespace rtce {

class FlowStore {
 public:
  using GetCallback = std::function<void(std::optional<FlowRecord> record)>;
  using BatchCallback = std::function<void(std::span<const FlowEntry> batch)>;

  virtual ~FlowStore() = default;

  virtual void put(const rtce_flow_key& key, FlowRecord record, Millis ttl, DoneCallback done = {}) = 0;
  // Many puts written together (one pipelined write for Redis); no per-flow callback.
  virtual void put_many(std::span<const FlowEntry> flows, Millis ttl) = 0;
  // done(false) when the flow is gone (expired or deleted) or the store is unreachable.
  virtual void refresh(const rtce_flow_key& key, Millis ttl, DoneCallback done = {}) = 0;
  // nullopt when there is no such flow, its record is of an unknown version, or the store
  // is unreachable (all counted).
  virtual void get(const rtce_flow_key& key, GetCallback done) = 0;
  virtual void del(const rtce_flow_key& key, DoneCallback done = {}) = 0;
  // Reads back every flow of the cluster in batches (for a restarted relay), then done(ok).
  virtual void restore(BatchCallback on_batch, DoneCallback done) = 0;

  virtual bool connected() const = 0;
  virtual const SyncCounters& counters() const = 0;
};

}  // namespace rtce
