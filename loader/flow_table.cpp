// flow_table.cpp — see flow_table.h.
#include "flow_table.h"

#include <cstring>
#include <stdexcept>

#include "random.h"

namespace rtce {

bool operator==(const rtce_flow_key& a, const rtce_flow_key& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

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

}  // namespace rtce
