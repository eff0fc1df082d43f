// flow_table.h — one relay worker's flow table: client flow -> owning transceiver endpoint.
//
// Preallocated and bounded: no allocation after construction. Open addressing (linear
// probing, backward-shift deletion) over an index twice the capacity, keyed by a SipHash
// of the flow key with a per-process random key, so clients cannot aim for collisions.
//
// Expiry is a sweep over a bounded number of slots per call (housekeeping, not the packet
// path). When the table is full, a new flow may replace the least recently active of a
// small sample of flows, but only if that flow has been idle for at least
// `evict_idle_after` — a call sends media every 20 ms and is never evicted; otherwise the
// new flow is refused (approximated LRU, as Redis samples for eviction).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <vector>

#include "clock.h"
#include "rtce_flow.h"
#include "rtce_siphash.h"

namespace rtce {

struct FlowValue {
  sockaddr_in6 endpoint{};  // v4-mapped for IPv4 endpoints (dual-stack return socket)
  uint16_t endpoint_id = 0;
  uint16_t vip_socket = 0;  // index of the worker's VIP socket the flow arrived on
};

struct Flow {
  rtce_flow_key key{};
  FlowValue value;
  Nanos created = 0;
  Nanos last_seen = 0;
  Nanos stored = 0;  // last write to the shared flow store (0 = never)
  bool in_use = false;
};

bool operator==(const rtce_flow_key& a, const rtce_flow_key& b);

class FlowTable {
 public:
  struct Options {
    uint32_t capacity = 65536;
    Nanos idle_timeout = 30'000'000'000;
    Nanos evict_idle_after = 5'000'000'000;
    uint32_t eviction_sample = 16;
  };
  enum class InsertOutcome { inserted, updated, evicted_idle, full };
  struct InsertResult {
    Flow* flow;
    InsertOutcome outcome;
  };

  explicit FlowTable(const Options& options);

  Flow* find(const rtce_flow_key& key);
  InsertResult insert(const rtce_flow_key& key, const FlowValue& value, Nanos now);
  void erase(Flow* flow);
  // Visits up to max_slots slots from the sweep cursor; expires idle flows. Returns the
  // number expired.
  uint32_t expire(Nanos now, uint32_t max_slots);
  template <typename Fn>
  void for_each(Fn&& fn) {
    for (auto& f : slots_)
      if (f.in_use) fn(f);
  }

  // Visits up to max_slots slots from `cursor` (which it advances, wrapping), calling
  // fn(flow) for each slot in use: bounded housekeeping that resumes where it stopped.
  template <typename Fn>
  void visit_slots(uint32_t& cursor, uint32_t max_slots, Fn&& fn) {
    const uint32_t n = capacity();
    for (uint32_t i = 0; i < max_slots && i < n; i++) {
      if (cursor >= n) cursor = 0;
      Flow& f = slots_[cursor++];
      if (f.in_use) fn(f);
    }
  }

  uint32_t size() const { return size_; }
  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  const Options& options() const { return options_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  uint32_t bucket_of(const rtce_flow_key& key) const;
  uint32_t find_index_pos(const rtce_flow_key& key) const;
  Flow* evict_candidate(Nanos now);

  Options options_;
  rtce_siphash_key hash_key_{};
  std::vector<Flow> slots_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> index_;
  uint32_t index_mask_ = 0;
  uint32_t size_ = 0;
  uint32_t sweep_cursor_ = 0;
  uint32_t evict_cursor_ = 0;
};

}  // namespace rtce
