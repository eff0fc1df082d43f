// xdp_map_sync.cpp — see xdp_map_sync.h.
#include "xdp_map_sync.h"

#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

#include "error.h"
#include "rtce_xdp.skel.h"
#include "xdp_error.h"
#include "xdp_flow_expiry.h"

namespace rtce {

rtce_xdp_endpoint to_xdp_endpoint(const sockaddr_in6& address) {
  const SocketAddress addr =
      SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&address), sizeof address).unmapped();
  rtce_xdp_endpoint ep{};
  ep.family = addr.to_bytes(ep.addr);
  ep.port_be = htons(addr.port());
  return ep;
}

SocketAddress from_xdp_endpoint(const rtce_xdp_endpoint& endpoint) {
  return SocketAddress::from_bytes(endpoint.family, endpoint.addr, ntohs(endpoint.port_be));
}
namespace {

void update(bpf_map* map, const void* key, const void* value, const char* what) {
  if (bpf_map_update_elem(bpf_map__fd(map), key, value, BPF_ANY) != 0)
    throw XdpError(std::string("updating the ") + what + " map: " + xdp_errno_text(errno));
}

void fill_addr(uint8_t out[16], const std::string& text, int family, const std::string& key) {
  if (text.empty()) return;
  auto parsed = SocketAddress::parse((family == AF_INET6 ? "[" + text + "]" : text) + ":1");
  if (!parsed || parsed->family() != family)
    throw ConfigError("config key '" + key + "': '" + text + "' is not an IPv" +
                      (family == AF_INET6 ? "6" : "4") + " address");
  parsed->to_bytes(out);
}

}  // namespace

void write_vip_ports(rtce_xdp* skel, std::span<const rtce_xdp_vip_key> vips) {
  auto ports = std::make_unique<rtce_xdp_vip_ports>();  // a 64 Ki-bit bitmap: not on the stack
  for (const auto& k : vips) rtce_xdp_vip_port_set(ports.get(), ntohs(k.port_be));
  const uint32_t zero = 0;
  update(skel->maps.vip_ports, &zero, ports.get(), "vip_ports");
}

XdpMapSync::XdpMapSync(rtce_xdp* skel, Nanos idle_timeout, const FlowLimits& flow_limits)
    : skel_(skel), idle_timeout_(idle_timeout), flow_limits_(flow_limits) {}

void XdpMapSync::prime_vip_ports() {
  write_vip_ports(skel_, map_keys<rtce_xdp_vip_key>(bpf_map__fd(skel_->maps.vips)));
}

void XdpMapSync::sync(const RelayConfig& config, const RoutingTable& routing) {
  rtce_xdp_config cfg{};
  fill_addr(cfg.relay_addr4, config.xdp_relay_address4, AF_INET, "xdp.relay_address4");
  fill_addr(cfg.relay_addr6, config.xdp_relay_address6, AF_INET6, "xdp.relay_address6");
  if (!config.xdp_relay_address4.empty()) cfg.flags |= RTCE_XDP_F_HAVE_V4;
  if (!config.xdp_relay_address6.empty()) cfg.flags |= RTCE_XDP_F_HAVE_V6;
  cfg.return_port_be = htons(config.xdp_return_port);
  cfg.cluster_id = routing.cluster_id;
  cfg.new_flow_budget = config.xdp_new_flow_budget;
  // From the idle timeout this instance sweeps with (a reload cannot change it).
  cfg.last_seen_granularity_ns = xdp_last_seen_granularity(idle_timeout_);
  const uint32_t zero = 0;
  update(skel_->maps.hint_keys, &zero, &routing.keys, "hint_keys");

  // Endpoints: upsert the table, then delete ids it no longer has.
  std::set<uint16_t> wanted;
  std::map<uint16_t, rtce_xdp_endpoint> synced;
  for (const auto& [id, addr6] : routing.endpoints) {
    const rtce_xdp_endpoint ep = to_xdp_endpoint(addr6);
    update(skel_->maps.endpoints, &id, &ep, "endpoints");
    wanted.insert(id);
    synced[id] = ep;
  }
  const int ep_fd = bpf_map__fd(skel_->maps.endpoints);
  for (uint16_t id : map_keys<uint16_t>(ep_fd))
    if (!wanted.count(id)) bpf_map_delete_elem(ep_fd, &id);
  const bool endpoints_changed =
      synced.size() != synced_endpoints_.size() ||
      !std::equal(synced.begin(), synced.end(), synced_endpoints_.begin(), [](const auto& a, const auto& b) {
        return a.first == b.first && std::memcmp(&a.second, &b.second, sizeof a.second) == 0;
      });
  // Peer clusters (the global relay's ingress role): every slot written, in use or not.
  std::map<uint16_t, rtce_xdp_endpoint> peers;
  for (uint32_t cluster = 0; cluster < RTCE_XDP_MAX_CLUSTERS; cluster++) {
    rtce_xdp_peer_cluster pc{};
    auto it = routing.peer_clusters.find(static_cast<uint8_t>(cluster));
    if (it != routing.peer_clusters.end()) {
      pc.relay = to_xdp_endpoint(it->second.relay);
      pc.in_use = 1;
      pc.keys = it->second.keys;
      peers[static_cast<uint16_t>(cluster)] = pc.relay;
    }
    update(skel_->maps.peer_clusters, &cluster, &pc, "peer_clusters");
  }
  const bool peers_changed =
      peers.size() != synced_peers_.size() ||
      !std::equal(peers.begin(), peers.end(), synced_peers_.begin(), [](const auto& a, const auto& b) {
        return a.first == b.first && std::memcmp(&a.second, &b.second, sizeof a.second) == 0;
      });
  synced_peers_ = std::move(peers);
  const bool first_sync = !synced_once_;
  synced_once_ = true;
  synced_endpoints_ = std::move(synced);

  // VIPs: XDP matches exact addresses; a wildcard listen address stays userspace-only.
  // Upsert first, then delete the VIPs no longer listed: a restarted loader syncs while the
  // pinned program is forwarding, and a VIP missing even briefly would send its packets to
  // a kernel with no socket bound yet (lost with ICMP port unreachable).
  const int vip_fd = bpf_map__fd(skel_->maps.vips);
  const std::vector<rtce_xdp_vip_key> old_vips = map_keys<rtce_xdp_vip_key>(vip_fd);
  std::vector<rtce_xdp_vip_key> new_vips;
  uint32_t vip_id = 0;
  for (const auto& vip : config.listen) {
    if (vip.is_unspecified()) {
      spdlog::warn(
          "xdp: listen address {} is a wildcard; XDP steers only exact VIP addresses, so its traffic "
          "takes the userspace relay",
          vip.to_string());
      continue;
    }
    rtce_xdp_vip_key k{};
    k.family = vip.to_bytes(k.addr);
    k.port_be = htons(vip.port());
    rtce_xdp_vip v{vip_id++};
    update(skel_->maps.vips, &k, &v, "vips");
    new_vips.push_back(k);
  }
  // The port filter after the VIPs exist, before the old ones go.
  write_vip_ports(skel_, new_vips);
  bool vips_removed = false;
  for (const auto& k : old_vips)
    if (std::none_of(new_vips.begin(), new_vips.end(),
                     [&](const rtce_xdp_vip_key& n) { return std::memcmp(&n, &k, sizeof k) == 0; })) {
      bpf_map_delete_elem(vip_fd, &k);
      vips_removed = true;
    }
  synced_vips_ = std::move(new_vips);
  // Flows of a vanished endpoint go; not at the first sync of a restarted loader, whose
  // pinned flows may name endpoints that only the registry (not yet read) knows. Flows of a
  // VIP that is gone go too: a flow hit skips the VIP lookup (the port filter and the flow
  // key suffice).
  if (endpoints_changed || vips_removed || peers_changed)
    reconcile_flows(routing, /*remove_gone=*/!first_sync);
  // The workers' flow limits (0 = no limit there; here 0 means "default", so no limit
  // is written as RTCE_FLOW_LIMIT_NONE).
  rtce_xdp_flow_limit_config limits{};
  const FlowLimits& fl = flow_limits_;
  limits.max_per_hint = fl.max_per_hint ? fl.max_per_hint : RTCE_FLOW_LIMIT_NONE;
  limits.max_per_source_prefix = fl.max_per_source_prefix ? fl.max_per_source_prefix : RTCE_FLOW_LIMIT_NONE;
  limits.window_ns = static_cast<uint64_t>(fl.window);
  limits.prefix_len4 = fl.source_prefix_v4;
  limits.prefix_len6 = fl.source_prefix_v6;
  update(skel_->maps.flow_limit_config, &zero, &limits, "flow_limit_config");
  sync_owner_role(config, routing);
  // Config last: until now the program saw the previous, consistent configuration.
  update(skel_->maps.config, &zero, &cfg, "config");
}

void XdpMapSync::sync_owner_role(const RelayConfig& config, const RoutingTable& routing) {
  // Trusted peers first (upsert, then delete the prefixes gone), then where they send to:
  // the program never sees a peers.listen address without the ranges allowed to use it.
  const int trusted_fd = bpf_map__fd(skel_->maps.peer_trusted);
  std::vector<rtce_xdp_trusted_key> wanted;
  for (const IpPrefix& prefix : routing.trusted_peers) {
    rtce_xdp_trusted_key k{};
    k.family = prefix.family() == AF_INET6 ? RTCE_FAMILY_V6 : RTCE_FAMILY_V4;
    k.prefixlen = RTCE_XDP_TRUSTED_KEY_PREFIX + prefix.bits();
    std::memcpy(k.addr, prefix.bytes(), prefix.family() == AF_INET6 ? 16 : 4);
    const uint8_t yes = 1;
    update(skel_->maps.peer_trusted, &k, &yes, "peer_trusted");
    wanted.push_back(k);
  }
  for (const auto& k : map_keys<rtce_xdp_trusted_key>(trusted_fd, RTCE_XDP_MAX_TRUSTED))
    if (std::none_of(wanted.begin(), wanted.end(),
                     [&](const rtce_xdp_trusted_key& w) { return std::memcmp(&w, &k, sizeof k) == 0; }))
      bpf_map_delete_elem(trusted_fd, &k);

  rtce_xdp_peer_listen pl{};
  const SocketAddress& listen = config.peers_listen;
  if (!listen.is_unspecified()) {
    uint8_t addr[16]{};
    if (listen.unmapped().to_bytes(addr) == RTCE_FAMILY_V6) {
      std::memcpy(pl.addr6, addr, 16);
      pl.flags |= RTCE_XDP_F_HAVE_V6;
    } else {
      std::memcpy(pl.addr4, addr, 4);
      pl.flags |= RTCE_XDP_F_HAVE_V4;
    }
    pl.port_be = htons(listen.port());
  }
  const uint32_t zero = 0;
  update(skel_->maps.peer_listen, &zero, &pl, "peer_listen");
}

void XdpMapSync::reconcile_flows(const RoutingTable& routing, bool remove_gone) {
  const int fd = bpf_map__fd(skel_->maps.flows);
  std::vector<rtce_flow_key> gone;
  std::vector<std::pair<rtce_flow_key, rtce_xdp_flow>> moved;
  // Collect first, change after: deleting during a get_next_key walk would restart it.
  for_each_key<rtce_flow_key>(
      fd,
      [&](const rtce_flow_key& key) {
        rtce_xdp_flow value{};
        if (bpf_map_lookup_elem(fd, &key, &value) != 0) return;
        const bool vip_known =
            std::any_of(synced_vips_.begin(), synced_vips_.end(), [&](const rtce_xdp_vip_key& v) {
              return v.family == key.family && v.port_be == key.vip_port_be &&
                     std::memcmp(v.addr, key.vip_addr, 16) == 0;
            });
        // An ingress flow's endpoint is its cluster's relay (endpoint_id = the cluster id).
        const auto& table = value.role == RTCE_RELAY_ROLE_INGRESS ? synced_peers_ : synced_endpoints_;
        const auto endpoint = table.find(value.endpoint_id);
        if (!vip_known) {
          gone.push_back(key);  // configured VIPs are authoritative, also at a first sync
        } else if (endpoint == table.end()) {
          if (remove_gone) gone.push_back(key);
        } else if (std::memcmp(&endpoint->second, &value.endpoint, sizeof value.endpoint) != 0) {
          value.endpoint = endpoint->second;
          moved.emplace_back(key, value);
        }
      },
      bpf_map__max_entries(skel_->maps.flows));
  for (const auto& k : gone) bpf_map_delete_elem(fd, &k);
  for (const auto& [k, v] : moved) bpf_map_update_elem(fd, &k, &v, BPF_EXIST);
  flows_endpoint_gone_ += gone.size();
  if (!gone.empty() || !moved.empty())
    spdlog::info(
        "xdp: {} flows removed (their endpoint left), {} re-pointed (their endpoint moved); {} endpoints",
        gone.size(), moved.size(), routing.endpoints.size());
}

}  // namespace rtce
