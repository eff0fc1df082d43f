// flow_recovery.h — one worker's waiting room for packets of flows it does not know but
// the shared flow store may: after a relay restart, or a load balancer re-hash, the first
// DTLS/RTP packets of a call arrive with no STUN before them.
//
// A miss starts one lookup per flow; the flow's next few packets wait here (copied into a
// pool allocated once, with framing headroom) until the reply comes or the lookup times
// out. Everything is bounded: flows waiting, packets per flow, pool slots, and lookups per
// second (a token bucket, so a flood of spoofed sources cannot turn into a flood of Redis
// reads). A flow the store did not have is remembered for a while, so its packets do not
// ask again. A flow that waits for datagrams of a peer relay (the global relay's owner
// role) remembers that sender: its datagrams from any other sender are refused, and the
// caller checks the sender against the record before it installs the flow. No sockets and
// no clock of its own: the worker passes `now`.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "clock.h"
#include "rtce_flow.h"
#include "rtce_siphash.h"
#include "token_bucket.h"

namespace rtce {

class FlowRecovery {
 public:
  struct Options {
    uint32_t max_waiting_flows = 256;
    uint32_t packets_per_flow = 8;
    uint32_t pool_packets = 512;
    size_t headroom = 64;
    size_t max_packet = 1500;  // larger packets are not kept (DTLS and audio RTP are smaller)
    Nanos lookup_timeout = 500'000'000;
    uint32_t lookups_per_second = 2000;
    Nanos negative_ttl = 1'000'000'000;
  };
  enum class MissOutcome {
    lookup_started,  // the caller must send a lookup for this key
    queued,          // a lookup is already under way; the packet waits with it
    queue_full,      // dropped: no room (flows, packets of this flow, or pool)
    rate_limited,    // dropped: the lookup budget is spent
    known_missing,   // dropped: the store said recently it has no such flow
    wrong_sender,    // dropped: the flow waits for datagrams of another sender
  };

  explicit FlowRecovery(const Options& options);

  // `from`: the peer relay a forwarded datagram came from; nullptr for a client's datagram.
  MissOutcome on_miss(const rtce_flow_key& key, uint16_t vip_socket, const uint8_t* data, size_t len,
                      Nanos now, const sockaddr_in6* from = nullptr);
  // The peer relay the packets waiting for `key` came from; nullptr if they are a client's
  // or nothing waits.
  const sockaddr_in6* waiting_sender(const rtce_flow_key& key) const;

  // A reply for `key`: calls fn(packet, len, vip_socket) for each waiting packet, oldest
  // first (packet has options.headroom writable bytes before it), then forgets the flow.
  // `found` false remembers the flow as missing for negative_ttl. Returns how many packets
  // there were; 0 when nothing waited (a late reply after the timeout).
  template <typename Fn>
  uint32_t on_reply(const rtce_flow_key& key, bool found, Nanos now, Fn&& fn) {
    const int w = find_waiting(key);
    if (!found) remember_missing(key, now);
    if (w < 0) return 0;
    Waiting& entry = waiting_[static_cast<size_t>(w)];
    for (uint32_t i = 0; i < entry.count; i++) {
      const uint32_t slot = entry.slots[i];
      fn(packet(slot), lengths_[slot], entry.vip_socket);
    }
    const uint32_t n = entry.count;
    release(static_cast<size_t>(w));
    return n;
  }

  // Forgets lookups older than lookup_timeout; returns the packets dropped with them.
  uint32_t expire(Nanos now);

  uint32_t waiting_flows() const { return waiting_count_; }
  uint32_t waiting_packets() const { return static_cast<uint32_t>(pool_packets_ - free_slots_.size()); }

 private:
  struct Waiting {
    rtce_flow_key key{};
    uint64_t hash = 0;  // 0 = free entry
    Nanos started = 0;
    uint16_t vip_socket = 0;
    bool from_peer = false;
    sockaddr_in6 from{};
    uint32_t count = 0;
    std::vector<uint32_t> slots;  // sized once, packets_per_flow
  };

  uint64_t hash_of(const rtce_flow_key& key) const;
  int find_waiting(const rtce_flow_key& key) const;
  uint8_t* packet(uint32_t slot) { return pool_.data() + slot * stride_ + options_.headroom; }
  bool store_packet(Waiting& entry, const uint8_t* data, size_t len);
  void release(size_t index);
  void remember_missing(const rtce_flow_key& key, Nanos now);
  bool recently_missing(uint64_t hash, Nanos now) const;

  Options options_;
  rtce_siphash_key hash_key_{};
  size_t stride_;
  size_t pool_packets_;
  std::vector<uint8_t> pool_;
  std::vector<uint32_t> lengths_;
  std::vector<uint32_t> free_slots_;
  std::vector<Waiting> waiting_;
  uint32_t waiting_count_ = 0;
  struct Missing {
    uint64_t hash = 0;
    Nanos until = 0;
  };
  std::vector<Missing> missing_;  // direct-mapped by hash
  TokenBucket lookup_budget_;     // a burst of one second's lookups
};

}  // namespace rtce
