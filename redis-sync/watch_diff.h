// watch_diff.h — turns successive snapshots of the endpoint set into added / updated /
// removed events, so both registry implementations watch the same way: a snapshot is the
// source of truth, notifications only make the next one come sooner.
//
// Outage grace: records expire in the store by TTL, and a transceiver can only refresh its
// record while the store answers. After the store was unreachable (or frozen: SIGSTOP, a
// long fork, a failover) for longer than the TTL, its first snapshots show every record
// expired at once — an outage, not a mass departure. So after the watcher reports the store
// unavailable, removals are held until one TTL after the store answered again: live
// transceivers re-register within that time, and an endpoint that really stopped still
// leaves, one TTL (plus a re-list) after the store came back.
#pragma once

#include <map>
#include <vector>

#include "clock.h"
#include "sync_types.h"

namespace rtce {

class EndpointSetDiff {
 public:
  // removal_grace: how long after an outage a missing record is still kept (the TTL).
  explicit EndpointSetDiff(Nanos removal_grace = 0) : removal_grace_(removal_grace) {}

  // The store could not be read, or answered so late that records may have expired only
  // because their owners could not heartbeat. The grace starts at the next snapshot.
  void store_unavailable() { store_was_unavailable_ = true; }

  template <typename Emit>
  void apply(const std::vector<EndpointRecord>& snapshot, Nanos now, Emit&& emit) {
    if (store_was_unavailable_) {
      store_was_unavailable_ = false;
      hold_removals_until_ = now + removal_grace_;
    }
    const bool holding = now < hold_removals_until_;
    std::map<EndpointId, EndpointRecord> next;
    for (const auto& record : snapshot) next.emplace(record.id, record);
    std::vector<RegistryEvent> events;
    held_ = 0;
    for (const auto& [id, record] : known_) {
      if (next.contains(id)) continue;
      if (holding) {
        next.emplace(id, record);  // kept as last seen until the grace ends
        ++held_;
      } else {
        events.push_back({RegistryChange::kRemoved, record});
      }
    }
    for (const auto& [id, record] : next) {
      const auto old = known_.find(id);
      if (old == known_.end()) {
        events.push_back({RegistryChange::kAdded, record});
      } else if (!(old->second == record)) {
        events.push_back({RegistryChange::kUpdated, record});
      }
    }
    known_ = std::move(next);
    for (const auto& event : events) emit(event);
  }
  void clear() {
    known_.clear();
    held_ = 0;
  }
  // Records missing from the last snapshot but kept because of the outage grace.
  size_t held_removals() const { return held_; }
  Nanos holding_removals_until() const { return hold_removals_until_; }

 private:
  Nanos removal_grace_;
  bool store_was_unavailable_ = false;
  Nanos hold_removals_until_ = 0;
  size_t held_ = 0;
  std::map<EndpointId, EndpointRecord> known_;
};

}  // namespace rtce
