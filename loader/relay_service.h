// relay_service.h — the running relay: its workers, the XDP data path, the flow store,
// the registry of transceivers, the admin endpoints, and reloads. Owns everything a relay
// process has beyond its configuration.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "admin_server.h"
#include "flow_sync.h"
#include "instance_lock.h"
#include "registry_sync.h"
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

  // A re-read configuration (SIGHUP): its endpoints, merged with the registry's (the
  // configured ones win on the same id), replace the routing without dropping flows.
  // Keys that need a restart are reported in the returned warnings. Serialized with
  // registry changes. Throws (nothing changed) on a bad key file.
  std::vector<std::string> reconfigure(const RelayConfig& next);
  size_t endpoint_count() const { return endpoint_count_; }
  void stop();

  std::string metrics_text() const;
  uint16_t admin_port() const { return admin_.port(); }
  const std::vector<std::unique_ptr<UdpWorker>>& workers() const { return workers_; }
  void count_reload(bool ok) { (ok ? reloads_ok_ : reloads_failed_).fetch_add(1); }
  // "xdp" when the XDP program steers traffic (the userspace workers then serve what it
  // passes up), else "userspace".
  const char* mode() const { return xdp_ ? "xdp" : "userspace"; }

 private:
  // Applies a configuration's routing (keys, cluster, endpoints) to the XDP maps and the
  // workers; caller holds routing_mutex_.
  std::vector<std::string> reload(const RelayConfig& next);
  // Endpoints from the shared registry (registry.redis_url) join the configured ones, and
  // peers.clusters entries without an address take the one their cluster publishes there.
  void start_registry();

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
  std::atomic<size_t> peer_cluster_count_{0};
  std::atomic<bool> ready_{false};
  // A registry change and a SIGHUP both rebuild the routing from (configuration,
  // registry), one at a time.
  mutable std::mutex routing_mutex_;
  RelayConfig configured_;                           // the last configuration, as read
  std::vector<EndpointConfig> registry_endpoints_;   // the registry's last set
  std::map<uint8_t, SocketAddress> registry_peers_;  // learned peer cluster relay addresses
  // Declared last, so destroyed first: its thread calls reload().
  std::unique_ptr<RegistrySync> registry_;
};

unsigned default_worker_count();

// One lock per VIP (and, unless mode is userspace, per XDP interface and the pin path).
// A name another relay holds: throws, or with config.join_existing logs a warning, tells
// the holder (which logs too) and goes on without that lock.
std::vector<std::unique_ptr<InstanceLock>> take_instance_locks(const RelayConfig& config);

}  // namespace rtce
