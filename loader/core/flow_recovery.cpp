// flow_recovery.cpp — see flow_recovery.h.
#include "flow_recovery.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "net_address.h"
#include "random.h"

namespace rtce {
namespace {
constexpr size_t kMissingSlots = 4096;  // power of two
}

FlowRecovery::FlowRecovery(const Options& options)
    : options_(options),
      stride_(options.headroom + options.max_packet),
      pool_packets_(options.pool_packets),
      lookup_budget_(options.lookups_per_second, options.lookups_per_second) {
  if (options.max_waiting_flows == 0 || options.packets_per_flow == 0 || options.pool_packets == 0)
    throw std::invalid_argument("flow recovery: sizes must be > 0");
  uint8_t key_bytes[RTCE_SIPHASH_KEY_BYTES];
  fill_random(key_bytes, sizeof key_bytes);
  rtce_siphash_key_from_bytes(&hash_key_, key_bytes);
  pool_.resize(pool_packets_ * stride_);
  lengths_.resize(pool_packets_);
  free_slots_.reserve(pool_packets_);
  for (size_t i = pool_packets_; i > 0; i--) free_slots_.push_back(static_cast<uint32_t>(i - 1));
  waiting_.resize(options.max_waiting_flows);
  for (auto& w : waiting_) w.slots.resize(options.packets_per_flow);
  missing_.resize(kMissingSlots);
}

uint64_t FlowRecovery::hash_of(const rtce_flow_key& key) const {
  const uint64_t h = rtce_siphash24(reinterpret_cast<const uint8_t*>(&key), sizeof key, &hash_key_);
  return h ? h : 1;  // 0 marks a free entry
}

int FlowRecovery::find_waiting(const rtce_flow_key& key) const {
  if (waiting_count_ == 0) return -1;
  const uint64_t h = hash_of(key);
  for (size_t i = 0; i < waiting_.size(); i++)
    if (waiting_[i].hash == h && std::memcmp(&waiting_[i].key, &key, sizeof key) == 0)
      return static_cast<int>(i);
  return -1;
}

bool FlowRecovery::store_packet(Waiting& entry, const uint8_t* data, size_t len) {
  if (len > options_.max_packet || entry.count >= options_.packets_per_flow || free_slots_.empty())
    return false;
  const uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  std::memcpy(packet(slot), data, len);
  lengths_[slot] = static_cast<uint32_t>(len);
  entry.slots[entry.count++] = slot;
  return true;
}

void FlowRecovery::release(size_t index) {
  Waiting& entry = waiting_[index];
  for (uint32_t i = 0; i < entry.count; i++) free_slots_.push_back(entry.slots[i]);
  entry.count = 0;
  entry.hash = 0;
  waiting_count_--;
}

void FlowRecovery::remember_missing(const rtce_flow_key& key, Nanos now) {
  const uint64_t h = hash_of(key);
  missing_[h & (kMissingSlots - 1)] = Missing{h, now + options_.negative_ttl};
}

bool FlowRecovery::recently_missing(uint64_t hash, Nanos now) const {
  const Missing& m = missing_[hash & (kMissingSlots - 1)];
  return m.hash == hash && now < m.until;
}

const sockaddr_in6* FlowRecovery::waiting_sender(const rtce_flow_key& key) const {
  const int w = find_waiting(key);
  if (w < 0 || !waiting_[static_cast<size_t>(w)].from_peer) return nullptr;
  return &waiting_[static_cast<size_t>(w)].from;
}

FlowRecovery::MissOutcome FlowRecovery::on_miss(const rtce_flow_key& key, uint16_t vip_socket,
                                                const uint8_t* data, size_t len, Nanos now,
                                                const sockaddr_in6* from) {
  if (const int w = find_waiting(key); w >= 0) {
    Waiting& entry = waiting_[static_cast<size_t>(w)];
    // One flow, one sender: a second peer relay (or a client and a peer) cannot add its
    // datagrams to packets that the record will be checked against for someone else.
    if (entry.from_peer != (from != nullptr) || (from && !same_endpoint(entry.from, *from)))
      return MissOutcome::wrong_sender;
    return store_packet(entry, data, len) ? MissOutcome::queued : MissOutcome::queue_full;
  }
  const uint64_t h = hash_of(key);
  if (recently_missing(h, now)) return MissOutcome::known_missing;
  if (waiting_count_ >= waiting_.size() || free_slots_.empty() || len > options_.max_packet)
    return MissOutcome::queue_full;
  if (!lookup_budget_.take(now)) return MissOutcome::rate_limited;
  auto free_entry =
      std::find_if(waiting_.begin(), waiting_.end(), [](const Waiting& w) { return w.hash == 0; });
  Waiting& entry = *free_entry;
  entry.key = key;
  entry.hash = h;
  entry.started = now;
  entry.vip_socket = vip_socket;
  entry.from_peer = from != nullptr;
  entry.from = from ? *from : sockaddr_in6{};
  entry.count = 0;
  waiting_count_++;
  store_packet(entry, data, len);
  return MissOutcome::lookup_started;
}

uint32_t FlowRecovery::expire(Nanos now) {
  if (waiting_count_ == 0) return 0;
  uint32_t dropped = 0;
  for (size_t i = 0; i < waiting_.size(); i++) {
    if (waiting_[i].hash == 0 || now - waiting_[i].started < options_.lookup_timeout) continue;
    dropped += waiting_[i].count;
    release(i);
  }
  return dropped;
}

}  // namespace rtce
