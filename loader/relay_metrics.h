// relay_metrics.h — the relay's /metrics page (every rtcedge_relay_* family), built from the
// workers' counters and, in XDP mode, the XDP program's, folded into the same names so that
// dashboards work in either mode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flow_sync.h"
#include "udp_worker.h"
#include "xdp_data_path.h"

namespace rtce {

class RegistrySync;

// What one scrape reads. The service fills it; the pointers stay valid for the call.
struct RelayMetricsSources {
  const std::vector<std::unique_ptr<UdpWorker>>* workers = nullptr;
  const XdpDataPath* xdp = nullptr;        // null in userspace mode
  FlowSync* flow_sync = nullptr;           // null without flow_store.redis_url
  const RegistrySync* registry = nullptr;  // null without registry.redis_url
  size_t flow_capacity = 0;                // flows.capacity
  size_t endpoints = 0;
  std::vector<uint8_t> peer_clusters;  // peers.clusters, for the per-peer health metrics
  // Read by the caller before the state a reload changes: a scrape that sees a reload
  // counted then also sees its endpoints.
  uint64_t reloads_ok = 0;
  uint64_t reloads_failed = 0;
};

std::string relay_metrics_text(const RelayMetricsSources& sources);

}  // namespace rtce
