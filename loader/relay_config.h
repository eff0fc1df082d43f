// relay_config.h — rtcedge-relay's configuration: the resolved struct, and the operations
// its key table (relay_config_keys.cpp) derives: declaration, resolution, the restart diff,
// the --check-config YAML and the reference of docs/configuration.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config_keys.h"
#include "config_layers.h"
#include "hint_keys.h"
#include "net_address.h"
#include "relay_core.h"

namespace rtce {

struct EndpointConfig {
  uint16_t id = 0;
  SocketAddress address;
};

// peers.clusters: another cluster this relay is an ingress for (docs/global-relay.md).
struct PeerClusterConfig {
  uint8_t cluster = 0;
  SocketAddress address;       // that cluster's relay peers.listen; unspecified until learned
  std::string hint_key_file;   // empty: this relay's hint_key_file (one key set for the fleet)
  bool from_registry = false;  // no address configured: learned from the registry's ingress set
};

// ice_tcp.*: ICE-TCP (RFC 6544) at the VIPs, terminated by the workers (tcp_streams.h).
struct IceTcpOptions {
  uint16_t port = 0;  // 0 = off
  uint32_t max_connections = 10000;
  uint32_t max_per_source_prefix = 1024;  // open connections per flows.source_prefix_v4/v6 prefix
  Nanos first_frame_timeout = 5'000'000'000;
  Nanos idle_timeout = 30'000'000'000;
  uint32_t max_frame = 2048;
  uint32_t send_queue_bytes = 16384;
  bool operator==(const IceTcpOptions&) const = default;
};

struct RelayConfig {
  std::string mode = "userspace";  // userspace | xdp | auto
  std::vector<SocketAddress> listen;
  SocketAddress return_listen;
  uint32_t workers = 0;  // 0 = one per online CPU
  bool pin_cpus = true;
  uint32_t batch_size = 32;
  uint32_t socket_buffer_bytes = 4 << 20;
  // UDP GSO towards transceivers, and the longest datagram it pads to or carries.
  bool gso = true;
  uint32_t gso_max_datagram = 1452;
  uint8_t cluster_id = 0;
  std::string hint_key_file;
  std::string registry_redis_url;  // empty = endpoints only from the configuration
  Nanos registry_ttl = 3'000'000'000;
  std::string registry_cache_file;  // empty = no cache: a restart during a Redis outage knows no endpoints
  Nanos registry_cache_max_age = 3'600'000'000'000;
  std::vector<EndpointConfig> endpoints;
  // Global relay: where peer relays send forwarded flows (unspecified = the owner role is off),
  // who may, and the clusters this relay forwards to (the ingress role).
  SocketAddress peers_listen;
  std::vector<IpPrefix> peers_trusted;
  std::vector<PeerClusterConfig> peer_clusters;
  std::string flow_store_redis_url;  // empty = flows live only in this relay
  Nanos flow_store_ttl = 120'000'000'000;
  Nanos flow_store_refresh_interval = 40'000'000'000;
  Nanos flow_store_lookup_timeout = 500'000'000;
  uint32_t flow_store_lookups_per_second = 2000;
  uint32_t flow_capacity = 65536;
  Nanos flow_idle_timeout = 30'000'000'000;
  Nanos flow_evict_idle_after = 5'000'000'000;
  FlowLimits flow_limits;  // flows.max_per_hint, flows.max_per_source_prefix, ...
  IceTcpOptions ice_tcp;
  SocketAddress admin_listen;
  uint64_t http_max_connections = kDefaultHttpMaxConnections;  // applied by configure_http_servers
  std::string log_format = "text";
  std::string log_level = "info";
  // XDP data path (mode xdp|auto).
  std::vector<std::string> xdp_interfaces;
  std::string xdp_pin_path = "/sys/fs/bpf/rtcedge";
  bool xdp_allow_generic = false;
  std::string xdp_relay_address4;
  std::string xdp_relay_address6;
  uint16_t xdp_return_port = 3479;
  uint32_t xdp_new_flow_budget = 0;  // 0 = the program's default
  // Start even when another relay serves the same VIPs (or XDP interfaces, pin path) in
  // this network namespace, joining its SO_REUSEPORT group; refused by default.
  bool join_existing = false;
};

// Every key: name, default, range, help, reference text, reloadable or restart-only.
const ConfigTable<RelayConfig>& relay_config_keys();
void declare_relay_config(ConfigLayers& layers);
// Validates every key; throws ConfigError naming the first bad key.
RelayConfig resolve_relay_config(const ConfigLayers& layers);
// The restart-only keys whose values differ: a reload warns that each takes effect on restart.
std::vector<std::string> relay_restart_only_changes(const RelayConfig& running, const RelayConfig& next);
// --check-config: the resolved configuration as YAML, secrets redacted.
std::string relay_config_yaml(const RelayConfig& config);
// --print-config-reference: the Markdown key table of docs/configuration.md.
std::string relay_config_reference();
std::vector<EndpointConfig> parse_endpoints(const std::vector<std::string>& items, const std::string& where);
// peers.clusters items: "2=198.18.100.2:3480" (flags/env) or a YAML map
// {cluster: 2, address: "198.18.100.2:3480", hint_key_file: "/etc/rtcedge/cluster2.yaml"}.
// No address (a map without one, or "2=registry"): learned from the registry.
std::vector<PeerClusterConfig> parse_peer_clusters(const std::vector<std::string>& items,
                                                   const std::string& where);
// Loads the key file and builds the routing table the workers use.
std::shared_ptr<const RoutingTable> build_routing_table(const RelayConfig& config);

}  // namespace rtce
