// transceiver_metrics.h — the transceiver's /metrics page (every rtcedge_transceiver_*
// family plus the signaling server's rtcedge_http_*), summed over the media workers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "call_forwarder.h"
#include "http_server.h"
#include "media_worker.h"
#include "realtime_signaling.h"
#include "sideband_socket.h"
#include "telephony_signaling.h"
#include "worker_metrics.h"

namespace rtce {

class RegistryAgent;

// What one scrape reads. The service fills it; the pointers stay valid for the call.
struct TransceiverMetricsSources {
  const std::vector<std::unique_ptr<WorkerMetrics>>* metrics = nullptr;
  const std::vector<std::unique_ptr<MediaWorker>>* workers = nullptr;  // for the per-endpoint gauge
  const HttpServer::Stats* signaling = nullptr;
  // Session requests refused before a worker saw them (counted on the HTTP thread).
  uint64_t rejected_rate_limited = 0, rejected_capacity = 0, rejected_bad_sdp = 0, rejected_unauthorized = 0;
  bool draining = false;
  const RealtimeStats* realtime = nullptr;  // the /v1/realtime routes
  const SidebandSocketStats* sideband_sockets = nullptr;
  const CallForwarder::Stats* forwarder = nullptr;  // with a registry only
  const RegistryAgent* registry = nullptr;          // with registry.redis_url
  const TelephonyStats* telephony = nullptr;        // with telephony.twilio configured
  // Relay mode: answers by how their ingress VIPs were chosen (ingress_selector.h).
  const std::array<uint64_t, static_cast<size_t>(IngressChoice::count)>* ingress_chosen = nullptr;
};

std::string transceiver_metrics_text(const TransceiverMetricsSources& sources);

}  // namespace rtce
