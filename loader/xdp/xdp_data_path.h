// xdp_data_path.h — the XDP data path's control plane: loads bpf/rtce_xdp.bpf.c through its
// libbpf skeleton, pins its maps and per-interface links, swaps the program atomically on
// restart, keeps the maps in step with the configuration, drains the flow ring buffer and
// reads the per-CPU counters.
//
// XDP flows expire like the userspace relay's: a sweep on the polling thread deletes those
// idle for flows.idle_timeout (expire_idle_flows), from the last_seen_ns the program keeps.
//
// Pins (under xdp.pin_path, default /sys/fs/bpf/rtcedge):
//   maps/<name>     flows, endpoints, vips, config, hint_keys, counters, hint_failures, events
//   links/<ifname>  the XDP link of each interface
// A restarted loader reuses the pinned maps (no flow is lost) and replaces the program
// behind each pinned link with bpf_link_update (no packet meets a detached interface):
// while the loader is down, the program keeps forwarding with the maps it has.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "clock.h"
#include "relaxed_counter.h"
#include "relay_config.h"
#include "relay_core.h"
#include "rtce_xdp.h"

struct rtce_xdp;
struct ring_buffer;

namespace rtce {

class XdpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct XdpCounters {
  std::array<std::array<uint64_t, RTCE_XDP_DIR_COUNT>, RTCE_XDP_REASON_COUNT> packets{};
  std::array<std::array<uint64_t, RTCE_XDP_DIR_COUNT>, RTCE_XDP_REASON_COUNT> bytes{};
  std::array<uint64_t, RTCE_XDP_HINT_FAILURE_SLOTS> hint_failures{};
  uint64_t flows = 0;  // entries in the flows map (a walk; call at scrape rate, not per packet)
};

class XdpDataPath {
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
  bool take_flow_store_activity() {
    const bool was = store_activity_;
    store_activity_ = false;
    return was;
  }
  // Installs a flow recovered from the store into the flows map, so its next packets take
  // XDP. Callable from any thread (one map update).
  void install_flow(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& endpoint);
  uint64_t flows_installed() const { return flows_installed_.get(); }
  // Tests: make the idle sweep walk key by key, as on a kernel without batch lookup.
  void use_key_walk_for_tests() { sweep_.walk = true; }
  uint64_t flows_endpoint_gone() const { return flows_endpoint_gone_; }
  // Housekeeping for the thread that polls events, called after every poll: deletes flows
  // with no client packet for flows.idle_timeout (xdp_flow_expiry.h). A pass over the map
  // starts every xdp_sweep_interval and reads it kSweepChunk entries per call (one batch
  // lookup), so a call's work is bounded however large the map. Returns flows deleted.
  uint32_t expire_idle_flows(Nanos now);
  uint64_t flows_expired() const { return flows_expired_.get(); }
  XdpCounters read_counters() const;
  uint64_t events_seen() const { return events_seen_; }
  const std::vector<std::string>& attach_modes() const { return attach_modes_; }

  // Removes the links and every pin under pin_path (the `detach` command).
  static void detach(const std::string& pin_path, const std::vector<std::string>& interfaces);

 private:
  static constexpr uint32_t kSweepChunk = 4096;

  static int on_event(void* ctx, void* data, size_t size);
  // Reads the next chunk of the flows map for the sweep into sweep_.keys/values; returns the
  // count and sets `last` at the end of a pass. Batch lookup where the kernel has it, a
  // get_next_key walk otherwise.
  uint32_t read_sweep_chunk(int fd, bool& last);
  // After an endpoint or VIP change: removes flows of endpoints (or VIPs) gone, re-points
  // flows of endpoints that moved.
  void reconcile_flows(const RoutingTable& routing, bool remove_gone);
  void load_and_attach(const RelayConfig& config,
                       const std::vector<std::pair<std::string, unsigned>>& interfaces);

  struct SkeletonDeleter {
    void operator()(rtce_xdp* skel) const;
  };
  struct RingDeleter {
    void operator()(ring_buffer* rb) const;
  };
  std::unique_ptr<rtce_xdp, SkeletonDeleter> skel_;
  std::unique_ptr<ring_buffer, RingDeleter> ring_;
  std::string pin_path_;
  std::vector<std::string> attach_modes_;
  std::vector<std::string> created_links_;  // link pins this instance made (undone on failure)
  uint64_t events_seen_ = 0;
  int possible_cpus_ = 1;
  FlowStoreOutbox* store_sink_ = nullptr;
  Nanos store_refresh_interval_ = 0;
  bool store_activity_ = false;
  RelaxedCounter flows_installed_;
  std::atomic<uint64_t> flows_endpoint_gone_{0};
  std::map<uint16_t, rtce_xdp_endpoint> synced_endpoints_;  // what the last sync() wrote
  bool synced_once_ = false;
  std::vector<rtce_xdp_vip_key> synced_vips_;  // the exact VIPs the last sync() wrote

  // The idle sweep (touched only by the polling thread, except the counter).
  Nanos idle_timeout_;
  FlowLimits flow_limits_;  // as the workers got them at start (a reload cannot change them)
  Nanos watch_start_;
  struct Sweep {
    bool in_pass = false;
    bool have_cursor = false;
    uint32_t cursor = 0;  // the kernel's batch position (a hash bucket) to resume from
    Nanos next_pass = 0;
    Nanos pass_start = 0;
    uint64_t visited = 0;
    uint64_t expired = 0;
    bool warned = false;
    bool walk = false;  // the kernel refused batch lookup: walk with get_next_key
    bool have_walk_key = false;
    rtce_flow_key walk_key{};  // the next key to visit, not yet visited
    bool refreshing = false;   // this pass also refreshes active flows in the store
    Nanos refresh_since = 0;   // flows with packets since then are refreshed
    Nanos next_refresh = 0;
    std::vector<rtce_flow_key> keys;
    std::vector<rtce_xdp_flow> values;
  } sweep_;
  RelaxedCounter flows_expired_;
};

}  // namespace rtce
