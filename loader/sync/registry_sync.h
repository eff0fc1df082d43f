// registry_sync.h — keeps a relay's transceiver endpoints in step with the shared registry
// (redis-sync): it watches the registry on its own thread and hands every changed set of
// endpoints to `apply` (which swaps the routing table the way a SIGHUP reload does), within
// the registry's re-list period (1 s) of a change. Redis being down keeps the last known
// set: an outage must not look like every transceiver leaving. With a cache file the set
// also survives a restart during an outage: it is saved on every change and, at start,
// routes until the registry answers (registry_cache.h).
//
// Global relay (docs/global-relay.md, "Peers from the registry"): it also publishes this
// relay's peers.listen as an ingress of its cluster, and learns the peers.listen of the
// clusters whose peers.clusters entry has no address, handing changes to `apply_peers`.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis_registry.h"
#include "registry_cache.h"
#include "relay_config.h"

namespace rtce {

struct RegistryCacheOptions {
  std::string file;  // empty: none
  std::chrono::milliseconds max_age{3'600'000};
};

class RegistrySync {
 public:
  using Apply = std::function<void(std::vector<EndpointConfig>)>;
  using ApplyPeers = std::function<void(std::map<uint8_t, SocketAddress>)>;
  struct Peers {
    std::optional<SocketAddress> publish;  // this relay's peers.listen
    std::vector<uint8_t> learn;            // clusters whose relay address comes from the registry
    ApplyPeers apply;                      // every change of the learned addresses
  };
  using Cache = RegistryCacheOptions;
  // With a usable cache, `apply` runs once in the constructor, on the caller's thread.
  RegistrySync(RedisOptions redis, RegistryOptions options, Apply apply, Peers peers = {}, Cache cache = {});
  // Withdraws the published address (bounded wait) so that ingress relays move at once.
  ~RegistrySync();
  RegistrySync(const RegistrySync&) = delete;
  RegistrySync& operator=(const RegistrySync&) = delete;

  // A reload changed which clusters are learned (thread-safe).
  void learn(std::vector<uint8_t> clusters);

  // The last re-list was answered (any thread: metrics).
  bool up() const { return up_.load(std::memory_order_relaxed); }
  const SyncCounters& counters() const { return registry_.counters(); }

 private:
  void peer_tick();
  void arm_peer_timer();
  void apply_endpoints();

  boost::asio::io_context io_;
  RedisRegistry registry_;
  Apply apply_;
  Peers peers_;  // registry thread only, once started
  Cache cache_;
  std::map<uint16_t, SocketAddress> endpoints_;  // registry thread only
  bool from_cache_ = false;  // endpoints_ started from the cache; unconfirmed ones are still held
  // The registry answered once; unconfirmed cached endpoints leave after cache_grace_.
  bool grace_started_ = false;
  std::set<uint16_t> confirmed_;              // from_cache_: ids the registry reported since
  std::vector<EndpointConfig> saved_;         // what the cache file holds
  std::map<uint8_t, SocketAddress> learned_;  // registry thread only
  Millis peer_period_;
  boost::asio::steady_timer peer_timer_;
  Millis cache_grace_;
  boost::asio::steady_timer cache_grace_timer_;
  std::atomic<bool> up_{false};
  std::thread thread_;
};

// Static endpoints from the configuration win over registry ones with the same id.
std::vector<EndpointConfig> merge_endpoints(const std::vector<EndpointConfig>& configured,
                                            const std::vector<EndpointConfig>& registry);

// The address an ingress uses among a cluster's live ingress members: the smallest valid one
// in text order, so that every ingress relay picks the same and a refresh never flaps it.
std::optional<SocketAddress> choose_ingress(const std::vector<std::string>& live);

// The configured peer clusters with the learned addresses filled in; an entry still without
// an address stays (build_routing_table leaves it out: not routable until learned).
std::vector<PeerClusterConfig> merge_peer_clusters(const std::vector<PeerClusterConfig>& configured,
                                                   const std::map<uint8_t, SocketAddress>& learned);

// The clusters of the entries that learn their address.
std::vector<uint8_t> learned_clusters(const std::vector<PeerClusterConfig>& configured);

}  // namespace rtce
