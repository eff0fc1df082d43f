// transceiver_service.cpp — see transceiver_service.h.
#include "transceiver_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include "admin_server.h"
#include "config_file.h"
#include "error.h"
#include "random.h"
#include "sdp/sdpfrag.h"
#include "sdp/session_description.h"
#include "session_id.h"
#include "telnyx_webhook.h"
#include "transceiver_metrics.h"

namespace rtce {

extern const unsigned char kDemoPage[];
extern const size_t kDemoPageSize;

namespace {

constexpr std::string_view kSessionsPrefix = "/v1/sessions";
// What our data-channel endpoint receives in one message (a=max-message-size of the answer).
constexpr size_t kDataChannelMaxMessageSize = 256 * 1024;

// RFC 8839 ice-char: ALPHA / DIGIT / "+" / "/"; 24 chars = 144 bits.
std::string random_ice_password() {
  static const char* chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint8_t raw[24];
  fill_random(raw, sizeof raw);
  std::string out;
  for (uint8_t b : raw) out.push_back(chars[b & 63]);
  return out;
}

// The secrets of a file, one a line, without line ends or surrounding blanks, blank lines
// skipped (a bounded read: a path to /dev/zero fails at once); throws ConfigError naming the
// file when it holds none.
std::vector<std::string> read_secret_lines(const std::string& path, std::string_view what) {
  const ConfigFileText file = read_config_file(path, what, 4096);
  if (auto warning = secret_file_mode_warning(path, what, file.mode)) spdlog::warn("{}", *warning);
  std::vector<std::string> secrets;
  size_t at = 0;
  while (at < file.text.size()) {
    size_t end = file.text.find('\n', at);
    if (end == std::string::npos) end = file.text.size();
    std::string line = file.text.substr(at, end - at);
    at = end + 1;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    secrets.push_back(std::move(line));
  }
  if (secrets.empty()) throw ConfigError(std::string(what) + " '" + path + "' holds no secret");
  return secrets;
}

// Session ids carry their worker in the first byte so a GET finds it without a shared map.
}  // namespace

TransceiverService::TransceiverService(TransceiverConfig config)
    : config_(std::move(config)),
      setup_tokens_(config_.setup_burst, config_.setup_rate),
      ingress_(config_.relay_vips, config_.relay_ingress_regions) {
  hint_keys_ =
      config_.hint_key_file.empty() ? HintKeys::generate(1) : HintKeys::load_file(config_.hint_key_file);
  dtls_ = config_.dtls_certificate.empty()
              ? DtlsContext::generate()
              : DtlsContext::load(config_.dtls_certificate, config_.dtls_private_key);
  for (uint32_t i = 0; i < config_.workers; ++i) metrics_.push_back(std::make_unique<WorkerMetrics>());
  if (!config_.registry_redis_url.empty()) {
    RegistryOptions options;
    options.cluster = config_.cluster_id;
    options.endpoint_ttl = std::chrono::duration_cast<Millis>(std::chrono::nanoseconds(config_.registry_ttl));
    registry_ =
        std::make_unique<RegistryAgent>(*RedisOptions::from_url(config_.registry_redis_url), options,
                                        [this](size_t i) { return metrics_[i]->sessions_active.load(); });
    // Stable ids for this pod: the same identity gets the same range back after a restart.
    if (auto base = registry_->allocate_ids(config_.pod_identity, static_cast<uint16_t>(config_.workers),
                                            3'000'000'000)) {
      config_.endpoint_base_id = *base;
      spdlog::info("registry: pod '{}' owns endpoint ids {}..{}", config_.pod_identity, *base,
                   *base + config_.workers - 1);
    } else {
      spdlog::warn(
          "registry: Redis unreachable at start; using hint.endpoint_base_id {} and registering when it "
          "returns",
          config_.endpoint_base_id);
    }
  }
  for (uint32_t i = 0; i < config_.workers; ++i) {
    workers_.push_back(std::make_unique<MediaWorker>(i, static_cast<uint16_t>(config_.endpoint_base_id + i),
                                                     config_, dtls_, *metrics_[i]));
  }
  HttpServer::Limits limits;
  limits.max_body_bytes = config_.max_body_bytes;
  // Every phone call is a WebSocket (its media stream), as is every sideband: room for a
  // phone call in every session slot, and the sidebands' 256 beside them.
  limits.max_websockets = static_cast<size_t>(config_.workers) * config_.max_sessions_per_worker + 256;
  http_ = std::make_unique<HttpServer>(
      config_.http_listen, limits,
      [this](const HttpRequest& r, HttpServer::Responder respond) { handle(r, std::move(respond)); });
  std::vector<EphemeralSecret> secrets = realtime_key_secrets(config_);
  if (secrets.empty()) {
    realtime_key_local_ = true;
    secrets.push_back({"local", random_hex(32)});
  }
  realtime_ = std::make_unique<RealtimeSignaling>(EphemeralKeyring(std::move(secrets)),
                                                  config_.realtime_key_lifetime / 1'000'000'000,
                                                  config_.max_body_bytes, realtime_hooks());
  realtime_->set_ingress_header(config_.relay_ingress_header);
  TelephonyConfig telephony;
  if (!config_.twilio_auth_token_file.empty())
    telephony.twilio_auth_tokens =
        read_secret_lines(config_.twilio_auth_token_file, "Twilio auth token file");
  telephony.public_url = config_.telephony_public_url;
  telephony.max_websockets = limits.max_websockets;
  if (!config_.telnyx_public_key.empty())
    telephony.telnyx_public_key =
        telnyx_public_key_from_base64(config_.telnyx_public_key);  // checked by the key
  telephony.telnyx_max_call_seconds = static_cast<int>(config_.telnyx_max_call / 1'000'000'000);
  TelephonyHooks hooks;
  hooks.admit = [this] { return admit(); };
  hooks.reserve_worker = [this]() -> MediaWorker* {
    MediaWorker* worker = least_loaded_worker();
    if (!worker)
      ++rejected_capacity_;
    else
      worker->metrics().sessions_active.fetch_add(1, std::memory_order_relaxed);
    return worker;
  };
  hooks.unix_now = [] {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  hooks.mint_session_id = [this](const MediaWorker& worker) {
    return mint_session_id(hint_keys_, worker.endpoint_id());
  };
  if (registry_) {
    hooks.claim_call = [this](PhoneProvider provider, std::string call_sid, std::string call_id,
                              std::function<void(std::optional<std::string>)> done) {
      // As long as the provider may still retry or replay it: a day covers any call.
      registry_->claim_provider_call(phone_provider_name(provider), std::move(call_sid), std::move(call_id),
                                     86400, std::move(done));
    };
    hooks.forward_to_owner = [this](const HttpRequest& request, const std::string& call_id,
                                    const HttpServer::Responder& respond) {
      const std::string id = session_id_of_call(call_id);
      const auto owner = session_id_owner(hint_keys_, id);
      if (!owner || local_worker_of(id) != nullptr || !request.header(kForwardedHeader).empty()) return false;
      auto address = registry_->signaling_of(*owner);
      if (!address || !forwarder_) return false;
      forwarder_->forward(request, *address, respond);
      return true;
    };
  }
  telephony_ = std::make_unique<TelephonySignaling>(std::move(telephony), *http_, std::move(hooks));
}

TransceiverService::~TransceiverService() { stop(); }

void TransceiverService::start() {
  started_at_ = monotonic_now();
  for (auto& w : workers_) w->bind();
  for (auto& w : workers_) {
    w->start();
    spdlog::info("media worker {} (endpoint {}) on {}", w->index(), w->endpoint_id(),
                 w->local_address().to_string());
  }
  http_->start();
  if (registry_) {
    std::vector<RegistryAgent::Endpoint> endpoints;
    // Where other pods forward requests for our calls: the advertised address, our HTTP port.
    const std::string signaling =
        (config_.advertise_address.find(':') != std::string::npos ? "[" + config_.advertise_address + "]"
                                                                  : config_.advertise_address) +
        ":" + std::to_string(http_->port());
    for (auto& w : workers_) {
      auto address = SocketAddress::parse(config_.advertise_address.find(':') != std::string::npos
                                              ? "[" + config_.advertise_address + "]:0"
                                              : config_.advertise_address + ":0");
      address->set_port(w->local_address().port());
      endpoints.push_back({w->endpoint_id(), *address, config_.max_sessions_per_worker, signaling});
    }
    registry_->start(std::move(endpoints));
    forwarder_ = std::make_unique<CallForwarder>(5'000'000'000);
  }
  if (realtime_key_local_)
    spdlog::warn(
        "no realtime.key_secrets or realtime.key_file: ephemeral keys are signed with a secret made at "
        "start, so they verify only on this pod and not after a restart");
  if (config_.api_keys.empty())
    spdlog::warn("no http.api_keys configured: anyone who can reach {} may create sessions",
                 config_.http_listen.to_string());
  spdlog::info("signaling on http://{} ({} mode, fingerprint {})", config_.http_listen.to_string(),
               config_.relay_mode() ? "relay" : "direct", dtls_->fingerprint_sha256());
}

size_t TransceiverService::live_sessions() const {
  size_t n = 0;
  for (auto& m : metrics_) n += m->sessions_active.load(std::memory_order_relaxed);
  return n;
}

void TransceiverService::drain() {
  draining_ = true;
  if (registry_) registry_->set_draining();  // relays and signaling stop choosing us
  spdlog::info("draining: no new sessions; {} live session(s) get up to {} ms", live_sessions(),
               config_.drain_timeout / 1'000'000);
  const Nanos deadline = monotonic_now() + config_.drain_timeout;
  while (live_sessions() > 0 && monotonic_now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // control thread waiting on a condition
}

void TransceiverService::stop() {
  if (registry_) registry_->stop(1'000'000'000);
  for (auto& w : workers_) w->stop(SessionEnd::drained);
  if (http_) http_->stop();
}

bool TransceiverService::authorized(const HttpRequest& request) const {
  if (config_.api_keys.empty()) return true;
  auto credentials = credentials_for_scheme(request.header("authorization"), "Bearer");
  if (!credentials) return false;
  const std::string_view key = *credentials;
  bool match = false;
  for (const auto& k : config_.api_keys) {  // constant time per key
    if (k.size() != key.size()) continue;
    unsigned char diff = 0;
    for (size_t i = 0; i < k.size(); ++i) diff |= static_cast<unsigned char>(k[i] ^ key[i]);
    match = match || diff == 0;
  }
  return match;
}

std::string TransceiverService::server_principal(const HttpRequest& request) const {
  if (config_.api_keys.empty()) return {};
  auto credentials = credentials_for_scheme(request.header("authorization"), "Bearer");
  return credentials ? key_principal(kServerPrincipalPrefix, *credentials) : std::string();
}

void TransceiverService::add_cors(const std::string& origin, HttpResponse& response) const {
  if (origin.empty()) return;
  const bool any =
      std::find(config_.cors_origins.begin(), config_.cors_origins.end(), "*") != config_.cors_origins.end();
  const bool listed = std::find(config_.cors_origins.begin(), config_.cors_origins.end(), origin) !=
                      config_.cors_origins.end();
  if (!any && !listed) return;
  response.headers.emplace_back("Access-Control-Allow-Origin", any ? "*" : origin);
  response.headers.emplace_back("Access-Control-Expose-Headers", "Location, ETag");
  if (!any) response.headers.emplace_back("Vary", "Origin");
}

MediaWorker* TransceiverService::local_worker_of(const std::string& id) const {
  const auto owner = session_id_owner(hint_keys_, id);
  if (!owner || *owner < config_.endpoint_base_id) return nullptr;
  const size_t index = *owner - config_.endpoint_base_id;
  return index < workers_.size() ? workers_[index].get() : nullptr;
}

std::optional<SocketAddress> TransceiverService::remote_owner(const HttpRequest& request) const {
  if (!registry_ || !request.header(kForwardedHeader).empty()) return std::nullopt;
  const std::string_view path = request.path;
  const std::string sessions = std::string(kSessionsPrefix) + "/";
  const std::string calls = std::string(kRealtimeCallsPath) + "/";
  std::string id;
  if (path.starts_with(sessions)) {
    id = path.substr(sessions.size());
  } else if (path.starts_with(calls)) {
    const std::string_view rest = path.substr(calls.size());
    id = session_id_of_call(rest.substr(0, rest.find('/')));
  } else if (path == "/v1/realtime" && request.method == "GET") {
    id = session_id_of_call(query_value(request.query, "call_id"));
  } else if (auto call_id = TelephonySignaling::stream_call_id(path)) {
    // A provider's stream to the pod that answered its webhook (where the call waits for it).
    id = session_id_of_call(*call_id);
  }
  // A forged or mistyped id fails its MAC here: no lookup, the local 404.
  const auto owner = session_id_owner(hint_keys_, id);
  if (!owner || local_worker_of(id) != nullptr) return std::nullopt;
  return registry_->signaling_of(*owner);
}

MediaWorker* TransceiverService::least_loaded_worker() {
  MediaWorker* best = nullptr;
  uint32_t best_load = config_.max_sessions_per_worker;
  for (auto& w : workers_) {
    const uint32_t load = w->metrics().sessions_active.load(std::memory_order_relaxed);
    if (load < best_load) {
      best = w.get();
      best_load = load;
    }
  }
  return best;
}

void TransceiverService::handle(const HttpRequest& request, HttpServer::Responder respond_raw) {
  // The answer may come later from a worker thread, after `request` is gone: keep only
  // what CORS needs, by value.
  auto respond = [this, origin = std::string(request.header("origin")), respond_raw](HttpResponse response) {
    add_cors(origin, response);
    respond_raw(std::move(response));
  };
  const auto& path = request.path;
  if (request.method == "OPTIONS") {
    HttpResponse r{204, "text/plain", "", {}};
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE, OPTIONS");
    // X-OpenAI-Agents-SDK and OpenAI-Beta: what Realtime-style browser clients add to their POSTs.
    r.headers.emplace_back("Access-Control-Allow-Headers",
                           "Authorization, Content-Type, If-Match, X-OpenAI-Agents-SDK, OpenAI-Beta");
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    return respond(std::move(r));
  }
  if (path == "/" && (request.method == "GET" || request.method == "HEAD"))
    return respond(HttpResponse{200,
                                "text/html; charset=utf-8",
                                std::string(reinterpret_cast<const char*>(kDemoPage), kDemoPageSize),
                                {}});
  // The operator's endpoints carry no CORS headers: no page of any origin reads them.
  // Answered calls whose stream never came give their worker slot back; probes keep this going.
  telephony_->expire(monotonic_now());
  if (path == "/healthz") return respond_raw(HttpResponse::text(200, "ok"));
  if (path == "/readyz")
    return respond_raw(draining_ ? HttpResponse::text(503, "draining") : HttpResponse::text(200, "ready"));
  if (path == "/metrics") {
    return respond_raw(HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics_text(), {}});
  }
  // A call another pod owns: that pod answers (its keys and ownership checks apply there).
  if (auto owner = remote_owner(request)) return forwarder_->forward(request, *owner, respond);
  if (path == kSessionsPrefix && request.method == "POST") return create_session(request, respond);
  if (path.size() > kSessionsPrefix.size() + 1 &&
      path.compare(0, kSessionsPrefix.size() + 1, "/v1/sessions/") == 0)
    return with_session(path.substr(kSessionsPrefix.size() + 1), request, respond);
  if (path == kSessionsPrefix) return respond(HttpResponse::text(405, "use POST with an SDP offer"));
  if (realtime_->handle(request, respond)) return;
  if (telephony_->handle(request, respond)) return;
  respond(HttpResponse::text(404, "not found"));
}

void TransceiverService::create_session(const HttpRequest& request, HttpServer::Responder respond) {
  const Nanos received = monotonic_now();
  if (!authorized(request)) {
    ++rejected_auth_;
    HttpResponse r = HttpResponse::text(401, "missing or unknown API key (Authorization: Bearer <key>)");
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return respond(std::move(r));
  }
  auto content_type = request.header("content-type");
  if (!media_type_is(content_type, "application/sdp"))
    return respond(HttpResponse::text(415, "Content-Type must be application/sdp"));
  auto refuse = [respond](const PlaceRefusal& refusal) {
    auto retry = [&](unsigned status, const char* why, const char* after) {
      HttpResponse r = HttpResponse::text(status, why);
      r.headers.emplace_back("Retry-After", after);
      respond(std::move(r));
    };
    switch (refusal.error) {
      case RealtimeError::draining:
        return retry(503, "draining: this transceiver takes no new sessions", "5");
      case RealtimeError::rate_limited: return retry(429, "session setup rate exceeded", "1");
      case RealtimeError::at_capacity:
        return retry(503, "every media worker is at sessions.max_per_worker", "2");
      default: return respond(HttpResponse::text(400, "bad SDP offer: " + refusal.detail));
    }
  };
  if (auto refusal = admit()) return refuse(PlaceRefusal{*refusal, {}});
  OfferContext context;
  context.user_agent = std::string(request.header("user-agent").substr(0, 256));
  context.received = received;
  context.access = CallAccess{server_principal(request), std::nullopt};
  if (config_.relay_mode())
    context.ingress = choose_ingress(request.header(config_.relay_ingress_header), request.peer);
  place_offer(request.body, std::move(context), [respond, refuse](PlaceResult result) {
    if (auto* refusal = std::get_if<PlaceRefusal>(&result)) return refuse(*refusal);
    auto& placed = std::get<PlacedCall>(result);
    HttpResponse r{201, "application/sdp", std::move(placed.answer), {}};
    r.headers.emplace_back("Location", std::string(kSessionsPrefix) + "/" + placed.session_id);
    r.headers.emplace_back("ETag", "\"1\"");
    respond(std::move(r));
  });
}

std::optional<RealtimeError> TransceiverService::admit() {
  if (draining_) return RealtimeError::draining;
  if (!setup_tokens_.take(monotonic_now())) {
    ++rejected_rate_;
    return RealtimeError::rate_limited;
  }
  return std::nullopt;
}

void TransceiverService::place_offer(std::string_view sdp, OfferContext context,
                                     std::function<void(PlaceResult)> done) {
  // http.max_body_bytes is the one size limit of an offer: the body got past it, so may the parser.
  sdp::ParseLimits parse_limits;
  parse_limits.max_bytes = config_.max_body_bytes;
  sdp::OfferPolicy policy;
  policy.allow_text_only = config_.allow_text_only;
  auto parsed = sdp::parse_offer(sdp, parse_limits, policy);
  if (auto* error = std::get_if<sdp::OfferError>(&parsed)) {
    ++rejected_sdp_;
    return done(PlaceRefusal{RealtimeError::invalid_offer, error->to_string()});
  }
  auto& offer = std::get<sdp::ParsedOffer>(parsed);
  MediaWorker* worker = least_loaded_worker();
  if (!worker) {
    ++rejected_capacity_;
    return done(PlaceRefusal{RealtimeError::at_capacity, {}});
  }
  worker->metrics().sessions_active.fetch_add(1, std::memory_order_relaxed);

  SessionPlan plan;
  plan.id = mint_session_id(hint_keys_, worker->endpoint_id());
  plan.local_ufrag = mint_ufrag(hint_keys_, config_.cluster_id, worker->endpoint_id());
  plan.local_pwd = random_ice_password();
  plan.remote_ufrag = offer.transport.ice_ufrag;
  plan.remote_pwd = offer.transport.ice_pwd;
  plan.remote_fingerprint = offer.transport.fingerprint;
  plan.has_audio = offer.audio.has_value();
  if (offer.audio) {
    plan.opus_payload_type = offer.audio->opus_payload_type;
    plan.audio_level_ext_id = offer.audio->audio_level_ext_id;
  }
  if (offer.application) {
    DataChannelPlan channel;
    channel.local_port = sdp::kDefaultSctpPort;
    channel.remote_port = offer.application->sctp_port;
    channel.local_max_message_size = kDataChannelMaxMessageSize;
    // RFC 8841 §6: 0 = the offerer takes any size, so ours is the bound either way.
    channel.remote_max_message_size =
        offer.application->max_message_size == 0
            ? kDataChannelMaxMessageSize
            : static_cast<size_t>(std::min<uint64_t>(offer.application->max_message_size, SIZE_MAX));
    plan.data_channel = channel;
  }
  plan.realtime = context.realtime;
  plan.realtime_session = std::move(context.realtime_session);
  plan.access = std::move(context.access);
  fill_random(&plan.ssrc, sizeof plan.ssrc);
  plan.cname = random_hex(8);
  plan.user_agent = std::move(context.user_agent);
  plan.offer_received_at = context.received;

  sdp::AnswerParams params;
  params.ice_ufrag = plan.local_ufrag;
  params.ice_pwd = plan.local_pwd;
  params.fingerprint_sha256 = dtls_->fingerprint_sha256();
  params.setup = sdp::answer_setup(offer.transport.setup, sdp::Setup::active);
  params.sctp_max_message_size = kDataChannelMaxMessageSize;
  plan.dtls_role =
      params.setup == sdp::Setup::active ? DtlsTransport::Role::client : DtlsTransport::Role::server;
  uint64_t sid;
  fill_random(&sid, sizeof sid);
  params.session_id = sid >> 2;
  params.ssrc = plan.ssrc;
  params.cname = plan.cname;
  params.candidates = answer_candidates(*worker, context.ingress);
  std::string answer = sdp::build_answer(offer, params);
  spdlog::info("session {} on worker {} (ufrag {}, {} mode{}{})", plan.id, worker->index(), plan.local_ufrag,
               config_.relay_mode() ? "relay" : "direct", plan.data_channel ? ", data channel" : "",
               plan.realtime ? ", realtime call" : "");
  // Answer only once the worker owns the session: the client's first check may follow at once.
  worker->post(
      [worker, plan = std::move(plan), answer = std::move(answer), done = std::move(done)]() mutable {
        std::string id = plan.id;
        worker->add_session(std::move(plan));
        done(PlacedCall{std::move(id), std::move(answer)});
      });
}

IngressSelector::Choice TransceiverService::choose_ingress(std::string_view region_header,
                                                           const SocketAddress& client) {
  IngressSelector::Choice choice =
      ingress_.choose(config_.relay_ingress_header.empty() ? std::string_view() : region_header, client);
  ++ingress_chosen_[static_cast<size_t>(choice.how)];
  return choice;
}

std::vector<sdp::AnswerCandidate> TransceiverService::answer_candidates(
    const MediaWorker& worker, const IngressSelector::Choice& ingress) const {
  std::vector<sdp::AnswerCandidate> candidates;
  if (config_.relay_mode()) {
    // The chosen region's ingress VIPs first, then this cluster's own (IngressSelector).
    // Type preference 126 (host), local preference 65535 - i for UDP; for the ICE-TCP
    // passive twins (relay.tcp_port) the same VIPs with RFC 6544's direction preference
    // (passive: 4 << 13), so every TCP candidate ranks below every UDP one and a client that
    // can use UDP does.
    const auto& vips = ingress.vips.empty() ? config_.relay_vips : ingress.vips;
    uint32_t priority = 2130706431;
    for (const auto& vip : vips)
      candidates.push_back({vip.ip_string(), vip.port(), priority--, std::to_string(candidates.size() + 1)});
    uint32_t tcp_priority = (126u << 24) | ((4u << 13) << 8) | 255u;
    if (config_.relay_tcp_port != 0)
      for (const auto& vip : vips)
        candidates.push_back({vip.ip_string(), config_.relay_tcp_port, tcp_priority--,
                              std::to_string(candidates.size() + 1), /*tcp_passive=*/true});
  } else {
    candidates.push_back({config_.advertise_address, worker.local_address().port(), 2130706431, "1"});
  }
  return candidates;
}

void TransceiverService::patch_session(const std::string& id, const std::string& requester,
                                       MediaWorker& worker, const HttpRequest& request,
                                       HttpServer::Responder respond, NotFound not_found) {
  MediaWorker* w = &worker;
  auto count = [w](IceRestartResult result) {
    w->post([w, result] { w->metrics().ice_restarts[static_cast<size_t>(result)].add(); });
  };
  if (!media_type_is(request.header("content-type"), "application/trickle-ice-sdpfrag"))
    return respond(
        HttpResponse::text(415, "Content-Type must be application/trickle-ice-sdpfrag (RFC 8840)"));
  sdp::ParseLimits limits;
  limits.max_bytes = config_.max_body_bytes;
  auto parsed = sdp::parse_ice_fragment(request.body, limits);
  if (auto* error = std::get_if<sdp::OfferError>(&parsed)) {
    count(IceRestartResult::bad_fragment);
    return respond(HttpResponse::text(400, "bad ICE fragment: " + error->to_string()));
  }
  auto& fragment = std::get<sdp::IceFragment>(parsed);
  Peer::IceRestartRequest restart;
  std::string if_match(request.header("if-match"));
  if_match.erase(0, if_match.find_first_not_of(" \t"));
  if_match.erase(if_match.find_last_not_of(" \t") + 1);
  restart.if_match = std::move(if_match);
  sdp::IceFragmentAnswer answer;
  if (fragment.ufrag) {
    restart.remote_ufrag = *fragment.ufrag;
    restart.remote_pwd = fragment.pwd.value_or("");
    // The same worker's endpoint id: every relay steers the restarted path to this owner.
    restart.local_ufrag = mint_ufrag(hint_keys_, config_.cluster_id, worker.endpoint_id());
    restart.local_pwd = random_ice_password();
    answer.ufrag = restart.local_ufrag;
    answer.pwd = restart.local_pwd;
    answer.mids = fragment.mids;
    // The client may have moved nearer another ingress: choose again from this request.
    answer.candidates =
        answer_candidates(worker, ingress_.choose(config_.relay_ingress_header.empty()
                                                      ? std::string_view()
                                                      : request.header(config_.relay_ingress_header),
                                                  request.peer));
  }
  w->post([w, id, requester, restart = std::move(restart), answer = std::move(answer), respond, not_found] {
    const CallAccess* access = w->access_of(id);
    if (!access || !access->allows(requester)) return respond(not_found());
    auto reply = w->restart_ice(id, restart);
    if (!reply) return respond(not_found());
    using V = Peer::IceRestartVerdict;
    HttpResponse r;
    switch (reply->verdict) {
      case V::started:
        r = HttpResponse{200, "application/trickle-ice-sdpfrag", sdp::build_ice_fragment(answer), {}};
        break;
      case V::trickle:
        r = HttpResponse{204, "text/plain", "", {}};  // ICE-lite: the checks tell us the addresses
        break;
      case V::precondition_failed:
        r = HttpResponse::text(412, "If-Match does not name the session's current ETag " + reply->etag);
        break;
      case V::precondition_required:
        r = HttpResponse::text(428, "an ICE restart needs If-Match (the ETag, or *), RFC 9725 section 4.4");
        break;
      case V::rate_limited:
        r = HttpResponse::text(429, "too many ICE restarts for this session");
        r.headers.emplace_back("Retry-After", "10");
        break;
      case V::ended: r = HttpResponse::text(404, "the session has ended"); break;
    }
    r.headers.emplace_back("ETag", reply->etag);
    respond(std::move(r));
  });
}

void TransceiverService::hang_up(const std::string& id, const std::string& requester,
                                 std::function<void(bool)> done) {
  MediaWorker* worker = local_worker_of(id);
  if (!worker) return done(false);
  worker->post([worker, id, requester, done = std::move(done)] {
    const CallAccess* access = worker->access_of(id);
    if (!access || !access->allows(requester)) return done(false);
    done(worker->end_session(id, SessionEnd::deleted) != MediaWorker::EndResult::not_found);
  });
}

void TransceiverService::attach_sideband(const std::string& id, const std::string& requester,
                                         HttpServer::Responder respond) {
  auto not_found = [] { return realtime_error_response(RealtimeError::call_not_found, {}, "call_id"); };
  MediaWorker* worker = local_worker_of(id);
  if (!worker) return respond(not_found());
  auto socket = std::make_shared<SidebandSocket>(*http_, *worker, id, sideband_sockets_);
  const size_t max_message_bytes = config_.max_body_bytes;
  const int idle_timeout_s = static_cast<int>(config_.sideband_idle_timeout / 1'000'000'000);
  worker->post([=] {
    // Another key's call answers exactly as an unknown one; so do an ended call and a WHIP one.
    const CallAccess* access = worker->access_of(id);
    if (!access || !access->allows(requester)) return respond(not_found());
    std::optional<EventSource> attached;
    bool realtime = false;
    worker->with_live_session(id, [&](WorkerSession& session, Nanos now) {
      realtime = session.call().realtime();
      if (realtime) attached = session.call().attach_sideband(socket, now);
    });
    if (!realtime) return respond(not_found());
    if (!attached) return respond(realtime_error_response(RealtimeError::too_many_sidebands));
    // What the call sends from now on waits in the socket until the handshake is done.
    respond(HttpResponse::accept_websocket(socket->handlers(*attached, max_message_bytes, idle_timeout_s)));
  });
}

RealtimeHooks TransceiverService::realtime_hooks() {
  RealtimeHooks hooks;
  hooks.server_key_ok = [this](const HttpRequest& request) {
    if (authorized(request)) return true;
    ++rejected_auth_;
    return false;
  };
  hooks.server_principal = [this](const HttpRequest& request) { return server_principal(request); };
  hooks.admit = [this] { return admit(); };
  hooks.place = [this](const RealtimeOffer& offer, std::function<void(PlaceResult)> done) {
    OfferContext context;
    context.realtime = true;
    context.realtime_session = offer.session;
    context.user_agent = offer.user_agent;
    context.received = monotonic_now();
    context.access = offer.access;
    if (config_.relay_mode()) context.ingress = choose_ingress(offer.region_header, offer.client);
    place_offer(offer.sdp, std::move(context), std::move(done));
  };
  hooks.session_request = [this](const std::string& id, const std::string& requester,
                                 const HttpRequest& request, HttpServer::Responder respond) {
    session_request(id, requester, request, std::move(respond),
                    [] { return realtime_error_response(RealtimeError::call_not_found, {}, "call_id"); });
  };
  hooks.hang_up = [this](const std::string& id, const std::string& requester,
                         std::function<void(bool)> done) { hang_up(id, requester, std::move(done)); };
  hooks.attach_sideband = [this](const std::string& id, const std::string& requester, const HttpRequest&,
                                 HttpServer::Responder respond) {
    attach_sideband(id, requester, std::move(respond));
  };
  if (registry_) {
    // One ek_ key, its calls, in the whole fleet (docs/operations.md "One key, one call").
    hooks.take_key_call = [this](const std::string& principal, uint32_t max_calls, int64_t expires_at,
                                 std::function<void(std::optional<bool>)> done) {
      registry_->take_key_call(principal, max_calls, expires_at, [this, done](std::optional<bool> taken) {
        http_->post([done, taken] { done(taken); });
      });
    };
    hooks.give_back_key_call = [this](const std::string& principal) {
      registry_->give_back_key_call(principal);
    };
  }
  hooks.unix_now = [] {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  return hooks;
}

void TransceiverService::with_session(const std::string& id, const HttpRequest& request,
                                      HttpServer::Responder respond) {
  if (!authorized(request)) return respond(HttpResponse::text(401, "missing or unknown API key"));
  session_request(id, server_principal(request), request, std::move(respond),
                  [] { return HttpResponse::text(404, "no such session"); });
}

void TransceiverService::session_request(const std::string& id, const std::string& requester,
                                         const HttpRequest& request, HttpServer::Responder respond,
                                         NotFound not_found) {
  MediaWorker* worker = local_worker_of(id);
  if (!worker) return respond(not_found());
  // Checked on the worker, which holds the session (live or recently ended): another key's
  // session answers exactly as an unknown one.
  auto mine = [worker, id, requester] {
    const CallAccess* access = worker->access_of(id);
    return access && access->allows(requester);
  };
  if (request.method == "GET") {
    worker->post([worker, id, respond, mine, not_found] {
      auto snap = mine() ? worker->snapshot(id) : std::nullopt;
      respond(snap ? HttpResponse::json(200, snap->dump()) : not_found());
    });
  } else if (request.method == "DELETE") {
    // A WHIP client DELETEs on hang-up, often after its DTLS close already ended the session:
    // while the ended session is remembered, that is a success with its final state.
    worker->post([worker, id, respond, mine, not_found] {
      if (!mine()) return respond(not_found());
      if (worker->end_session(id, SessionEnd::deleted) == MediaWorker::EndResult::ended)
        return respond(HttpResponse{204, "text/plain", "", {}});
      auto ended = worker->snapshot(id);
      respond(ended ? HttpResponse::json(200, ended->dump()) : not_found());
    });
  } else if (request.method == "PATCH") {
    patch_session(id, requester, *worker, request, std::move(respond), not_found);
  } else {
    respond(HttpResponse::text(405, "use GET, PATCH or DELETE"));
  }
}

std::string TransceiverService::metrics_text() const {
  TransceiverMetricsSources sources;
  sources.metrics = &metrics_;
  sources.workers = &workers_;
  sources.signaling = &http_->stats();
  sources.sideband_sockets = &sideband_sockets_;
  if (telephony_->enabled()) sources.telephony = &telephony_->stats();
  if (forwarder_) sources.forwarder = &forwarder_->stats();
  sources.registry = registry_.get();
  sources.rejected_rate_limited = rejected_rate_;
  sources.rejected_capacity = rejected_capacity_;
  sources.rejected_bad_sdp = rejected_sdp_;
  sources.rejected_unauthorized = rejected_auth_;
  if (config_.relay_mode()) sources.ingress_chosen = &ingress_chosen_;
  sources.draining = draining_;
  sources.realtime = &realtime_->stats();
  return transceiver_metrics_text(sources);
}

}  // namespace rtce
