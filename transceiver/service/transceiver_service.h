// transceiver_service.h — the rtcedge-transceiver process: HTTP signaling (WHIP-style
// POST/GET/DELETE /v1/sessions, CORS, API keys, admission; the Realtime-style routes live in
// realtime_signaling.h and call back into the placement here), the media workers it places
// sessions on, the demo page, /metrics, /healthz, /readyz and the drain on shutdown.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "call_forwarder.h"
#include "dtls/dtls_certificate.h"
#include "hint_keys.h"
#include "http_server.h"
#include "ingress_selector.h"
#include "media_worker.h"
#include "realtime_signaling.h"
#include "registry_agent.h"
#include "sdp/session_description.h"
#include "sideband_socket.h"
#include "telephony_signaling.h"
#include "token_bucket.h"
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
  // What a request about a session that is unknown, or not `requester`'s (call_access.h), gets:
  // the same answer for both. JSON call_not_found on the Realtime routes.
  using NotFound = HttpResponse (*)();
  // GET/DELETE/PATCH of a session by `requester` (a principal), authorization already checked.
  void session_request(const std::string& id, const std::string& requester, const HttpRequest& request,
                       HttpServer::Responder respond, NotFound not_found);
  // PATCH with an RFC 8840 fragment: an ICE restart (new ufrag/pwd) or trickle (candidates only).
  void patch_session(const std::string& id, const std::string& requester, MediaWorker& worker,
                     const HttpRequest& request, HttpServer::Responder respond, NotFound not_found);
  // The principal of a request authorized() accepted: "" when no http.api_keys are set.
  std::string server_principal(const HttpRequest& request) const;
  // The host candidates an answer (and an ICE restart's fragment) carries for `worker`.
  std::vector<sdp::AnswerCandidate> answer_candidates(const MediaWorker& worker,
                                                      const IngressSelector::Choice& ingress) const;
  // Draining or over the setup rate: the refusal (counted); else a setup token is taken.
  std::optional<RealtimeError> admit();
  // What a new session's offer brings besides the SDP.
  struct OfferContext {
    nlohmann::json realtime_session;  // null unless a Realtime call
    bool realtime = false;
    std::string user_agent;
    Nanos received = 0;
    IngressSelector::Choice ingress;  // the candidates the answer names (relay mode)
    CallAccess access;                // who may act on the session (call_access.h)
  };
  // Parses the offer and places a session on the least loaded worker; done is called once,
  // on this thread for a refusal, from the worker once it owns the session.
  void place_offer(std::string_view sdp, OfferContext context, std::function<void(PlaceResult)> done);
  void hang_up(const std::string& id, const std::string& requester, std::function<void(bool)> done);
  // The app server's sideband WebSocket on a Realtime call (sideband_socket.h).
  void attach_sideband(const std::string& id, const std::string& requester, HttpServer::Responder respond);
  RealtimeHooks realtime_hooks();
  bool authorized(const HttpRequest& request) const;
  void add_cors(const std::string& origin, HttpResponse& response) const;
  std::string metrics_text() const;
  MediaWorker* least_loaded_worker();
  // The worker of this pod that owns session `id` (session_id.h); nullptr: not ours, or not an id.
  MediaWorker* local_worker_of(const std::string& id) const;
  // The signaling address of the pod that owns the call a request names, when that is another
  // pod the registry knows (call_forwarder.h); nullopt: ours, not an id, unknown, or forwarded.
  std::optional<SocketAddress> remote_owner(const HttpRequest& request) const;

  TransceiverConfig config_;
  HintKeys hint_keys_;
  std::shared_ptr<DtlsContext> dtls_;
  std::vector<std::unique_ptr<WorkerMetrics>> metrics_;
  std::vector<std::unique_ptr<MediaWorker>> workers_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<RegistryAgent> registry_;
  std::unique_ptr<CallForwarder> forwarder_;  // with a registry only
  std::unique_ptr<RealtimeSignaling> realtime_;
  std::unique_ptr<TelephonySignaling> telephony_;
  bool realtime_key_local_ = false;  // no configured secrets: keys verify only on this pod
  std::atomic<bool> draining_{false};
  SidebandSocketStats sideband_sockets_;
  Nanos started_at_ = 0;

  // Touched only on the HTTP thread.
  TokenBucket setup_tokens_;  // sessions.setup_burst, refilled at sessions.setup_rate
  uint64_t rejected_rate_ = 0, rejected_capacity_ = 0, rejected_sdp_ = 0, rejected_auth_ = 0;
  IngressSelector ingress_;
  std::array<uint64_t, static_cast<size_t>(IngressChoice::count)> ingress_chosen_{};
  // The ingress for a request: from relay.ingress_header's value, else the client address.
  IngressSelector::Choice choose_ingress(std::string_view region_header, const SocketAddress& client);
};

}  // namespace rtce
