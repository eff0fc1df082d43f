// flow_table.cpp — see flow_table.h.
#include "flow_table.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "random.h"

namespace rtce {

FlowTable::FlowTable(const Options& options) : options_(options) {
  if (options.capacity == 0) throw std::invalid_argument("flow table capacity must be > 0");
  uint8_t key_bytes[RTCE_SIPHASH_KEY_BYTES];
  fill_random(key_bytes, sizeof key_bytes);
  rtce_siphash_key_from_bytes(&hash_key_, key_bytes);
  slots_.resize(options.capacity);
  free_.reserve(options.capacity);
  for (uint32_t i = options.capacity; i > 0; i--) free_.push_back(i - 1);
  uint32_t index_size = 2;
  while (index_size < 2ULL * options.capacity) index_size <<= 1;
  index_.assign(index_size, kEmpty);
  index_mask_ = index_size - 1;
}

uint32_t FlowTable::bucket_of(const rtce_flow_key& key) const {
  return static_cast<uint32_t>(
             rtce_siphash24(reinterpret_cast<const uint8_t*>(&key), sizeof key, &hash_key_)) &
         index_mask_;
}

uint32_t FlowTable::find_index_pos(const rtce_flow_key& key) const {
  for (uint32_t pos = bucket_of(key);; pos = (pos + 1) & index_mask_) {
    uint32_t slot = index_[pos];
    if (slot == kEmpty || slots_[slot].key == key) return pos;
  }
}

Flow* FlowTable::find(const rtce_flow_key& key) {
  uint32_t slot = index_[find_index_pos(key)];
  return slot == kEmpty ? nullptr : &slots_[slot];
}

Flow* FlowTable::evict_candidate(Nanos now) {
  Flow* oldest = nullptr;
  const uint32_t n = capacity();
  for (uint32_t i = 0; i < options_.eviction_sample; i++) {
    Flow& f = slots_[evict_cursor_];
    evict_cursor_ = evict_cursor_ + 1 == n ? 0 : evict_cursor_ + 1;
    if (f.in_use && (!oldest || f.last_seen < oldest->last_seen)) oldest = &f;
  }
  if (oldest && now - oldest->last_seen >= options_.evict_idle_after) return oldest;
  return nullptr;
}

FlowTable::InsertResult FlowTable::insert(const rtce_flow_key& key, const FlowValue& value, Nanos now) {
  if (Flow* existing = find(key)) {
    existing->value = value;
    existing->last_seen = now;
    return {existing, InsertOutcome::updated};
  }
  InsertOutcome outcome = InsertOutcome::inserted;
  if (free_.empty()) {
    Flow* victim = evict_candidate(now);
    if (!victim) return {nullptr, InsertOutcome::full};
    erase(victim);
    outcome = InsertOutcome::evicted_idle;
  }
  uint32_t slot = free_.back();
  free_.pop_back();
  Flow& f = slots_[slot];
  f.key = key;
  f.framing_len = static_cast<uint8_t>(rtce_pp2_write_key(f.framing, sizeof f.framing, &key));
  f.value = value;
  f.created = now;
  f.last_seen = now;
  f.stored = 0;
  f.in_use = true;
  index_[find_index_pos(key)] = slot;
  size_++;
  return {&f, outcome};
}

void FlowTable::erase(Flow* flow) {
  uint32_t pos = find_index_pos(flow->key);
  if (index_[pos] == kEmpty) return;
  const uint32_t slot = index_[pos];
  // Backward-shift deletion keeps every probe chain unbroken without tombstones.
  uint32_t hole = pos;
  for (uint32_t next = (hole + 1) & index_mask_; index_[next] != kEmpty; next = (next + 1) & index_mask_) {
    uint32_t home = bucket_of(slots_[index_[next]].key);
    // Move the entry back if the hole lies cyclically within [home, next).
    bool movable = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next);
    if (movable) {
      index_[hole] = index_[next];
      hole = next;
    }
  }
  index_[hole] = kEmpty;
  slots_[slot].in_use = false;
  free_.push_back(slot);
  size_--;
}

uint32_t FlowTable::expire(Nanos now, uint32_t max_slots) {
  uint32_t expired = 0;
  const uint32_t n = capacity();
  for (uint32_t i = 0; i < max_slots && i < n; i++) {
    Flow& f = slots_[sweep_cursor_];
    sweep_cursor_ = sweep_cursor_ + 1 == n ? 0 : sweep_cursor_ + 1;
    if (f.in_use && now - f.last_seen >= options_.idle_timeout) {
      erase(&f);
      expired++;
    }
  }
  return expired;
}

FlowLimitTable::FlowLimitTable(uint32_t keys, uint32_t max, Nanos window) : max_(max), window_(window) {
  if (!enabled()) return;
  if (window <= 0) throw std::invalid_argument("flow limit window must be > 0");
  uint8_t key_bytes[RTCE_SIPHASH_KEY_BYTES];
  fill_random(key_bytes, sizeof key_bytes);
  rtce_siphash_key_from_bytes(&hash_key_, key_bytes);
  uint32_t sets = 1;
  while (static_cast<uint64_t>(sets) * kWays < std::max<uint32_t>(keys, 1)) sets <<= 1;
  entries_.assign(static_cast<size_t>(sets) * kWays, Entry{});
  set_mask_ = sets - 1;
}

size_t FlowLimitTable::set_start(const void* key, size_t key_len) const {
  const uint64_t h =
      rtce_siphash24(static_cast<const uint8_t*>(key), static_cast<uint32_t>(key_len), &hash_key_);
  return static_cast<size_t>(static_cast<uint32_t>(h) & set_mask_) * kWays;
}

bool FlowLimitTable::allows(const void* key, size_t key_len, Nanos now) const {
  if (!enabled()) return true;
  const Entry* set = &entries_[set_start(key, key_len)];
  const rtce_flow_limit* limit = nullptr;  // none: this key made no flow lately
  for (uint32_t i = 0; i < kWays && !limit; i++)
    if (set[i].in_use && std::memcmp(set[i].key, key, key_len) == 0) limit = &set[i].limit;
  return rtce_flow_limit_allows(limit, static_cast<__u64>(now), static_cast<__u64>(window_), max_);
}

void FlowLimitTable::charge(const void* key, size_t key_len, Nanos now) {
  if (!enabled()) return;
  const auto t = static_cast<__u64>(now);
  const auto window = static_cast<__u64>(window_);
  Entry* set = &entries_[set_start(key, key_len)];
  // The way a new key takes: a free one, else a window that is over, else the oldest live.
  auto rank = [&](const Entry& x) {
    return !x.in_use ? 0 : rtce_flow_limit_window_over(&x.limit, t, window) ? 1 : 2;
  };
  Entry* spare = nullptr;
  for (uint32_t i = 0; i < kWays; i++) {
    Entry& e = set[i];
    if (e.in_use && std::memcmp(e.key, key, key_len) == 0) {
      rtce_flow_limit_charge(&e.limit, t, window);
      return;
    }
    if (!spare || rank(e) < rank(*spare) ||
        (rank(e) == 2 && rank(*spare) == 2 && e.limit.window_start_ns < spare->limit.window_start_ns))
      spare = &e;
  }
  if (spare->in_use && !rtce_flow_limit_window_over(&spare->limit, t, window)) forgotten_++;
  std::memset(spare->key, 0, sizeof spare->key);
  std::memcpy(spare->key, key, key_len);
  spare->limit = rtce_flow_limit{};
  spare->limit.window_start_ns = t;
  spare->limit.flows = 1;
  spare->in_use = true;
}

}  // namespace rtce
