// transceiver_service.h — the rtcedge-transceiver process: HTTP signaling (WHIP-style
// POST/GET/DELETE /v1/sessions, CORS, API keys, admission), the media workers it places
// sessions on, the demo page, /metrics, /healthz, /readyz and the drain on shutdown.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "dtls/dtls_certificate.h"
#include "hint_keys.h"
#include "http_server.h"
#include "media_worker.h"
#include "registry_agent.h"
#include "transceiver_config.h"
#include "worker_metrics.h"

namespace rtce {

class TransceiverService {
 public:
  explicit TransceiverService(TransceiverConfig config);
  ~TransceiverService();

  // Binds every socket and starts the threads; throws std::runtime_error on failure.
  void start();
  // SIGTERM: /readyz fails and new sessions get 503 at once; live sessions continue until
  // they end or drain_timeout passes. Returns when every session is gone.
  void drain();
  void stop();

  uint16_t http_port() const { return http_->port(); }
  const std::vector<std::unique_ptr<MediaWorker>>& workers() const { return workers_; }
  size_t live_sessions() const;

 private:
  void handle(const HttpRequest& request, HttpServer::Responder respond);
  void create_session(const HttpRequest& request, HttpServer::Responder respond);
  void with_session(const std::string& id, const HttpRequest& request, HttpServer::Responder respond);
  bool authorized(const HttpRequest& request) const;
  void add_cors(const std::string& origin, HttpResponse& response) const;
  bool take_setup_token();
  std::string metrics_text() const;
  MediaWorker* least_loaded_worker();

  TransceiverConfig config_;
  HintKeys hint_keys_;
  std::shared_ptr<DtlsContext> dtls_;
  std::vector<std::unique_ptr<WorkerMetrics>> metrics_;
  std::vector<std::unique_ptr<MediaWorker>> workers_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<RegistryAgent> registry_;
  std::atomic<bool> draining_{false};
  Nanos started_at_ = 0;

  // Touched only on the HTTP thread.
  double tokens_ = 0;
  Nanos tokens_at_ = 0;
  uint64_t rejected_rate_ = 0, rejected_capacity_ = 0, rejected_sdp_ = 0, rejected_auth_ = 0;
};

}  // namespace rtce
