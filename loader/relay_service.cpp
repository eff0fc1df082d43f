// relay_service.cpp — see relay_service.h.
#include "relay_service.h"

#include <sched.h>
#include <spdlog/spdlog.h>

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
      xdp->install_flow(f.key, f.value.endpoint_id, f.value.endpoint);
    };
  for (unsigned i = 0; i < config_.workers; i++)
    workers_.push_back(std::make_unique<UdpWorker>(i, config_, routing_, flow_sync_.get(), mirror_into_xdp));
  endpoint_count_ = config_.endpoints.size();

  admin_.route("/metrics", [this] {
    return HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", metrics_text()};
  });
  admin_.route("/healthz", [] { return HttpReply{200, "text/plain; charset=utf-8", "ok\n"}; });
  admin_.route("/readyz", [this] {
    if (!ready_) return HttpReply{503, "text/plain; charset=utf-8", "starting\n"};
    if (endpoint_count_ == 0)
      return HttpReply{503, "text/plain; charset=utf-8", "no transceiver endpoints configured\n"};
    return HttpReply{200, "text/plain; charset=utf-8", "ready\n"};
  });
  admin_.start();
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
  start_registry();

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
  registry_ = std::make_unique<RegistrySync>(
      *RedisOptions::from_url(config_.registry_redis_url), options,
      [this](std::vector<EndpointConfig> endpoints) {
        std::lock_guard lock(routing_mutex_);
        registry_endpoints_ = std::move(endpoints);
        RelayConfig next = configured_;
        next.endpoints = merge_endpoints(configured_.endpoints, registry_endpoints_);
        try {
          reload(next);
          spdlog::info("registry: routing updated ({} endpoints)", next.endpoints.size());
        } catch (const std::exception& e) {  // e.g. the key file went bad since the last reload
          spdlog::error("registry: routing not updated, keeping the running one: {}", e.what());
        }
      });
}

std::vector<std::string> RelayService::reconfigure(const RelayConfig& next) {
  std::lock_guard lock(routing_mutex_);
  RelayConfig merged = next;
  merged.endpoints = merge_endpoints(next.endpoints, registry_endpoints_);
  auto warnings = reload(merged);  // throws before anything changes
  configured_ = next;
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
  return warnings;
}

std::string RelayService::metrics_text() const {
  using prometheus::MetricType;
  // Read the reload counters before the state a reload changes: a scrape that sees a reload
  // counted then also sees its endpoints (reload() writes them first).
  const uint64_t reloads_ok = reloads_ok_.load();
  const uint64_t reloads_failed = reloads_failed_.load();
  MetricsText m;
  auto sum = [&](auto getter) {
    uint64_t total = 0;
    for (const auto& w : workers_) total += getter(w->counters()).get();
    return static_cast<double>(total);
  };
  // The XDP program's counters fold into the same metric names, so dashboards work in
  // either mode; rtcedge_relay_xdp_packets_total below has the program's own detail.
  const XdpCounters x = xdp_ ? xdp_->read_counters() : XdpCounters{};
  auto xdp = [&](rtce_xdp_reason reason, size_t dir) { return static_cast<double>(x.packets[reason][dir]); };
  auto& received = m.family("rtcedge_relay_received_packets_total", "Datagrams received, by direction.",
                            MetricType::Counter);
  auto& forwarded = m.family("rtcedge_relay_forwarded_packets_total", "Datagrams forwarded, by direction.",
                             MetricType::Counter);
  auto& bytes = m.family("rtcedge_relay_forwarded_bytes_total",
                         "Payload bytes forwarded (framing excluded), by direction.", MetricType::Counter);
  for (size_t d = 0; d < static_cast<size_t>(Direction::count); d++) {
    std::vector<prometheus::ClientMetric::Label> l = {
        {"direction", direction_name(static_cast<Direction>(d))}};
    const double xdp_forwarded = xdp(RTCE_XDP_FORWARDED, d) + xdp(RTCE_XDP_FORWARDED_NEW_FLOW, d);
    const double xdp_dropped = xdp(RTCE_XDP_HINT_REJECTED, d) + xdp(RTCE_XDP_RETURN_MALFORMED, d) +
                               xdp(RTCE_XDP_RETURN_NO_FLOW, d) + xdp(RTCE_XDP_RETURN_WRONG_SENDER, d) +
                               xdp(RTCE_XDP_HINT_FLOW_LIMIT, d) + xdp(RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT, d);
    m.add(received,
          sum([d](const RelayCounters& c) -> const RelaxedCounter& { return c.received_packets[d]; }) +
              xdp_forwarded + xdp_dropped,
          l);
    m.add(forwarded, sum([d](const RelayCounters& c) -> const RelaxedCounter& {
                       return c.forwarded_packets[d];
                     }) + xdp_forwarded,
          l);
    m.add(bytes,
          sum([d](const RelayCounters& c) -> const RelaxedCounter& { return c.forwarded_bytes[d]; }) +
              static_cast<double>(x.bytes[RTCE_XDP_FORWARDED][d] + x.bytes[RTCE_XDP_FORWARDED_NEW_FLOW][d]),
          l);
  }
  auto& dropped =
      m.family("rtcedge_relay_dropped_packets_total", "Datagrams dropped, by reason.", MetricType::Counter);
  for (size_t r = 0; r < static_cast<size_t>(DropReason::count); r++) {
    double from_xdp = 0;
    const auto reason = static_cast<DropReason>(r);
    const rtce_xdp_reason twin = reason == DropReason::hint_rejected         ? RTCE_XDP_HINT_REJECTED
                                 : reason == DropReason::return_malformed    ? RTCE_XDP_RETURN_MALFORMED
                                 : reason == DropReason::return_no_flow      ? RTCE_XDP_RETURN_NO_FLOW
                                 : reason == DropReason::return_wrong_sender ? RTCE_XDP_RETURN_WRONG_SENDER
                                 : reason == DropReason::hint_flow_limit     ? RTCE_XDP_HINT_FLOW_LIMIT
                                 : reason == DropReason::source_prefix_flow_limit
                                     ? RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT
                                     : RTCE_XDP_REASON_COUNT;
    if (twin != RTCE_XDP_REASON_COUNT) from_xdp = xdp(twin, 0) + xdp(twin, 1);
    m.add(dropped,
          sum([r](const RelayCounters& c) -> const RelaxedCounter& { return c.dropped[r]; }) + from_xdp,
          {{"reason", drop_reason_name(reason)}});
  }
  auto& hints =
      m.family("rtcedge_relay_hint_failures_total",
               "First packets whose server ufrag was not a valid hint, by reason.", MetricType::Counter);
  // XDP's hint_failures map is indexed by rtce_hint_result (bad_length = 1 ...) and then
  // wrong_cluster: the HintFailure order shifted by one.
  for (size_t r = 0; r < static_cast<size_t>(HintFailure::count); r++)
    m.add(hints, sum([r](const RelayCounters& c) -> const RelaxedCounter& {
                   return c.hint_failures[r];
                 }) + static_cast<double>(x.hint_failures[r + 1]),
          {{"reason", hint_failure_name(static_cast<HintFailure>(r))}});
  m.add(m.family("rtcedge_relay_flows_active", "Flows in the tables now.", MetricType::Gauge),
        sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.flows_active; }) +
            static_cast<double>(x.flows));
  m.add(
      m.family("rtcedge_relay_flows_created_total", "Flows created from a valid hint.", MetricType::Counter),
      sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.flows_created; }) +
          xdp(RTCE_XDP_FORWARDED_NEW_FLOW, 0));
  m.add(m.family("rtcedge_relay_flows_expired_total",
                 "Flows removed after flows.idle_timeout without client packets.", MetricType::Counter),
        sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.flows_expired; }) +
            static_cast<double>(xdp_ ? xdp_->flows_expired() : 0));
  m.add(m.family("rtcedge_relay_flows_evicted_total",
                 "Idle flows replaced by a new flow while the table was full.", MetricType::Counter),
        sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.flows_evicted; }));
  m.add(m.family("rtcedge_relay_flow_capacity", "Maximum flows across all workers.", MetricType::Gauge),
        static_cast<double>(workers_.empty()
                                ? 0
                                : workers_.size() *
                                      ((config_.flow_capacity + workers_.size() - 1) / workers_.size())));
  m.add(m.family("rtcedge_relay_endpoints", "Transceiver endpoints in the routing table.", MetricType::Gauge),
        static_cast<double>(endpoint_count_.load()));
  m.add(m.family("rtcedge_relay_workers", "Worker threads.", MetricType::Gauge),
        static_cast<double>(workers_.size()));
  auto& mode_family =
      m.family("rtcedge_relay_mode", "Data path in use (1 for the active mode).", MetricType::Gauge);
  m.add(mode_family, xdp_ ? 0 : 1, {{"mode", "userspace"}});
  m.add(mode_family, xdp_ ? 1 : 0, {{"mode", "xdp"}});
  if (xdp_) {
    auto& xdp_packets =
        m.family("rtcedge_relay_xdp_packets_total",
                 "Packets the XDP program handled, by exit reason and direction (pass_* reasons "
                 "went up to the userspace relay).",
                 MetricType::Counter);
    auto& xdp_bytes = m.family("rtcedge_relay_xdp_bytes_total",
                               "Frame bytes the XDP program handled, by exit reason.", MetricType::Counter);
    for (uint32_t r = 0; r < RTCE_XDP_REASON_COUNT; r++)
      for (uint32_t d = 0; d < RTCE_XDP_DIR_COUNT; d++) {
        std::vector<prometheus::ClientMetric::Label> l = {
            {"reason", rtce_xdp_reason_names[r]},
            {"direction", direction_name(d == RTCE_XDP_DIR_TO_CLIENT ? Direction::transceiver_to_client
                                                                     : Direction::client_to_transceiver)}};
        m.add(xdp_packets, static_cast<double>(x.packets[r][d]), l);
        m.add(xdp_bytes, static_cast<double>(x.bytes[r][d]), l);
      }
    m.add(m.family("rtcedge_relay_xdp_flow_events_total",
                   "Flow-created events read from the XDP ring buffer.", MetricType::Counter),
          static_cast<double>(xdp_->events_seen()));
  }
  m.add(m.family("rtcedge_relay_flows_endpoint_gone_total",
                 "Flows removed because their transceiver endpoint left the routing table.",
                 MetricType::Counter),
        sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.flows_endpoint_gone; }) +
            static_cast<double>(xdp_ ? xdp_->flows_endpoint_gone() : 0));
  if (flow_sync_) {
    const FlowSyncCounters& fs = flow_sync_->counters();
    const SyncCounters& sc = flow_sync_->store_counters();
    m.add(m.family("rtcedge_relay_flow_store_up", "1 while the flow store (Redis) is connected.",
                   MetricType::Gauge),
          flow_sync_->connected() ? 1 : 0);
    m.add(m.family("rtcedge_relay_flows_recovered_total",
                   "Flows installed from a flow store lookup (a flow this relay had not seen).",
                   MetricType::Counter),
          sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.flows_recovered; }));
    m.add(m.family("rtcedge_relay_flow_store_puts_total",
                   "Flows written to the flow store (new and refreshed), as handed to Redis.",
                   MetricType::Counter),
          static_cast<double>(fs.puts.get()));
    auto& lookups = m.family("rtcedge_relay_flow_store_lookups_total", "Flow store lookups, by result.",
                             MetricType::Counter);
    m.add(lookups, static_cast<double>(fs.lookups_found.get()), {{"result", "found"}});
    m.add(lookups, static_cast<double>(fs.lookups_missing.get()), {{"result", "missing"}});
    m.add(lookups, static_cast<double>(fs.lookups_failed.get()), {{"result", "failed"}});
    m.add(m.family("rtcedge_relay_flow_store_waited_packets_total",
                   "Packets of unknown flows that waited for a flow store lookup.", MetricType::Counter),
          sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.packets_waited; }));
    double requests_dropped = 0;
    for (size_t i = 0; i <= workers_.size(); i++)
      requests_dropped += static_cast<double>(flow_sync_->channel(i).requests_dropped.get() +
                                              flow_sync_->channel(i).replies_dropped.get());
    auto& store = m.family("rtcedge_relay_flow_store_events_total",
                           "Flow store client events: errors (error replies, failed connects, commands "
                           "lost to a disconnect), timeouts, reconnects, and requests dropped because "
                           "a queue was full.",
                           MetricType::Counter);
    m.add(store, static_cast<double>(sc.errors.get()), {{"event", "error"}});
    m.add(store, static_cast<double>(sc.timeouts.get()), {{"event", "timeout"}});
    m.add(store, static_cast<double>(sc.reconnects.get()), {{"event", "reconnect"}});
    m.add(store, static_cast<double>(sc.dropped.get()) + requests_dropped, {{"event", "dropped"}});
    if (xdp_)
      m.add(m.family("rtcedge_relay_xdp_flows_installed_total",
                     "Flows recovered from the flow store and installed into the XDP flows map.",
                     MetricType::Counter),
            static_cast<double>(xdp_->flows_installed()));
  }
  auto& reloads =
      m.family("rtcedge_relay_config_reloads_total", "SIGHUP reloads, by result.", MetricType::Counter);
  m.add(reloads, static_cast<double>(reloads_ok), {{"result", "ok"}});
  m.add(reloads, static_cast<double>(reloads_failed), {{"result", "error"}});
  return m.serialize();
}

}  // namespace rtce
