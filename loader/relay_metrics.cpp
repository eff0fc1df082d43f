// relay_metrics.cpp — see relay_metrics.h. Every per-reason family loops over a vocabulary
// table in wire/ (rtce_relay_vocab.h, rtce_hint.h, rtce_xdp.h), so a reason added there is
// exported here without an edit.
#include "relay_metrics.h"

#include <algorithm>
#include <array>

#include "admin_server.h"
#include "registry_sync.h"
#include "sync_metrics.h"

namespace rtce {
namespace {

// An XDP reason's columns of the wire table, as the C++ enums (twin DropReason::count: none).
DropReason xdp_twin(uint32_t reason) { return static_cast<DropReason>(rtce_xdp_reason_twins[reason]); }
rtce_xdp_verdict xdp_verdict(uint32_t reason) { return rtce_xdp_reason_verdicts[reason]; }

// A dropped XDP packet is counted as its userspace twin, and only a dropped one: a packet
// passed up is counted by the userspace relay itself.
#define RTCE_TWIN_IS_A_DROP_(E, name, verdict, twin)                     \
  static_assert((RTCE_XDP_VERDICT_##verdict == RTCE_XDP_VERDICT_DROP) == \
                    (RTCE_RELAY_DROP_##twin != RTCE_RELAY_DROP_NONE),    \
                "wire/rtce_xdp.h: " #name " must name a twin if and only if it drops");
RTCE_XDP_REASONS(RTCE_TWIN_IS_A_DROP_)
#undef RTCE_TWIN_IS_A_DROP_

}  // namespace

std::string relay_metrics_text(const RelayMetricsSources& s) {
  using prometheus::MetricType;
  const auto& workers = *s.workers;
  const XdpDataPath* xdp_path = s.xdp;
  MetricsText m;
  auto sum = [&](auto getter) {
    uint64_t total = 0;
    for (const auto& w : workers) total += getter(w->counters()).get();
    return static_cast<double>(total);
  };
  // The XDP program's counters fold into the same metric names, so dashboards work in
  // either mode; rtcedge_relay_xdp_packets_total below has the program's own detail.
  const XdpCounters x = xdp_path ? xdp_path->read_counters() : XdpCounters{};
  auto xdp = [&](uint32_t reason, size_t dir) { return static_cast<double>(x.packets[reason][dir]); };
  auto& received = m.family("rtcedge_relay_received_packets_total", "Datagrams received, by direction.",
                            MetricType::Counter);
  auto& forwarded = m.family("rtcedge_relay_forwarded_packets_total", "Datagrams forwarded, by direction.",
                             MetricType::Counter);
  auto& bytes = m.family("rtcedge_relay_forwarded_bytes_total",
                         "Payload bytes forwarded (framing excluded), by direction.", MetricType::Counter);
  for (const Direction direction : kDirections) {
    const auto d = static_cast<size_t>(direction);
    std::vector<prometheus::ClientMetric::Label> l = {{"direction", direction_name(direction)}};
    // Received by XDP = forwarded or dropped there; what it passed up the workers count.
    double xdp_forwarded = 0, xdp_dropped = 0, xdp_forwarded_bytes = 0;
    for (uint32_t r = 0; r < RTCE_XDP_REASON_COUNT; r++) {
      if (xdp_verdict(r) == RTCE_XDP_VERDICT_FORWARD) {
        xdp_forwarded += xdp(r, d);
        xdp_forwarded_bytes += static_cast<double>(x.bytes[r][d]);
      } else if (xdp_verdict(r) == RTCE_XDP_VERDICT_DROP) {
        xdp_dropped += xdp(r, d);
      }
    }
    m.add(received,
          sum([d](const RelayCounters& c) -> const RelaxedCounter& { return c.received_packets[d]; }) +
              xdp_forwarded + xdp_dropped,
          l);
    m.add(forwarded, sum([d](const RelayCounters& c) -> const RelaxedCounter& {
                       return c.forwarded_packets[d];
                     }) + xdp_forwarded,
          l);
    m.add(bytes, sum([d](const RelayCounters& c) -> const RelaxedCounter& {
                   return c.forwarded_bytes[d];
                 }) + xdp_forwarded_bytes,
          l);
  }
  auto& dropped =
      m.family("rtcedge_relay_dropped_packets_total", "Datagrams dropped, by reason.", MetricType::Counter);
  std::array<double, static_cast<size_t>(DropReason::count)> dropped_by_xdp{};
  for (uint32_t r = 0; r < RTCE_XDP_REASON_COUNT; r++)
    if (xdp_twin(r) != DropReason::count)
      dropped_by_xdp[static_cast<size_t>(xdp_twin(r))] += xdp(r, 0) + xdp(r, 1);
  for (const DropReason reason : kDropReasons) {
    const auto r = static_cast<size_t>(reason);
    m.add(dropped, sum([r](const RelayCounters& c) -> const RelaxedCounter& {
                     return c.dropped[r];
                   }) + dropped_by_xdp[r],
          {{"reason", drop_reason_name(reason)}});
  }
  auto& hints =
      m.family("rtcedge_relay_hint_failures_total",
               "First packets whose server ufrag was not a valid hint, by reason.", MetricType::Counter);
  // XDP's hint_failures map has HintFailure's layout.
  for (const HintFailure failure : kHintFailures) {
    const auto r = static_cast<size_t>(failure);
    m.add(hints, sum([r](const RelayCounters& c) -> const RelaxedCounter& {
                   return c.hint_failures[r];
                 }) + static_cast<double>(x.hint_failures[r]),
          {{"reason", hint_failure_name(failure)}});
  }
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
            static_cast<double>(xdp_path ? xdp_path->flows_expired() : 0));
  m.add(m.family("rtcedge_relay_flows_evicted_total",
                 "Idle flows replaced by a new flow while the table was full.", MetricType::Counter),
        sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.flows_evicted; }));
  m.add(
      m.family("rtcedge_relay_flow_capacity", "Maximum flows across all workers.", MetricType::Gauge),
      static_cast<double>(
          workers.empty() ? 0 : workers.size() * ((s.flow_capacity + workers.size() - 1) / workers.size())));
  m.add(m.family("rtcedge_relay_endpoints", "Transceiver endpoints in the routing table.", MetricType::Gauge),
        static_cast<double>(s.endpoints));
  m.add(m.family("rtcedge_relay_workers", "Worker threads.", MetricType::Gauge),
        static_cast<double>(workers.size()));
  auto& mode_family =
      m.family("rtcedge_relay_mode", "Data path in use (1 for the active mode).", MetricType::Gauge);
  m.add(mode_family, xdp_path ? 0 : 1, {{"mode", "userspace"}});
  m.add(mode_family, xdp_path ? 1 : 0, {{"mode", "xdp"}});
  if (xdp_path) {
    auto& xdp_packets =
        m.family("rtcedge_relay_xdp_packets_total",
                 "Packets the XDP program handled, by exit reason and direction (pass_* reasons "
                 "went up to the userspace relay).",
                 MetricType::Counter);
    auto& xdp_bytes = m.family("rtcedge_relay_xdp_bytes_total",
                               "Frame bytes the XDP program handled, by exit reason.", MetricType::Counter);
    for (uint32_t r = 0; r < RTCE_XDP_REASON_COUNT; r++)
      for (const Direction direction : kDirections) {
        const auto d = static_cast<size_t>(direction);
        std::vector<prometheus::ClientMetric::Label> l = {{"reason", rtce_xdp_reason_names[r]},
                                                          {"direction", direction_name(direction)}};
        m.add(xdp_packets, static_cast<double>(x.packets[r][d]), l);
        m.add(xdp_bytes, static_cast<double>(x.bytes[r][d]), l);
      }
    auto& role_packets = m.family("rtcedge_relay_xdp_role_packets_total",
                                  "Datagrams the XDP program forwarded for ingress and owner flows of the "
                                  "global relay, by role and direction.",
                                  MetricType::Counter);
    auto& role_bytes = m.family("rtcedge_relay_xdp_role_bytes_total",
                                "Frame bytes (as received) the XDP program forwarded for ingress and owner "
                                "flows, by role and direction.",
                                MetricType::Counter);
    for (const FlowRole role : kFlowRoles) {
      if (role == FlowRole::local) continue;  // every other forwarded datagram
      for (const Direction direction : kDirections) {
        const auto r = static_cast<size_t>(role);
        const auto d = static_cast<size_t>(direction);
        std::vector<prometheus::ClientMetric::Label> l = {{"role", flow_role_name(role)},
                                                          {"direction", direction_name(direction)}};
        m.add(role_packets, static_cast<double>(x.role_packets[r][d]), l);
        m.add(role_bytes, static_cast<double>(x.role_bytes[r][d]), l);
      }
    }
    m.add(m.family("rtcedge_relay_xdp_flow_events_total",
                   "Flow-created events read from the XDP ring buffer.", MetricType::Counter),
          static_cast<double>(xdp_path->events_seen()));
    m.add(m.family("rtcedge_relay_xdp_passed_up_returns_total",
                   "Replies of XDP flows the program passed up (no neighbour entry yet, no route, "
                   "TLVs) that a worker sent to the client.",
                   MetricType::Counter),
          sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.returns_passed_up; }));
  }
  if (!workers.empty() && workers.front()->tcp_counters()) {
    // ICE-TCP (ice_tcp.port): connections, their frames and why they closed.
    auto tcp_sum = [&](auto getter) {
      uint64_t total = 0;
      for (const auto& w : workers) total += getter(*w->tcp_counters()).get();
      return static_cast<double>(total);
    };
    m.add(m.family("rtcedge_relay_tcp_connections_accepted_total", "ICE-TCP connections accepted.",
                   MetricType::Counter),
          tcp_sum([](const TcpCounters& c) -> const RelaxedCounter& { return c.accepted; }));
    m.add(
        m.family("rtcedge_relay_tcp_connections_active", "ICE-TCP connections open now.", MetricType::Gauge),
        tcp_sum([](const TcpCounters& c) -> const RelaxedCounter& { return c.active; }));
    auto& closed = m.family("rtcedge_relay_tcp_closed_total",
                            "ICE-TCP connections closed (or refused), by reason.", MetricType::Counter);
    for (size_t r = 0; r < static_cast<size_t>(TcpCloseReason::count); r++)
      m.add(closed, tcp_sum([r](const TcpCounters& c) -> const RelaxedCounter& { return c.closed[r]; }),
            {{"reason", tcp_close_reason_name(static_cast<TcpCloseReason>(r))}});
    auto& frames = m.family("rtcedge_relay_tcp_frames_total", "RFC 4571 frames carried, by direction.",
                            MetricType::Counter);
    m.add(frames,
          tcp_sum([](const TcpCounters& c) -> const RelaxedCounter& { return c.frames_from_clients; }),
          {{"direction", direction_name(Direction::client_to_transceiver)}});
    m.add(frames, tcp_sum([](const TcpCounters& c) -> const RelaxedCounter& { return c.frames_to_clients; }),
          {{"direction", direction_name(Direction::transceiver_to_client)}});
    m.add(m.family("rtcedge_relay_tcp_reply_overflow_total",
                   "Replies dropped because their connection's send queue was full (a client not reading).",
                   MetricType::Counter),
          tcp_sum([](const TcpCounters& c) -> const RelaxedCounter& { return c.reply_overflow; }));
    m.add(m.family("rtcedge_relay_tcp_reply_no_connection_total",
                   "Replies of a TCP flow whose connection had closed.", MetricType::Counter),
          tcp_sum([](const TcpCounters& c) -> const RelaxedCounter& { return c.reply_no_connection; }));
    auto& calls =
        m.family("rtcedge_relay_tcp_syscalls_total",
                 "recv() calls that returned data and send() calls on ICE-TCP connections (batching).",
                 MetricType::Counter);
    m.add(calls, tcp_sum([](const TcpCounters& c) -> const RelaxedCounter& { return c.reads; }),
          {{"call", "recv"}});
    m.add(calls, tcp_sum([](const TcpCounters& c) -> const RelaxedCounter& { return c.sends; }),
          {{"call", "send"}});
  }
  {
    // The global relay's view: the userspace workers' forwarded traffic by flow role (the
    // XDP program's count in rtcedge_relay_xdp_role_packets_total, not here).
    auto& packets =
        m.family("rtcedge_relay_role_packets_total",
                 "Datagrams forwarded by the userspace workers, by flow role (local, ingress, owner) "
                 "and direction.",
                 MetricType::Counter);
    auto& role_bytes = m.family(
        "rtcedge_relay_role_bytes_total",
        "Payload bytes forwarded by the userspace workers, by flow role and direction.", MetricType::Counter);
    for (const FlowRole role : kFlowRoles)
      for (const Direction direction : kDirections) {
        const auto r = static_cast<size_t>(role);
        const auto d = static_cast<size_t>(direction);
        std::vector<prometheus::ClientMetric::Label> l = {{"role", flow_role_name(role)},
                                                          {"direction", direction_name(direction)}};
        m.add(packets,
              sum([&](const RelayCounters& c) -> const RelaxedCounter& { return c.role_packets[r][d]; }), l);
        m.add(role_bytes,
              sum([&](const RelayCounters& c) -> const RelaxedCounter& { return c.role_bytes[r][d]; }), l);
      }
  }
  if (!s.peer_clusters.empty()) {
    // Ingress role: each peer cluster's relay as this relay sees it. The reply age is the
    // health signal: it grows while flows to the cluster get no answers.
    auto& packets = m.family("rtcedge_relay_peer_packets_total",
                             "Ingress role: datagrams forwarded to (client_to_transceiver) and answered by "
                             "(transceiver_to_client) each peer cluster's relay, by the userspace workers.",
                             MetricType::Counter);
    auto& age = m.family("rtcedge_relay_peer_last_reply_age_seconds",
                         "Ingress role: seconds since the last reply from each peer cluster's relay "
                         "(-1: none since start).",
                         MetricType::Gauge);
    const Nanos now = monotonic_now();
    for (uint8_t cluster : s.peer_clusters) {
      const std::string c = std::to_string(cluster);
      for (const Direction direction : kDirections)
        m.add(packets, sum([&](const RelayCounters& rc) -> const RelaxedCounter& {
                return rc.peer_packets[cluster][static_cast<size_t>(direction)];
              }),
              {{"cluster", c}, {"direction", direction_name(direction)}});
      uint64_t last = 0;
      for (const auto& w : workers) last = std::max(last, w->counters().peer_last_reply[cluster].get());
      m.add(age, last ? static_cast<double>(now - static_cast<Nanos>(last)) / 1e9 : -1.0, {{"cluster", c}});
    }
  }
  {
    // UDP GSO towards transceivers (the gso key): how well batches coalesce, what padding
    // costs, and whether the kernel refused it.
    m.add(m.family("rtcedge_relay_gso_messages_total",
                   "UDP GSO messages sent to transceivers (one system call's worth of equal-size "
                   "datagrams for one endpoint).",
                   MetricType::Counter),
          sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.gso_messages; }));
    m.add(m.family("rtcedge_relay_gso_datagrams_total", "Datagrams sent to transceivers inside GSO messages.",
                   MetricType::Counter),
          sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.gso_datagrams; }));
    m.add(m.family("rtcedge_relay_gso_padding_bytes_total",
                   "Bytes of PROXY v2 NOOP padding (size classes) in the datagrams sent to transceivers "
                   "inside GSO messages; a datagram that goes alone leaves unpadded.",
                   MetricType::Counter),
          sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.gso_padding_bytes; }));
    m.add(m.family("rtcedge_relay_gso_fallbacks_total",
                   "GSO messages the kernel refused, sent again one datagram per message (EIO/EINVAL "
                   "also turn GSO off for that worker).",
                   MetricType::Counter),
          sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.gso_fallbacks; }));
  }
  m.add(m.family("rtcedge_relay_flows_endpoint_gone_total",
                 "Flows removed because their transceiver endpoint left the routing table.",
                 MetricType::Counter),
        sum([](const RelayCounters& c) -> const RelaxedCounter& { return c.flows_endpoint_gone; }) +
            static_cast<double>(xdp_path ? xdp_path->flows_endpoint_gone() : 0));
  if (const RegistrySync* registry = s.registry) {
    m.add(m.family("rtcedge_relay_registry_up", "1 while the registry (Redis) answers the relay's re-lists.",
                   MetricType::Gauge),
          registry->up() ? 1 : 0);
    add_sync_events(m, "rtcedge_relay_registry_events_total", "Registry", registry->counters());
  }
  if (FlowSync* flow_sync = s.flow_sync) {
    const FlowSyncCounters& fs = flow_sync->counters();
    const SyncCounters& sc = flow_sync->store_counters();
    m.add(m.family("rtcedge_relay_flow_store_up", "1 while the flow store (Redis) is connected.",
                   MetricType::Gauge),
          flow_sync->connected() ? 1 : 0);
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
    // One channel per worker and one for the XDP event thread.
    for (size_t i = 0; i <= workers.size(); i++)
      requests_dropped += static_cast<double>(flow_sync->channel(i).requests_dropped.get() +
                                              flow_sync->channel(i).replies_dropped.get());
    add_sync_events(m, "rtcedge_relay_flow_store_events_total", "Flow store", sc, requests_dropped);
    if (xdp_path)
      m.add(m.family("rtcedge_relay_xdp_flows_installed_total",
                     "Flows recovered from the flow store and installed into the XDP flows map.",
                     MetricType::Counter),
            static_cast<double>(xdp_path->flows_installed()));
  }
  auto& reloads =
      m.family("rtcedge_relay_config_reloads_total", "SIGHUP reloads, by result.", MetricType::Counter);
  m.add(reloads, static_cast<double>(s.reloads_ok), {{"result", "ok"}});
  m.add(reloads, static_cast<double>(s.reloads_failed), {{"result", "error"}});
  return m.serialize();
}

}  // namespace rtce
