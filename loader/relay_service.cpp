// relay_service.cpp — see relay_service.h.
#include "relay_service.h"

#include <sched.h>
#include <spdlog/spdlog.h>

#include "relay_metrics.h"

namespace rtce {

unsigned default_worker_count() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0)
    return static_cast<unsigned>(CPU_COUNT(&allowed));
  return 1;
}

std::vector<std::unique_ptr<InstanceLock>> take_instance_locks(const RelayConfig& config) {
  std::vector<std::pair<std::string, std::string>> wanted;  // (lock name, what it stands for)
  for (const auto& vip : config.listen)
    wanted.emplace_back(vip_lock_name(vip.to_string()), "VIP " + vip.to_string());
  if (config.mode != "userspace") {
    for (const auto& interface : config.xdp_interfaces)
      wanted.emplace_back(xdp_interface_lock_name(interface), "XDP interface " + interface);
    wanted.emplace_back(xdp_pin_path_lock_name(config.xdp_pin_path), "XDP pin path " + config.xdp_pin_path);
  }
  std::vector<std::unique_ptr<InstanceLock>> locks;
  for (const auto& [name, what] : wanted) {
    auto on_join = [what = what](pid_t joiner) {
      spdlog::warn(
          "another rtcedge-relay (pid {}) joined {} (join_existing): the kernel now splits flows between "
          "the instances, and flows that move lose their packets unless both use the same flow store",
          joiner, what);
    };
    std::unique_ptr<InstanceLock> lock;
    std::optional<pid_t> holder;
    // Twice: a holder that exits between our bind and our question leaves the name free.
    for (int attempt = 0; attempt < 2 && !lock && !holder; ++attempt) {
      lock = InstanceLock::try_acquire(name, on_join);
      if (!lock) holder = InstanceLock::holder(name, config.join_existing);
    }
    if (lock) {
      locks.push_back(std::move(lock));
      continue;
    }
    const std::string by =
        holder ? "another rtcedge-relay (pid " + std::to_string(*holder) + ")" : "another rtcedge-relay";
    if (!config.join_existing)
      throw std::runtime_error(what + " is already served by " + by +
                               " in this network namespace; a second instance would silently take a share "
                               "of its live flows. Stop that one first, or set join_existing "
                               "(--join-existing true) to join it on purpose");
    spdlog::warn(
        "JOINING: {} is already served by {}; join_existing is set, so this instance joins its "
        "SO_REUSEPORT group and the kernel moves a share of the live flows here (they lose their packets "
        "unless both instances use the same flow_store.redis_url)",
        what, by);
  }
  return locks;
}

RelayService::RelayService(const RelayConfig& config)
    : config_(config),
      instance_locks_(take_instance_locks(config)),
      routing_(build_routing_table(config)),
      admin_(config.admin_listen),
      configured_(config) {
  if (config_.workers == 0) config_.workers = default_worker_count();
  if (config_.mode != "userspace") {
    try {
      xdp_ = std::make_unique<XdpDataPath>(config_);
      xdp_->sync(config_, *routing_);
    } catch (const std::exception& e) {
      xdp_.reset();
      if (config_.mode == "xdp") throw;
      spdlog::warn("mode=auto: XDP unavailable ({}); running the userspace relay", e.what());
    }
  }
  if (!config_.flow_store_redis_url.empty()) {
    FlowSync::Options options;
    options.redis = *RedisOptions::from_url(config_.flow_store_redis_url);
    options.cluster = config_.cluster_id;
    options.ttl = std::chrono::duration_cast<Millis>(std::chrono::nanoseconds(config_.flow_store_ttl));
    // One channel per worker, and one for the XDP event thread.
    flow_sync_ = std::make_unique<FlowSync>(options, config_.workers + 1);
    if (xdp_)
      xdp_->attach_flow_store(&flow_sync_->channel(config_.workers), config_.flow_store_refresh_interval);
  }
  UdpWorker::RecoveredHook mirror_into_xdp;
  if (xdp_)
    mirror_into_xdp = [xdp = xdp_.get()](const Flow& f) {
      xdp->install_flow(f.key, f.value.endpoint_id, f.value.endpoint, static_cast<uint8_t>(f.value.role),
                        f.value.role == FlowRole::owner ? &f.value.via : nullptr);
    };
  for (unsigned i = 0; i < config_.workers; i++)
    workers_.push_back(
        std::make_unique<UdpWorker>(i, config_, routing_, flow_sync_.get(), mirror_into_xdp, xdp_.get()));
  endpoint_count_ = config_.endpoints.size();
  peer_cluster_count_ = config_.peer_clusters.size();

  admin_.route("/metrics", [this] {
    return HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", metrics_text()};
  });
  admin_.route("/healthz", [] { return HttpReply{200, "text/plain; charset=utf-8", "ok\n"}; });
  admin_.route("/readyz", [this] {
    if (!ready_) return HttpReply{503, "text/plain; charset=utf-8", "starting\n"};
    // An ingress-only relay of the global relay serves through its peer clusters.
    if (endpoint_count_ == 0 && peer_cluster_count_ == 0)
      return HttpReply{503, "text/plain; charset=utf-8",
                       "no transceiver endpoints or peer clusters configured\n"};
    return HttpReply{200, "text/plain; charset=utf-8", "ready\n"};
  });
  admin_.start();
  // Before the workers take packets: a relay restarted with a registry cache routes its
  // first packets (a flow recovered from the store) with the cached endpoints.
  start_registry();
  for (auto& w : workers_) w->start();
  if (xdp_) {
    xdp_events_ = std::thread([this] {
      while (!stopping_.load()) {
        xdp_->poll_events(100);
        xdp_->expire_idle_flows(monotonic_now());
        if (flow_sync_ && xdp_->take_flow_store_activity()) flow_sync_->notify();
      }
    });
  }
  ready_ = true;

  std::string vips;
  for (const auto& v : config_.listen) vips += (vips.empty() ? "" : ", ") + v.to_string();
  std::string returns;
  for (const auto& w : workers_) returns += (returns.empty() ? "" : ", ") + w->return_address().to_string();
  std::string xdp_modes;
  if (xdp_)
    for (const auto& m : xdp_->attach_modes()) xdp_modes += (xdp_modes.empty() ? "" : ",") + m;
  spdlog::info("relay up: mode={}{} workers={} vips=[{}] return=[{}] endpoints={} cluster={} admin={}",
               mode(), xdp_ ? " xdp=[" + xdp_modes + "]" : std::string(), workers_.size(), vips, returns,
               config_.endpoints.size(), config_.cluster_id,
               config_.admin_listen.ip_string() + ":" + std::to_string(admin_.port()));
}

RelayService::~RelayService() { stop(); }

void RelayService::start_registry() {
  if (config_.registry_redis_url.empty()) return;
  RegistryOptions options;
  options.cluster = config_.cluster_id;
  options.endpoint_ttl = std::chrono::duration_cast<Millis>(std::chrono::nanoseconds(config_.registry_ttl));
  // Called with routing_mutex_ held: the configuration merged with what the registry knows.
  auto apply_merged = [this] {
    RelayConfig next = configured_;
    next.endpoints = merge_endpoints(configured_.endpoints, registry_endpoints_);
    next.peer_clusters = merge_peer_clusters(configured_.peer_clusters, registry_peers_);
    try {
      reload(next);
      size_t routable_peers = 0;
      for (const auto& p : next.peer_clusters) routable_peers += p.address.is_unspecified() ? 0 : 1;
      spdlog::info("registry: routing updated ({} endpoints, {} of {} peer clusters routable)",
                   next.endpoints.size(), routable_peers, next.peer_clusters.size());
    } catch (const std::exception& e) {  // e.g. the key file went bad since the last reload
      spdlog::error("registry: routing not updated, keeping the running one: {}", e.what());
    }
  };
  RegistrySync::Peers peers;
  if (!config_.peers_listen.is_unspecified()) peers.publish = config_.peers_listen;
  peers.learn = learned_clusters(config_.peer_clusters);
  peers.apply = [this, apply_merged](std::map<uint8_t, SocketAddress> learned) {
    std::lock_guard lock(routing_mutex_);
    registry_peers_ = std::move(learned);
    apply_merged();
  };
  registry_ = std::make_unique<RegistrySync>(
      *RedisOptions::from_url(config_.registry_redis_url), options,
      [this, apply_merged](std::vector<EndpointConfig> endpoints) {
        std::lock_guard lock(routing_mutex_);
        registry_endpoints_ = std::move(endpoints);
        apply_merged();
      },
      std::move(peers),
      RegistrySync::Cache{config_.registry_cache_file,
                          std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::nanoseconds(config_.registry_cache_max_age))});
}

std::vector<std::string> RelayService::reconfigure(const RelayConfig& next) {
  std::lock_guard lock(routing_mutex_);
  RelayConfig merged = next;
  merged.endpoints = merge_endpoints(next.endpoints, registry_endpoints_);
  merged.peer_clusters = merge_peer_clusters(next.peer_clusters, registry_peers_);
  auto warnings = reload(merged);  // throws before anything changes
  configured_ = next;
  if (registry_) registry_->learn(learned_clusters(next.peer_clusters));
  return warnings;
}

void RelayService::stop() {
  registry_.reset();  // no routing change after this
  ready_ = false;
  stopping_ = true;
  if (xdp_events_.joinable()) xdp_events_.join();
  for (auto& w : workers_) w->request_stop();
  for (auto& w : workers_) w->join();
  admin_.stop();
}

std::vector<std::string> RelayService::reload(const RelayConfig& next) {
  std::vector<std::string> warnings;
  auto routing = build_routing_table(next);  // throws on a bad key file: nothing changes
  for (const auto& key : relay_restart_only_changes(config_, next))
    warnings.push_back(key + " changed; it takes effect on restart");
  if (xdp_) xdp_->sync(next, *routing);
  for (auto& w : workers_) w->post_routing(routing);
  routing_ = routing;
  endpoint_count_ = next.endpoints.size();
  peer_cluster_count_ = next.peer_clusters.size();
  return warnings;
}

std::string RelayService::metrics_text() const {
  RelayMetricsSources sources;
  // Before the state a reload changes (reload() writes it first): a scrape that sees a
  // reload counted then also sees its endpoints.
  sources.reloads_ok = reloads_ok_.load();
  sources.reloads_failed = reloads_failed_.load();
  sources.workers = &workers_;
  sources.xdp = xdp_.get();
  sources.flow_sync = flow_sync_.get();
  sources.registry = registry_.get();
  sources.flow_capacity = config_.flow_capacity;
  sources.endpoints = endpoint_count_.load();
  {
    std::lock_guard lock(routing_mutex_);
    for (const auto& p : configured_.peer_clusters) sources.peer_clusters.push_back(p.cluster);
  }
  return relay_metrics_text(sources);
}

}  // namespace rtce
