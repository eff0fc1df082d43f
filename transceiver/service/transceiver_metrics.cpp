// transceiver_metrics.cpp — see transceiver_metrics.h. The per-reason families loop over the
// vocabularies in worker_metrics.h, so a reason added there is exported without an edit.
#include "transceiver_metrics.h"

#include <limits>

#include "admin_server.h"
#include "registry_agent.h"
#include "sync_metrics.h"

namespace rtce {

std::string transceiver_metrics_text(const TransceiverMetricsSources& s) {
  const auto& metrics = *s.metrics;
  MetricsText m;
  using prometheus::MetricType;
  auto sum = [&](auto getter) {
    double total = 0;
    for (auto& w : metrics) total += static_cast<double>(getter(*w));
    return total;
  };
  auto per_worker_counter = [&](const std::string& name, const std::string& help, auto getter) {
    auto& f = m.family(name, help, MetricType::Counter);
    m.add(f, sum(getter));
  };
  // A counter family over a vocabulary: getter(w)[i] is counted under {key="labels[i]"}.
  auto per_label = [&](const std::string& name, const std::string& help, const char* key, const auto& labels,
                       auto getter) {
    auto& f = m.family(name, help, MetricType::Counter);
    for (size_t i = 0; i < std::size(labels); ++i)
      m.add(f, sum([&getter, i](const WorkerMetrics& w) { return getter(w)[i].get(); }), {{key, labels[i]}});
  };
  auto& active =
      m.family("rtcedge_transceiver_sessions_active", "live sessions per worker endpoint", MetricType::Gauge);
  for (auto& w : *s.workers)
    m.add(active, w->metrics().sessions_active.load(std::memory_order_relaxed),
          {{"endpoint", std::to_string(w->endpoint_id())}});
  auto& active_total =
      m.family("rtcedge_transceiver_sessions_active_total", "live sessions, all workers", MetricType::Gauge);
  m.add(active_total,
        sum([](const WorkerMetrics& w) { return w.sessions_active.load(std::memory_order_relaxed); }));
  per_worker_counter("rtcedge_transceiver_sessions_created_total", "sessions placed on a worker",
                     [](const WorkerMetrics& w) { return w.sessions_created.get(); });
  per_worker_counter("rtcedge_transceiver_worker_wakeups_total",
                     "times a media worker woke (its deadline timer or, when idle, its socket)",
                     [](const WorkerMetrics& w) { return w.wakeups.get(); });
  per_worker_counter("rtcedge_transceiver_worker_session_visits_total",
                     "sessions a media worker visited because one of their deadlines was due",
                     [](const WorkerMetrics& w) { return w.session_visits.get(); });
  per_worker_counter("rtcedge_transceiver_worker_busy_microseconds_total",
                     "time a media worker spent awake, in microseconds",
                     [](const WorkerMetrics& w) { return w.busy_us.get(); });
  per_worker_counter("rtcedge_transceiver_sessions_connected_total",
                     "sessions whose DTLS handshake completed",
                     [](const WorkerMetrics& w) { return w.sessions_connected.get(); });
  auto& ended =
      m.family("rtcedge_transceiver_sessions_ended_total", "sessions ended, by reason", MetricType::Counter);
  for (const SessionEnd end : kSessionEnds) {
    const auto r = static_cast<size_t>(end);
    m.add(ended, sum([r](const WorkerMetrics& w) { return w.sessions_ended[r].get(); }),
          {{"reason", session_end_name(end)}});
  }
  auto& rejected = m.family("rtcedge_transceiver_sessions_rejected_total",
                            "session requests refused, by reason", MetricType::Counter);
  m.add(rejected, static_cast<double>(s.rejected_rate_limited), {{"reason", "rate_limited"}});
  m.add(rejected, static_cast<double>(s.rejected_capacity), {{"reason", "capacity"}});
  m.add(rejected, static_cast<double>(s.rejected_bad_sdp), {{"reason", "bad_sdp"}});
  m.add(rejected, static_cast<double>(s.rejected_unauthorized), {{"reason", "unauthorized"}});
  if (s.ingress_chosen) {
    auto& ingress = m.family("rtcedge_transceiver_ingress_selected_total",
                             "sessions placed in relay mode, by how the answer's ingress VIPs were chosen: a "
                             "front-door region header, the client's address, or this cluster's relay.vips",
                             MetricType::Counter);
    for (const IngressChoice c : kIngressChoices)
      m.add(ingress, static_cast<double>((*s.ingress_chosen)[static_cast<size_t>(c)]),
            {{"how", ingress_choice_name(c)}});
  }
  auto& drops = m.family("rtcedge_transceiver_datagrams_dropped_total", "datagrams dropped, by reason",
                         MetricType::Counter);
  for (const DatagramDrop drop : kDatagramDrops) {
    const auto r = static_cast<size_t>(drop);
    m.add(drops, sum([r](const WorkerMetrics& w) { return w.drops[r].get(); }),
          {{"reason", datagram_drop_name(drop)}});
  }
  auto& dir_packets =
      m.family("rtcedge_transceiver_datagrams_total", "UDP datagrams by direction", MetricType::Counter);
  m.add(dir_packets, sum([](const WorkerMetrics& w) { return w.datagrams_in.get(); }), {{"direction", "in"}});
  m.add(dir_packets, sum([](const WorkerMetrics& w) { return w.datagrams_out.get(); }),
        {{"direction", "out"}});
  auto& dir_bytes =
      m.family("rtcedge_transceiver_bytes_total", "UDP payload bytes by direction", MetricType::Counter);
  m.add(dir_bytes, sum([](const WorkerMetrics& w) { return w.bytes_in.get(); }), {{"direction", "in"}});
  m.add(dir_bytes, sum([](const WorkerMetrics& w) { return w.bytes_out.get(); }), {{"direction", "out"}});
  auto& rtp = m.family("rtcedge_transceiver_rtp_packets_total", "RTP and RTCP packets by kind and direction",
                       MetricType::Counter);
  m.add(rtp, sum([](const WorkerMetrics& w) { return w.rtp_in.get(); }),
        {{"kind", "rtp"}, {"direction", "in"}});
  m.add(rtp, sum([](const WorkerMetrics& w) { return w.rtp_out.get(); }),
        {{"kind", "rtp"}, {"direction", "out"}});
  m.add(rtp, sum([](const WorkerMetrics& w) { return w.rtcp_in.get(); }),
        {{"kind", "rtcp"}, {"direction", "in"}});
  m.add(rtp, sum([](const WorkerMetrics& w) { return w.rtcp_out.get(); }),
        {{"kind", "rtcp"}, {"direction", "out"}});
  auto& jitter = m.family("rtcedge_transceiver_jitter_buffer_frames_total", "jitter buffer outcomes",
                          MetricType::Counter);
  m.add(jitter, sum([](const WorkerMetrics& w) { return w.jitter_lost.get(); }), {{"outcome", "lost"}});
  m.add(jitter, sum([](const WorkerMetrics& w) { return w.jitter_fec.get(); }),
        {{"outcome", "fec_recovered"}});
  m.add(jitter, sum([](const WorkerMetrics& w) { return w.jitter_plc.get(); }), {{"outcome", "concealed"}});
  m.add(jitter, sum([](const WorkerMetrics& w) { return w.jitter_late.get(); }), {{"outcome", "late"}});
  m.add(jitter, sum([](const WorkerMetrics& w) { return w.jitter_reordered.get(); }),
        {{"outcome", "reordered"}});
  per_worker_counter("rtcedge_transceiver_opus_decode_errors_total", "Opus packets that failed to decode",
                     [](const WorkerMetrics& w) { return w.opus_decode_errors.get(); });
  per_worker_counter("rtcedge_transceiver_output_frames_dropped_total",
                     "backend audio frames dropped (output queue full)",
                     [](const WorkerMetrics& w) { return w.output_frames_dropped.get(); });
  auto& backend = m.family("rtcedge_transceiver_backend_frames_total", "audio frames to and from backends",
                           MetricType::Counter);
  m.add(backend, sum([](const WorkerMetrics& w) { return w.backend.frames_sent.get(); }),
        {{"direction", "to_backend"}});
  m.add(backend, sum([](const WorkerMetrics& w) { return w.backend.frames_received.get(); }),
        {{"direction", "from_backend"}});
  auto& backend_drops = m.family("rtcedge_transceiver_backend_frames_dropped_total",
                                 "frames dropped on bounded backend queues", MetricType::Counter);
  m.add(backend_drops, sum([](const WorkerMetrics& w) { return w.backend.frames_dropped_outbound.get(); }),
        {{"direction", "to_backend"}});
  m.add(backend_drops, sum([](const WorkerMetrics& w) { return w.backend.frames_dropped_inbound.get(); }),
        {{"direction", "from_backend"}});
  per_worker_counter("rtcedge_transceiver_backend_connect_failures_total", "backend connections that failed",
                     [](const WorkerMetrics& w) { return w.backend.connect_failures.get(); });
  per_worker_counter("rtcedge_transceiver_backend_protocol_errors_total", "malformed backend messages",
                     [](const WorkerMetrics& w) { return w.backend.protocol_errors.get(); });
  per_worker_counter("rtcedge_transceiver_stun_error_replies_suppressed_total",
                     "STUN error replies left unsent by sessions.stun_error_replies_per_second",
                     [](const WorkerMetrics& w) { return w.stun_error_replies_suppressed.get(); });
  per_worker_counter("rtcedge_transceiver_ice_triggered_checks_total",
                     "Binding requests sent to clients on their first valid pair (one per pair)",
                     [](const WorkerMetrics& w) { return w.ice_triggered_checks.get(); });
  per_worker_counter("rtcedge_transceiver_path_switches_total",
                     "media moved to a new client address after it proved itself",
                     [](const WorkerMetrics& w) { return w.path_switches.get(); });
  per_worker_counter("rtcedge_transceiver_data_channels_opened_total",
                     "data channels clients opened (DCEP, RFC 8832)",
                     [](const WorkerMetrics& w) { return w.data_channels_opened.get(); });
  per_worker_counter("rtcedge_transceiver_data_channel_messages_received_total",
                     "data-channel messages received from clients",
                     [](const WorkerMetrics& w) { return w.data_channel_messages_in.get(); });
  per_worker_counter("rtcedge_transceiver_data_channel_messages_sent_total",
                     "data-channel messages sent to clients",
                     [](const WorkerMetrics& w) { return w.data_channel_messages_out.get(); });
  per_worker_counter("rtcedge_transceiver_data_channel_failures_total",
                     "SCTP associations that failed while the session's audio went on",
                     [](const WorkerMetrics& w) { return w.data_channel_failures.get(); });
  per_label(
      "rtcedge_transceiver_data_channel_dropped_total",
      "inbound SCTP packets and data-channel messages dropped, by reason", "reason", kDataChannelDropLabels,
      [](const WorkerMetrics& w) -> const auto& { return w.data_channel.drops; });
  per_label(
      "rtcedge_transceiver_data_channel_sends_refused_total",
      "data-channel sends and channel opens refused, by reason", "reason", kDataChannelSendRefusalLabels,
      [](const WorkerMetrics& w) -> const auto& { return w.data_channel.send_refused; });
  per_label(
      "rtcedge_transceiver_sctp_packets_malformed_total",
      "SCTP packets the pre-check refused (data_channel_dropped reason malformed_packet), by what "
      "was wrong",
      "reason", kSctpPacketErrorLabels,
      [](const WorkerMetrics& w) -> const auto& { return w.data_channel.packet_errors; });
  per_label(
      "rtcedge_transceiver_realtime_events_dropped_total",
      "oai-events messages and backend events the event layer did not handle, by reason", "reason",
      kRealtimeDropNames, [](const WorkerMetrics& w) -> const auto& { return w.realtime_drops; });
  per_worker_counter("rtcedge_transceiver_sidebands_attached_total",
                     "sideband WebSockets attached to Realtime calls (GET /v1/realtime?call_id=)",
                     [](const WorkerMetrics& w) { return w.sidebands_attached.get(); });
  per_worker_counter("rtcedge_transceiver_sidebands_refused_total",
                     "sideband requests for a live call refused: it had realtime.sideband.max_per_call",
                     [](const WorkerMetrics& w) { return w.sidebands_refused.get(); });
  per_worker_counter("rtcedge_transceiver_sideband_messages_in_total", "messages from sidebands",
                     [](const WorkerMetrics& w) { return w.sideband_messages_in.get(); });
  per_worker_counter("rtcedge_transceiver_sideband_messages_out_total", "events sent to sidebands",
                     [](const WorkerMetrics& w) { return w.sideband_messages_out.get(); });
  per_worker_counter("rtcedge_transceiver_sideband_missed_events_total",
                     "events of calls whose sidebands had all gone (kept, bounded, for the next one)",
                     [](const WorkerMetrics& w) { return w.sideband_missed_events.get(); });
  per_worker_counter(
      "rtcedge_transceiver_tool_calls_timed_out_total",
      "function calls the edge answered with tool_call_timed_out: their sideband did not come back "
      "within realtime.sideband.tool_timeout",
      [](const WorkerMetrics& w) { return w.tool_calls_timed_out.get(); });
  per_worker_counter("rtcedge_transceiver_relay_hop_moves_total",
                     "sessions whose relay hop changed (a relay restarted or re-hashed the flow)",
                     [](const WorkerMetrics& w) { return w.relay_hop_moves.get(); });

  // Setup time histogram (offer received -> DTLS connected).
  auto& setup = m.family("rtcedge_transceiver_session_setup_seconds", "offer received to DTLS connected",
                         MetricType::Histogram);
  prometheus::ClientMetric hist;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= kSetupBuckets.size(); ++i) {
    cumulative +=
        static_cast<uint64_t>(sum([i](const WorkerMetrics& w) { return w.setup_buckets[i].get(); }));
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < kSetupBuckets.size() ? kSetupBuckets[i] : std::numeric_limits<double>::infinity();
    hist.histogram.bucket.push_back(b);
  }
  hist.histogram.sample_count = cumulative;
  hist.histogram.sample_sum = sum([](const WorkerMetrics& w) { return w.setup_sum_us.get(); }) / 1e6;
  setup.metric.push_back(hist);
  auto& gap = m.family("rtcedge_transceiver_path_switch_gap_seconds",
                       "media gap of a path switch: last packet on the old path to the first on the new",
                       MetricType::Histogram);
  prometheus::ClientMetric gap_hist;
  uint64_t gap_cumulative = 0;
  for (size_t i = 0; i <= kPathGapBuckets.size(); ++i) {
    gap_cumulative +=
        static_cast<uint64_t>(sum([i](const WorkerMetrics& w) { return w.path_gap_buckets[i].get(); }));
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = gap_cumulative;
    b.upper_bound = i < kPathGapBuckets.size() ? kPathGapBuckets[i] : std::numeric_limits<double>::infinity();
    gap_hist.histogram.bucket.push_back(b);
  }
  gap_hist.histogram.sample_count = gap_cumulative;
  gap_hist.histogram.sample_sum = sum([](const WorkerMetrics& w) { return w.path_gap_sum_us.get(); }) / 1e6;
  gap.metric.push_back(gap_hist);
  per_label(
      "rtcedge_transceiver_ice_restarts_total", "ICE restarts (PATCH with new credentials), by result",
      "result", kIceRestartResultNames, [](const WorkerMetrics& w) -> const auto& { return w.ice_restarts; });
  if (s.realtime != nullptr) {
    const RealtimeStats& rt = *s.realtime;
    auto load = [](const std::atomic<uint64_t>& v) {
      return static_cast<double>(v.load(std::memory_order_relaxed));
    };
    auto& calls = m.family("rtcedge_transceiver_realtime_calls_created_total",
                           "calls placed through /v1/realtime/calls (and /v1/realtime)", MetricType::Counter);
    m.add(calls, load(rt.calls_created));
    auto& hung_up = m.family("rtcedge_transceiver_realtime_calls_hung_up_total",
                             "calls ended by POST /v1/realtime/calls/{id}/hangup", MetricType::Counter);
    m.add(hung_up, load(rt.calls_hung_up));
    auto& call_rejects = m.family("rtcedge_transceiver_realtime_calls_rejected_total",
                                  "Realtime call requests refused, by error code", MetricType::Counter);
    auto& minted = m.family("rtcedge_transceiver_realtime_keys_minted_total",
                            "ephemeral keys minted (client_secrets and sessions)", MetricType::Counter);
    m.add(minted, load(rt.keys_minted));
    auto& key_refusals = m.family("rtcedge_transceiver_realtime_keys_refused_total",
                                  "ephemeral key requests refused, by error code", MetricType::Counter);
    auto& sideband_refusals =
        m.family("rtcedge_transceiver_realtime_sidebands_rejected_total",
                 "sideband requests refused before the call was asked (key, upgrade, id), by error code",
                 MetricType::Counter);
    for (const RealtimeError error : kRealtimeErrors) {
      const auto i = static_cast<size_t>(error);
      const std::string code(realtime_error_name(error));
      m.add(call_rejects, load(rt.calls_rejected[i]), {{"code", code}});
      m.add(key_refusals, load(rt.keys_refused[i]), {{"code", code}});
      m.add(sideband_refusals, load(rt.sidebands_refused[i]), {{"code", code}});
    }
    auto& budget =
        m.family("rtcedge_transceiver_realtime_key_calls_total",
                 "ek_ key calls counted with a registry: fleet_taken (Redis counted it), fleet_exhausted "
                 "(the key made its max_calls in the fleet), pod_fallback (Redis did not answer: this "
                 "pod's own count decided)",
                 MetricType::Counter);
    for (size_t i = 0; i < std::size(kKeyBudgetOutcomeNames); ++i)
      m.add(budget, load(rt.key_budget[i]), {{"outcome", kKeyBudgetOutcomeNames[i]}});
  }
  if (s.sideband_sockets != nullptr) {
    const SidebandSocketStats& sb = *s.sideband_sockets;
    auto load = [](const std::atomic<uint64_t>& v) {
      return static_cast<double>(v.load(std::memory_order_relaxed));
    };
    auto& opened = m.family("rtcedge_transceiver_sideband_sockets_opened_total",
                            "sideband WebSocket handshakes completed", MetricType::Counter);
    m.add(opened, load(sb.opened));
    auto& closed = m.family("rtcedge_transceiver_sideband_sockets_closed_total",
                            "sideband WebSockets closed, by why the edge closed them (other: the peer, the "
                            "call's end, an idle timeout)",
                            MetricType::Counter);
    const double flood = load(sb.closed_flood), backlog = load(sb.closed_backlog);
    m.add(closed, flood, {{"reason", "flood"}});
    m.add(closed, backlog, {{"reason", "backlog"}});
    m.add(closed, std::max(0.0, load(sb.closed) - flood - backlog), {{"reason", "other"}});
  }
  if (s.registry != nullptr) {
    m.add(m.family("rtcedge_transceiver_registry_up",
                   "1 while the registry (Redis) was connected at the last heartbeat.", MetricType::Gauge),
          s.registry->up() ? 1 : 0);
    add_sync_events(m, "rtcedge_transceiver_registry_events_total", "Registry", s.registry->counters());
  }
  if (s.forwarder != nullptr) {
    auto load = [](const std::atomic<uint64_t>& v) {
      return static_cast<double>(v.load(std::memory_order_relaxed));
    };
    auto& forwarded =
        m.family("rtcedge_transceiver_calls_forwarded_total",
                 "requests for calls another pod owns, passed to it, by kind (http: GET, PATCH, "
                 "DELETE, hangup; websocket: a sideband bridged)",
                 MetricType::Counter);
    m.add(forwarded, load(s.forwarder->requests), {{"kind", "http"}});
    m.add(forwarded, load(s.forwarder->websockets), {{"kind", "websocket"}});
    auto& unreachable = m.family("rtcedge_transceiver_call_owner_unreachable_total",
                                 "forwarded requests whose owner pod did not answer (502 owner_unreachable)",
                                 MetricType::Counter);
    m.add(unreachable, load(s.forwarder->owner_unreachable));
  }
  // Phone calls. The worker's counters are exported whether or not a provider is configured
  // (zeros), so that dashboards need no conditions.
  {
    auto& refused = m.family("rtcedge_transceiver_telephony_messages_refused_total",
                             "provider stream messages dropped, by provider and reason", MetricType::Counter);
    for (size_t p = 0; p < kPhoneProviderCount; ++p)
      for (size_t i = 0; i < kMediaStreamRefusalCount; ++i)
        m.add(refused, sum([p, i](const WorkerMetrics& w) { return w.telephony_refusals[p][i].get(); }),
              {{"provider", kPhoneProviderNames[p]},
               {"reason", std::string(media_stream_refusal_name(static_cast<MediaStreamRefusal>(i)))}});
    auto& media = m.family("rtcedge_transceiver_telephony_media_messages_total",
                           "20 ms media messages of phone calls, by direction (in: from the provider)",
                           MetricType::Counter);
    m.add(media, sum([](const WorkerMetrics& w) { return w.phone_media_in.get(); }), {{"direction", "in"}});
    m.add(media, sum([](const WorkerMetrics& w) { return w.phone_media_out.get(); }), {{"direction", "out"}});
    per_worker_counter("rtcedge_transceiver_telephony_marks_sent_total",
                       "marks sent after each backend audio segment of a phone call",
                       [](const WorkerMetrics& w) { return w.phone_marks_sent.get(); });
    per_worker_counter("rtcedge_transceiver_telephony_marks_played_total",
                       "marks the provider played back (the caller heard the segment)",
                       [](const WorkerMetrics& w) { return w.phone_marks_played.get(); });
    per_worker_counter("rtcedge_transceiver_telephony_clears_total",
                       "clears sent to the provider (barge-in: its buffered audio dropped)",
                       [](const WorkerMetrics& w) { return w.phone_clears.get(); });
    per_worker_counter("rtcedge_transceiver_telephony_dtmf_total", "DTMF digits phone callers pressed",
                       [](const WorkerMetrics& w) { return w.phone_dtmf.get(); });
    auto& phone_active =
        m.family("rtcedge_transceiver_telephony_calls_active",
                 "live phone calls (their streams open; also in sessions_active)", MetricType::Gauge);
    m.add(phone_active,
          sum([](const WorkerMetrics& w) { return w.phone_calls_active.load(std::memory_order_relaxed); }));
  }
  if (s.telephony != nullptr) {
    const TelephonyStats& t = *s.telephony;
    auto load = [](const std::atomic<uint64_t>& v) {
      return static_cast<double>(v.load(std::memory_order_relaxed));
    };
    auto& webhooks = m.family("rtcedge_transceiver_telephony_webhooks_total",
                              "voice webhook requests, by provider and outcome", MetricType::Counter);
    for (size_t p = 0; p < kPhoneProviderCount; ++p)
      for (size_t i = 0; i < std::size(kTelephonyWebhookOutcomeNames); ++i)
        m.add(webhooks, load(t.webhooks[p][i]),
              {{"provider", kPhoneProviderNames[p]}, {"outcome", kTelephonyWebhookOutcomeNames[i]}});
    auto& streams = m.family("rtcedge_transceiver_telephony_streams_total",
                             "media stream requests, by provider and outcome", MetricType::Counter);
    for (size_t p = 0; p < kPhoneProviderCount; ++p)
      for (size_t i = 0; i < std::size(kTelephonyStreamOutcomeNames); ++i)
        m.add(streams, load(t.streams[p][i]),
              {{"provider", kPhoneProviderNames[p]}, {"outcome", kTelephonyStreamOutcomeNames[i]}});
    auto& flood = m.family("rtcedge_transceiver_telephony_streams_closed_flood_total",
                           "media streams closed (1008) for sending faster than the message limit",
                           MetricType::Counter);
    m.add(flood, load(t.streams_closed_flood));
    auto& fallback =
        m.family("rtcedge_transceiver_telephony_call_claims_pod_fallback_total",
                 "webhooks whose fleet-wide CallSid claim Redis did not answer: this pod decided alone",
                 MetricType::Counter);
    m.add(fallback, load(t.claims_pod_fallback));
    auto& pending = m.family("rtcedge_transceiver_telephony_calls_waiting",
                             "answered phone calls whose media stream has not opened yet", MetricType::Gauge);
    m.add(pending, load(t.pending));
  }
  auto& ready = m.family("rtcedge_transceiver_draining", "1 while draining (SIGTERM)", MetricType::Gauge);
  m.add(ready, s.draining ? 1 : 0);
  add_http_server_metrics(m, "signaling", *s.signaling);
  return m.serialize();
}

}  // namespace rtce
