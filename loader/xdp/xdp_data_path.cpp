// xdp_data_path.cpp — see xdp_data_path.h.
#include "xdp_data_path.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstddef>

#include "rtce_xdp.skel.h"
#include "xdp_flows.h"
#include "xdp_map_sync.h"

namespace rtce {

// libbpf reuses a pinned map only if its key and value sizes match; a `flows` value of
// another size would make every upgrade refuse to start until 'detach'. last_seen_ns took
// the place of padding to keep this size.
static_assert(sizeof(rtce_xdp_flow) == 40 && offsetof(rtce_xdp_flow, last_seen_ns) == 24 &&
                  offsetof(rtce_xdp_flow, created_ns) == 32,
              "the flows map value layout changed: pinned maps of older loaders would not be reused");
static_assert(sizeof(rtce_xdp_config) == 64, "the config map value size changed");

XdpDataPath::XdpDataPath(const RelayConfig& config) {
  const Nanos watch_start = monotonic_now();
  XdpAttach attempt(config);
  rtce_xdp* skel = attempt.load();
  possible_cpus_ = libbpf_num_possible_cpus();
  maps_ = std::make_unique<XdpMapSync>(skel, config.flow_idle_timeout, config.flow_limits);
  maps_->prime_vip_ports();  // before this program can run on any interface
  attach_modes_ = attempt.attach_all();
  flows_ = std::make_unique<XdpFlows>(skel, config.flow_idle_timeout, watch_start);
  skel_ = attempt.commit();
}

XdpDataPath::~XdpDataPath() = default;

void XdpDataPath::sync(const RelayConfig& config, const RoutingTable& routing) {
  maps_->sync(config, routing);
}

int XdpDataPath::poll_events(int timeout_ms) { return flows_->poll_events(timeout_ms); }

void XdpDataPath::attach_flow_store(FlowStoreOutbox* sink, Nanos refresh_interval) {
  flows_->attach_flow_store(sink, refresh_interval);
}

bool XdpDataPath::take_flow_store_activity() { return flows_->take_flow_store_activity(); }

void XdpDataPath::install_flow(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& endpoint,
                               uint8_t role, const sockaddr_in6* via) {
  flows_->install_flow(key, endpoint_id, endpoint, role, via);
}

bool XdpDataPath::find(const rtce_flow_key& key, sockaddr_in6& endpoint, uint16_t& endpoint_id) const {
  rtce_xdp_flow flow{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.flows), &key, &flow) != 0) return false;
  endpoint = SocketAddress::from_bytes(flow.endpoint.family, flow.endpoint.addr, ntohs(flow.endpoint.port_be))
                 .to_v6_mapped();
  endpoint_id = flow.endpoint_id;
  return true;
}

uint64_t XdpDataPath::flows_installed() const { return flows_->flows_installed(); }
void XdpDataPath::use_key_walk_for_tests() { flows_->use_key_walk(); }
uint64_t XdpDataPath::flows_endpoint_gone() const { return maps_->flows_endpoint_gone(); }
uint32_t XdpDataPath::expire_idle_flows(Nanos now) { return flows_->expire_idle_flows(now); }
uint64_t XdpDataPath::flows_expired() const { return flows_->flows_expired(); }
uint64_t XdpDataPath::events_seen() const { return flows_->events_seen(); }

XdpCounters XdpDataPath::read_counters() const {
  XdpCounters out;
  std::vector<rtce_xdp_counter> per_cpu(static_cast<size_t>(possible_cpus_));
  const int fd = bpf_map__fd(skel_->maps.counters);
  for (uint32_t reason = 0; reason < RTCE_XDP_REASON_COUNT; reason++) {
    for (uint32_t dir = 0; dir < RTCE_XDP_DIR_COUNT; dir++) {
      const uint32_t index = rtce_xdp_counter_index(reason, dir);
      if (bpf_map_lookup_elem(fd, &index, per_cpu.data()) != 0) continue;
      for (const auto& c : per_cpu) {
        out.packets[reason][dir] += c.packets;
        out.bytes[reason][dir] += c.bytes;
      }
    }
  }
  const int role_fd = bpf_map__fd(skel_->maps.role_counters);
  for (uint32_t role = 0; role < RTCE_RELAY_ROLE_COUNT; role++)
    for (uint32_t dir = 0; dir < RTCE_XDP_DIR_COUNT; dir++) {
      const uint32_t index = role * RTCE_XDP_DIR_COUNT + dir;
      if (bpf_map_lookup_elem(role_fd, &index, per_cpu.data()) != 0) continue;
      for (const auto& c : per_cpu) {
        out.role_packets[role][dir] += c.packets;
        out.role_bytes[role][dir] += c.bytes;
      }
    }
  std::vector<uint64_t> hint(static_cast<size_t>(possible_cpus_));
  const int hint_fd = bpf_map__fd(skel_->maps.hint_failures);
  for (uint32_t i = 0; i < RTCE_XDP_HINT_FAILURE_SLOTS; i++)
    if (bpf_map_lookup_elem(hint_fd, &i, hint.data()) == 0)
      for (uint64_t v : hint) out.hint_failures[i] += v;
  // The flows map has no entry count: walk its keys (bounded by the map size).
  out.flows = for_each_key<rtce_flow_key>(
      bpf_map__fd(skel_->maps.flows), [](const rtce_flow_key&) {}, bpf_map__max_entries(skel_->maps.flows));
  return out;
}

void XdpDataPath::detach(const std::string& pin_path, const std::vector<std::string>& interfaces) {
  XdpAttach::detach(pin_path, interfaces);
}

}  // namespace rtce
