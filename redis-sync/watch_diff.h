// watch_diff.h — turns successive snapshots of the endpoint set into added / updated /
// removed events, so both registry implementations watch the same way: a snapshot is the
// source of truth, notifications only make the next one come sooner.
#pragma once

#include <map>
#include <vector>

#include "sync_types.h"

namespace rtce {

class EndpointSetDiff {
 public:
  template <typename Emit>
  void apply(const std::vector<EndpointRecord>& snapshot, Emit&& emit) {
    std::map<EndpointId, EndpointRecord> next;
    for (const auto& record : snapshot) next.emplace(record.id, record);
    std::vector<RegistryEvent> events;
    for (const auto& [id, record] : known_) {
      if (!next.contains(id)) events.push_back({RegistryChange::kRemoved, record});
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
  void clear() { known_.clear(); }

 private:
  std::map<EndpointId, EndpointRecord> known_;
};

}  // namespace rtce
