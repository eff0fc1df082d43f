// xdp_data_path.h — the XDP data path's control plane: loads bpf/rtce_xdp.bpf.c through its
// libbpf skeleton, pins its maps and per-interface links, swaps the program atomically on
// restart, keeps the maps in step with the configuration, drains the flow ring buffer and
// reads the per-CPU counters.
//
// Pins (under xdp.pin_path, default /sys/fs/bpf/rtcedge):
//   maps/<name>     flows, endpoints, vips, config, hint_keys, counters, hint_failures, events
//   links/<ifname>  the XDP link of each interface
// A restarted loader reuses the pinned maps (no flow is lost) and replaces the program
// behind each pinned link with bpf_link_update (no packet meets a detached interface):
// while the loader is down, the program keeps forwarding with the maps it has.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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
  int poll_events(int timeout_ms);
  XdpCounters read_counters() const;
  uint64_t events_seen() const { return events_seen_; }
  const std::vector<std::string>& attach_modes() const { return attach_modes_; }

  // Removes the links and every pin under pin_path (the `detach` command).
  static void detach(const std::string& pin_path, const std::vector<std::string>& interfaces);

 private:
  static int on_event(void* ctx, void* data, size_t size);
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
};

}  // namespace rtce
