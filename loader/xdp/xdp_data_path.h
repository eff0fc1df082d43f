// xdp_data_path.h — the XDP data path as RelayService sees it: loads bpf/rtce_xdp.bpf.c
// through its libbpf skeleton and attaches it (xdp_attach.h), keeps its maps in step with
// the configuration (xdp_map_sync.h), drains the flow ring buffer and sweeps idle flows
// (xdp_flows.h), and reads the per-CPU counters. This class only ties the three together.
//
// A restarted loader reuses the pinned maps (no flow is lost) and replaces the program
// behind each pinned link with bpf_link_update (no packet meets a detached interface):
// while the loader is down, the program keeps forwarding with the maps it has.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clock.h"
#include "relay_config.h"
#include "relay_core.h"
#include "rtce_xdp.h"
#include "xdp_attach.h"
#include "xdp_error.h"

namespace rtce {

class XdpFlows;
class XdpMapSync;

struct XdpCounters {
  std::array<std::array<uint64_t, RTCE_XDP_DIR_COUNT>, RTCE_XDP_REASON_COUNT> packets{};
  std::array<std::array<uint64_t, RTCE_XDP_DIR_COUNT>, RTCE_XDP_REASON_COUNT> bytes{};
  std::array<uint64_t, RTCE_XDP_HINT_FAILURE_SLOTS> hint_failures{};
  // Forwarded by the program for ingress and owner flows (the local row stays 0).
  std::array<std::array<uint64_t, RTCE_XDP_DIR_COUNT>, RTCE_RELAY_ROLE_COUNT> role_packets{};
  std::array<std::array<uint64_t, RTCE_XDP_DIR_COUNT>, RTCE_RELAY_ROLE_COUNT> role_bytes{};
  uint64_t flows = 0;  // entries in the flows map (a walk; call at scrape rate, not per packet)
};

class XdpDataPath : public PassedUpFlows {
 public:
  // Loads, attaches to every xdp.interfaces entry and pins. Throws XdpError saying why
  // (not root, no such interface, verifier, attach mode refused, incompatible pins).
  explicit XdpDataPath(const RelayConfig& config);
  ~XdpDataPath();
  XdpDataPath(const XdpDataPath&) = delete;
  XdpDataPath& operator=(const XdpDataPath&) = delete;

  // Writes VIPs, endpoints, hint keys, cluster and relay addresses into the maps.
  void sync(const RelayConfig& config, const RoutingTable& routing);
  // Consumes flow-created events; returns how many. Never blocks longer than timeout_ms.
  // With a flow store attached, each event becomes a put.
  int poll_events(int timeout_ms);

  // Mirrors XDP flows into the shared flow store: created flows are put (from the ring
  // buffer), flows with client packets are put again every refresh_interval (from the idle
  // sweep). `sink` is used from the polling thread only.
  void attach_flow_store(FlowStoreOutbox* sink, Nanos refresh_interval);
  // True once since the last call if the sink was handed anything.
  bool take_flow_store_activity();
  // Installs a flow recovered from the store into the flows map, so its next packets take
  // XDP; an owner flow with the ingress relay it comes from (`via`, into owner_via).
  // Callable from any thread (a map update or two).
  void install_flow(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& endpoint,
                    uint8_t role = RTCE_RELAY_ROLE_LOCAL, const sockaddr_in6* via = nullptr);
  uint64_t flows_installed() const;
  // PassedUpFlows: the flows map entry of a reply the program passed up. Callable from any
  // thread (one map lookup).
  bool find(const rtce_flow_key& key, sockaddr_in6& endpoint, uint16_t& endpoint_id) const override;
  // Tests: make the idle sweep walk key by key, as on a kernel without batch lookup.
  void use_key_walk_for_tests();
  uint64_t flows_endpoint_gone() const;
  // Housekeeping for the thread that polls events, called after every poll: deletes flows
  // with no client packet for flows.idle_timeout (xdp_flow_expiry.h). A pass over the map
  // starts every xdp_sweep_interval and reads it in chunks (one batch lookup each), so a
  // call's work is bounded however large the map. Returns flows deleted.
  uint32_t expire_idle_flows(Nanos now);
  uint64_t flows_expired() const;
  XdpCounters read_counters() const;
  uint64_t events_seen() const;
  const std::vector<std::string>& attach_modes() const { return attach_modes_; }

  // Removes the links and every pin under pin_path (the `detach` command).
  static void detach(const std::string& pin_path, const std::vector<std::string>& interfaces);

 private:
  XdpSkeleton skel_;
  std::vector<std::string> attach_modes_;
  int possible_cpus_ = 1;
  std::unique_ptr<XdpMapSync> maps_;
  std::unique_ptr<XdpFlows> flows_;
};

}  // namespace rtce
