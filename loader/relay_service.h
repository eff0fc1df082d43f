// relay_service.h — the running userspace relay: its workers, the admin endpoints, and
// reloads. Owns everything a relay process has beyond its configuration.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "admin_server.h"
#include "flow_sync.h"
#include "instance_lock.h"
#include "relay_config.h"
#include "udp_worker.h"
#include "xdp_data_path.h"

namespace rtce {

class RelayService {
 public:
  // Opens every socket and the admin server; throws with a clear message on failure,
  // and refuses (throws) when another relay already serves one of the VIPs, XDP
  // interfaces or the pin path in this network namespace, unless config.join_existing.
  explicit RelayService(const RelayConfig& config);
  ~RelayService();

  // Applies a new configuration's routing (keys, cluster, endpoints) without dropping
  // flows. Keys that need a restart are reported in the returned warnings.
  std::vector<std::string> reload(const RelayConfig& next);
  void stop();

  std::string metrics_text() const;
  uint16_t admin_port() const { return admin_.port(); }
  const std::vector<std::unique_ptr<UdpWorker>>& workers() const { return workers_; }
  void count_reload(bool ok) { (ok ? reloads_ok_ : reloads_failed_).fetch_add(1); }
  // "xdp" when the XDP program steers traffic (the userspace workers then serve what it
  // passes up), else "userspace".
  const char* mode() const { return xdp_ ? "xdp" : "userspace"; }

 private:
  RelayConfig config_;
  // Taken before any socket is opened; released last (declared first).
  std::vector<std::unique_ptr<InstanceLock>> instance_locks_;
  std::shared_ptr<const RoutingTable> routing_;
  std::vector<std::unique_ptr<UdpWorker>> workers_;
  // Declared after workers_ so it is destroyed first: its thread wakes workers.
  std::unique_ptr<FlowSync> flow_sync_;
  std::unique_ptr<XdpDataPath> xdp_;
  std::thread xdp_events_;
  std::atomic<bool> stopping_{false};
  AdminServer admin_;
  std::atomic<uint64_t> reloads_ok_{0};
  std::atomic<uint64_t> reloads_failed_{0};
  std::atomic<size_t> endpoint_count_{0};
  std::atomic<bool> ready_{false};
};

unsigned default_worker_count();

// One lock per VIP (and, unless mode is userspace, per XDP interface and the pin path).
// A name another relay holds: throws, or with config.join_existing logs a warning, tells
// the holder (which logs too) and goes on without that lock.
std::vector<std::unique_ptr<InstanceLock>> take_instance_locks(const RelayConfig& config);

}  // namespace rtce
