// registry.h — the transceiver endpoint registry: transceivers register their worker
// endpoints and heartbeat them under a TTL; relays list and watch them. Implementations:
// RedisRegistry (a fleet) and MemoryRegistry (one node, the embedded default).
//
// Threading: every method is called on the owner's io_context thread (asio::post from
// elsewhere); no method blocks; every callback runs later on that same thread, never from
// inside the call that registered it. Callbacks are not run once the object is destroyed.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "sync_types.h"

namespace rtce {

class Registry {
 public:
  using ListCallback = std::function<void(std::optional<std::vector<EndpointRecord>> endpoints)>;
  using WatchCallback = std::function<void(const RegistryEvent& event)>;
  using AllocateCallback = std::function<void(std::optional<EndpointId> base)>;

  virtual ~Registry() = default;

  // Creates or replaces the record; it lives for the registry's endpoint TTL unless
  // heartbeated. done(false) when the store could not be reached.
  virtual void register_endpoint(const EndpointRecord& record, DoneCallback done = {}) = 0;
  // Extends the TTL and updates load/draining. done(false) also when the record is gone
  // (expired): the owner registers again.
  virtual void heartbeat(EndpointId id, uint32_t load, bool draining, DoneCallback done = {}) = 0;
  virtual void deregister(EndpointId id, DoneCallback done = {}) = 0;
  // The live endpoints, sorted by id; nullopt when the store could not be reached.
  virtual void list(ListCallback done) = 0;
  // One watcher per object (a second call replaces the first). It first receives kAdded
  // for every live endpoint, then every change: immediately for explicit changes, within
  // the re-list interval for TTL expiry and for notifications that were lost. While the
  // store is unreachable the last known set is kept (no mass kRemoved on an outage), and
  // after it answers again a record missing from it is removed only once its owner has had
  // one endpoint TTL to register again (records all expire while a store is frozen).
  virtual void watch(WatchCallback on_change) = 0;
  // `count` contiguous ids for a pod; the same pod identity gets the same base back (as
  // long as it asks for no more ids than the first time), other pods never overlap.
  virtual void allocate_endpoint_ids(std::string_view pod_identity, uint16_t count,
                                     AllocateCallback done) = 0;

  virtual bool connected() const = 0;
  virtual const SyncCounters& counters() const = 0;
};

}  // namespace rtce
