// xdp_map_sync.h — keeping the XDP program's maps in step with the configuration and the
// routing table: VIPs and their port filter, endpoints, hint keys, flow limits and the
// config block, and the flows an endpoint or VIP change leaves pointing at the wrong
// place. Updates are ordered so that the running program only ever sees a consistent
// set: upsert before delete, the config block last.
#pragma once

#include <bpf/bpf.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "clock.h"
#include "relay_config.h"
#include "relay_core.h"
#include "rtce_xdp.h"

struct rtce_xdp;

namespace rtce {

// A map's endpoint value from an address (v4-mapped or not), and back.
rtce_xdp_endpoint to_xdp_endpoint(const sockaddr_in6& address);
SocketAddress from_xdp_endpoint(const rtce_xdp_endpoint& endpoint);

// Calls fn(key) for each key of the map, in the kernel's order, starting after `*after`
// (from the first key when null), for at most `limit` keys. Returns the keys visited.
// Deleting during the walk would restart it from the first key: collect, then change.
template <class Key, class Fn>
uint32_t for_each_key(int fd, Fn&& fn, uint32_t limit = UINT32_MAX, const Key* after = nullptr) {
  Key key = after ? *after : Key{};
  Key next{};
  uint32_t visited = 0;
  for (const Key* prev = after ? &key : nullptr;
       visited < limit && bpf_map_get_next_key(fd, prev, &next) == 0; prev = &key) {
    key = next;
    visited++;
    fn(static_cast<const Key&>(key));
  }
  return visited;
}

// Every key of a map (bounded by limit).
template <class Key>
std::vector<Key> map_keys(int fd, uint32_t limit = UINT32_MAX) {
  std::vector<Key> keys;
  for_each_key<Key>(
      fd, [&](const Key& k) { keys.push_back(k); }, limit);
  return keys;
}

// Writes the vip_ports bitmap (the program's first, cheapest filter) for exactly these VIPs.
void write_vip_ports(rtce_xdp* skel, std::span<const rtce_xdp_vip_key> vips);

class XdpMapSync {
 public:
  // idle_timeout and flow limits are this instance's (a reload cannot change them).
  XdpMapSync(rtce_xdp* skel, Nanos idle_timeout, const FlowLimits& flow_limits);

  // Before the program first runs: the port filter from the (possibly pinned) VIPs. Pins
  // of a loader that predates `vip_ports` come with a fresh, empty one, which would make
  // every VIP packet "not ours" until the first sync.
  void prime_vip_ports();
  // Writes VIPs, endpoints, hint keys, cluster and relay addresses into the maps.
  void sync(const RelayConfig& config, const RoutingTable& routing);
  uint64_t flows_endpoint_gone() const { return flows_endpoint_gone_; }

 private:
  // After an endpoint or VIP change: removes flows of endpoints (or VIPs) gone, re-points
  // flows of endpoints that moved.
  void reconcile_flows(const RoutingTable& routing, bool remove_gone);
  // The owner role: peers.trusted into `peer_trusted`, peers.listen into `peer_listen`.
  void sync_owner_role(const RelayConfig& config, const RoutingTable& routing);

  rtce_xdp* skel_;
  Nanos idle_timeout_;
  FlowLimits flow_limits_;
  std::map<uint16_t, rtce_xdp_endpoint> synced_endpoints_;  // what the last sync() wrote
  std::map<uint16_t, rtce_xdp_endpoint> synced_peers_;      // cluster id -> its relay (ingress role)
  bool synced_once_ = false;
  std::vector<rtce_xdp_vip_key> synced_vips_;  // the exact VIPs the last sync() wrote
  std::atomic<uint64_t> flows_endpoint_gone_{0};
};

}  // namespace rtce
