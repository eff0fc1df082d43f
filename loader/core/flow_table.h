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
#include "flow_key.h"
#include "rtce_flow.h"
#include "rtce_flow_limit.h"
#include "rtce_proxy_v2.h"
#include "rtce_siphash.h"

namespace rtce {

struct FlowValue {
  // local, owner: the transceiver; ingress: the owning cluster's relay (its peers.listen).
  // v4-mapped for IPv4 (dual-stack return socket).
  sockaddr_in6 endpoint{};
  uint16_t endpoint_id = 0;  // local, owner: the transceiver endpoint id; ingress: the cluster id
  uint16_t vip_socket = 0;   // index of the worker's VIP socket the flow arrived on (not owner)
  FlowRole role = FlowRole::local;
  sockaddr_in6 via{};  // owner: the ingress relay's address the flow's packets come from
};

struct Flow {
  rtce_flow_key key{};
  FlowValue value;
  // The PROXY v2 header naming the flow, written once at insert (rtce_pp2_write_key): a
  // datagram to the transceiver copies it in front of the payload.
  uint8_t framing[RTCE_PP2_LEN_V6]{};
  uint8_t framing_len = 0;
  Nanos created = 0;
  Nanos last_seen = 0;
  Nanos stored = 0;  // last write to the shared flow store (0 = never)
  bool in_use = false;
};

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

// How many flows one key (a hint, a source prefix) may create per time window: the
// userspace half of wire/rtce_flow_limit.h, whose functions make the decision (the XDP
// program calls the same ones on its LRU maps).
//
// Preallocated and bounded like the flow table: a set-associative cache of windows, kWays
// entries per set, the set chosen by a SipHash of the key with a per-process random key
// (so senders cannot aim many keys at one set). An entry is written only when a flow is
// created, so live windows are bounded by the flows created within one window. A set
// whose ways all hold live windows forgets its oldest (counted): that fails open for one
// key, as the BPF LRU map does, and never refuses a key that made no flows.
class FlowLimitTable {
 public:
  static constexpr uint32_t kWays = 8;
  static constexpr size_t kMaxKeyBytes = sizeof(rtce_prefix_limit_key);

  // max = RTCE_FLOW_LIMIT_NONE: no limit, no memory. `keys`: how many windows to keep
  // (the worker's flow capacity: a key with a live window made at least one flow).
  FlowLimitTable(uint32_t keys, uint32_t max, Nanos window);

  // Whether one more flow may be created for `key` now (rtce_flow_limit_allows).
  bool allows(const void* key, size_t key_len, Nanos now) const;
  // Counts a flow created for `key` (rtce_flow_limit_charge).
  void charge(const void* key, size_t key_len, Nanos now);

  template <typename Key>
  bool allows(const Key& key, Nanos now) const {
    static_assert(sizeof(Key) <= kMaxKeyBytes);
    return allows(&key, sizeof key, now);
  }
  template <typename Key>
  void charge(const Key& key, Nanos now) {
    static_assert(sizeof(Key) <= kMaxKeyBytes);
    charge(&key, sizeof key, now);
  }

  bool enabled() const { return max_ != RTCE_FLOW_LIMIT_NONE; }
  uint32_t max() const { return max_; }
  Nanos window() const { return window_; }
  // Live windows forgotten because their set was full (fail-open events).
  uint64_t forgotten() const { return forgotten_; }

 private:
  struct Entry {
    uint8_t key[kMaxKeyBytes];
    rtce_flow_limit limit;
    bool in_use;
  };
  size_t set_start(const void* key, size_t key_len) const;  // index of the set's first way

  uint32_t max_;
  Nanos window_;
  rtce_siphash_key hash_key_{};
  std::vector<Entry> entries_;
  uint32_t set_mask_ = 0;
  uint64_t forgotten_ = 0;
};

}  // namespace rtce
