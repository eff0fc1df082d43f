// path_table.h — the media worker's table from a path (the flow key of wire/rtce_flow.h) to
// what owns it: open addressing with linear probing over one cache line per slot (the
// 40-byte key and the pointer), so a datagram's lookup reads one line when its first probe
// hits, where a node-based map reads a bucket, a node and a key. The load stays at or below
// one half (the table doubles on insert; routes change on ICE checks, never per packet) and
// erasing shifts the run back, so there are no tombstones and probes stay short. Clients
// choose their addresses: keys are hashed with SipHash under a per-process random key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "random.h"
#include "rtce_flow.h"
#include "rtce_siphash.h"

namespace rtce {

template <class T>
class PathTable {
 public:
  explicit PathTable(size_t initial_slots = 1024)
      : slots_(round_up(initial_slots)), mask_(slots_.size() - 1) {}

  T* find(const rtce_flow_key& key) const {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.value == nullptr) return nullptr;
      if (same(slot.key, key)) return slot.value;
    }
  }

  void insert_or_assign(const rtce_flow_key& key, T* value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(key, value);
  }

  // Erases `key` only while it maps to `value` (a path another owner took over stays).
  bool erase_if(const rtce_flow_key& key, const T* value) {
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].value == nullptr) return false;
      if (same(slots_[i].key, key)) break;
    }
    if (slots_[i].value != value) return false;
    // Backward shift: move each later entry of the run into the hole when its home allows.
    for (size_t j = (i + 1) & mask_; slots_[j].value != nullptr; j = (j + 1) & mask_) {
      const size_t h = home(slots_[j].key);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    return true;
  }

  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }

 private:
  struct alignas(64) Slot {
    rtce_flow_key key{};
    T* value = nullptr;  // null: empty
  };

  static size_t round_up(size_t n) {
    size_t p = 16;
    while (p < n) p *= 2;
    return p;
  }
  static bool same(const rtce_flow_key& a, const rtce_flow_key& b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
  }
  static const rtce_siphash_key& hash_key() {
    static const rtce_siphash_key key = [] {
      uint8_t bytes[RTCE_SIPHASH_KEY_BYTES];
      fill_random(bytes, sizeof bytes);
      rtce_siphash_key out{};
      rtce_siphash_key_from_bytes(&out, bytes);
      return out;
    }();
    return key;
  }
  size_t home(const rtce_flow_key& key) const {
    return static_cast<size_t>(
               rtce_siphash24(reinterpret_cast<const uint8_t*>(&key), sizeof key, &hash_key())) &
           mask_;
  }
  void place(const rtce_flow_key& key, T* value) {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.value == nullptr) {
        slot.key = key;
        slot.value = value;
        ++size_;
        return;
      }
      if (same(slot.key, key)) {
        slot.value = value;
        return;
      }
    }
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    size_ = 0;
    for (const Slot& slot : old)
      if (slot.value != nullptr) place(slot.key, slot.value);
  }

  std::vector<Slot> slots_;
  size_t mask_;
  size_t size_ = 0;
};

}  // namespace rtce
