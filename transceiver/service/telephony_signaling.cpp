// telephony_signaling.cpp — see telephony_signaling.h.
#include "telephony_signaling.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "call_forwarder.h"
#include "form_urlencoded.h"
#include "media_worker.h"
#include "random.h"
#include "telnyx_stream.h"
#include "telnyx_webhook.h"
#include "token_bucket.h"
#include "twilio_stream.h"
#include "twilio_webhook.h"

namespace rtce {

namespace {

// RFC 6455 §7.4.1.
constexpr uint16_t kNormalClosure = 1000;
constexpr uint16_t kPolicyViolation = 1008;
constexpr uint16_t kUnsupportedData = 1003;
constexpr std::string_view kCallIdPrefix = "rtc_";
constexpr size_t kMaxCallSidChars = 128;
// What waits for the handshake: the session says nothing before the provider's start, so only
// an early end (a close) can be here.
constexpr size_t kMaxPendingText = 64;

HttpResponse xml(unsigned status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/xml; charset=utf-8";
  r.body = std::move(body);
  return r;
}

// Twilio's CallSids are CA + 32 hex; Telnyx's are "v3:" + base64url (letters, digits, - and _).
bool printable_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxCallSidChars) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != ':' && c != '-' && c != '_') return false;
  return true;
}

std::string field(const std::vector<FormField>& form, std::string_view name) {
  for (const auto& f : form)
    if (f.name == name) return f.value;
  return {};
}

std::optional<std::vector<std::pair<std::string, std::string>>> custom_parameters(std::string_view query) {
  auto fields = parse_form_urlencoded(query);
  if (!fields || fields->size() > kTwilioMaxCustomParameters) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& f : *fields) {
    if (f.name.size() > kTwilioMaxCustomParameterBytes || f.value.size() > kTwilioMaxCustomParameterBytes)
      return std::nullopt;
    out.emplace_back(std::move(f.name), std::move(f.value));
  }
  return out;
}

std::unique_ptr<MediaStreamCodec> make_codec(PhoneProvider provider) {
  if (provider == PhoneProvider::telnyx) return std::make_unique<TelnyxStreamCodec>();
  return std::make_unique<TwilioStreamCodec>();
}

// One provider stream between the two threads it spans: the HTTP thread owns the socket, the
// media worker owns the call. Provider messages hop to the worker, rate-limited here so that a
// flood closes its own socket instead of filling the worker's queue; what the call sends hops
// back. Either side ending ends the other.
class PhoneStreamSocket final : public PhoneStreamLink,
                                public std::enable_shared_from_this<PhoneStreamSocket> {
 public:
  PhoneStreamSocket(HttpServer& http, MediaWorker& worker, std::string session_id, TelephonyStats& stats)
      : http_(http), worker_(worker), session_id_(std::move(session_id)), stats_(stats) {}

  WebSocketHandlers handlers() {
    WebSocketHandlers h;
    auto self = shared_from_this();
    h.on_open = [self](std::shared_ptr<WebSocketConnection> connection) {
      self->opened(std::move(connection));
    };
    h.on_text = [self](std::string text) { self->received(std::move(text)); };
    h.on_closed = [self](uint16_t code, std::string_view) { self->closed(code); };
    h.max_message_bytes = kTwilioMaxMessageBytes;
    h.idle_timeout_s = 30;
    return h;
  }

  // PhoneStreamLink: from the worker thread.
  void send_text(std::string text) override {
    http_.post(
        [self = shared_from_this(), text = std::move(text)]() mutable { self->deliver(std::move(text)); });
  }
  void close(uint16_t code, std::string reason) override {
    http_.post([self = shared_from_this(), code, reason = std::move(reason)]() mutable {
      self->call_closed_ = true;  // the call has forgotten this link: nothing to report back
      self->close_now(code, std::move(reason));
    });
  }

 private:
  void opened(std::shared_ptr<WebSocketConnection> connection) {
    connection_ = std::move(connection);
    for (auto& text : pending_) connection_->send_text(std::move(text));
    pending_.clear();
    if (closing_) connection_->close(close_code_, close_reason_);
  }

  void deliver(std::string text) {
    if (closing_) return;
    if (connection_) return connection_->send_text(std::move(text));
    if (pending_.size() < kMaxPendingText) pending_.push_back(std::move(text));
  }

  void received(std::string text) {
    if (closing_) return;
    if (!incoming_.take(monotonic_now())) {
      stats_.streams_closed_flood.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("phone stream of call rtc_{}: more than {} messages/s, closed", session_id_,
                   TelephonySignaling::kMessagesPerSecond);
      return close_now(kPolicyViolation, "too many messages");
    }
    worker_.post([worker = &worker_, id = session_id_, text = std::move(text)] {
      worker->with_live_session(id, [&](WorkerSession& session, Nanos now) {
        if (PhoneSession* phone = session.phone()) phone->on_stream_message(text, now);
      });
    });
  }

  void closed(uint16_t code) {
    connection_.reset();
    pending_.clear();
    closing_ = true;
    if (code == kUnsupportedData)
      spdlog::info("phone stream of call rtc_{}: a binary message, closed", session_id_);
    if (call_closed_) return;
    worker_.post([worker = &worker_, id = session_id_] {
      worker->with_live_session(id, [&](WorkerSession& session, Nanos now) {
        if (PhoneSession* phone = session.phone()) phone->on_stream_closed(now);
      });
    });
  }

  void close_now(uint16_t code, std::string reason) {
    if (closing_) return;
    closing_ = true;
    if (connection_) return connection_->close(code, std::move(reason));
    close_code_ = code;  // opened() closes once the handshake is done
    close_reason_ = std::move(reason);
  }

  HttpServer& http_;
  MediaWorker& worker_;
  const std::string session_id_;
  TelephonyStats& stats_;
  // HTTP thread only.
  std::shared_ptr<WebSocketConnection> connection_;
  std::deque<std::string> pending_;
  bool call_closed_ = false;
  bool closing_ = false;
  uint16_t close_code_ = kNormalClosure;
  std::string close_reason_;
  TokenBucket incoming_{TelephonySignaling::kMessageBurst, TelephonySignaling::kMessagesPerSecond};
};

}  // namespace

TelephonySignaling::TelephonySignaling(TelephonyConfig config, HttpServer& http, TelephonyHooks hooks)
    : config_(std::move(config)), http_(http), hooks_(std::move(hooks)) {}

void TelephonySignaling::count(PhoneProvider provider, TelephonyWebhookOutcome outcome) {
  stats_.webhooks[static_cast<size_t>(provider)][static_cast<size_t>(outcome)].fetch_add(
      1, std::memory_order_relaxed);
}

void TelephonySignaling::count(PhoneProvider provider, TelephonyStreamOutcome outcome) {
  stats_.streams[static_cast<size_t>(provider)][static_cast<size_t>(outcome)].fetch_add(
      1, std::memory_order_relaxed);
}

bool TelephonySignaling::enabled(PhoneProvider provider) const {
  switch (provider) {
    case PhoneProvider::twilio: return !config_.twilio_auth_tokens.empty();
    case PhoneProvider::telnyx: return config_.telnyx_public_key.has_value();
    case PhoneProvider::count: break;
  }
  return false;
}

std::optional<std::string_view> TelephonySignaling::stream_call_id(std::string_view path) {
  if (!path.starts_with(kRoutePrefix)) return std::nullopt;
  path.remove_prefix(kRoutePrefix.size());
  const size_t stream = path.find(kStreamSegment);
  if (stream == std::string_view::npos || path.substr(0, stream).find('/') != std::string_view::npos)
    return std::nullopt;
  path.remove_prefix(stream + kStreamSegment.size());
  return path.substr(0, path.find('/'));
}

bool TelephonySignaling::handle(const HttpRequest& request, const HttpServer::Responder& respond) {
  std::string_view path = request.path;
  if (!path.starts_with(kRoutePrefix)) return false;
  path.remove_prefix(kRoutePrefix.size());
  for (size_t i = 0; i < kPhoneProviderCount; ++i) {
    const auto provider = static_cast<PhoneProvider>(i);
    const std::string_view name = phone_provider_name(provider);
    if (!path.starts_with(name) || !enabled(provider)) continue;
    const std::string_view rest = path.substr(name.size());
    if (rest.empty()) {
      webhook(provider, request, respond);
      return true;
    }
    if (rest.starts_with(kStreamSegment)) {
      stream(provider, rest.substr(kStreamSegment.size()), request, respond);
      return true;
    }
  }
  return false;
}

std::string TelephonySignaling::public_base(const HttpRequest& request) const {
  if (!config_.public_url.empty()) return config_.public_url;
  // A webhook another pod passed on (a fleet's retry) was signed for the Host it was sent to.
  if (!request.header(kForwardedHeader).empty() && !request.header(kForwardedHostHeader).empty())
    return "http://" + std::string(request.header(kForwardedHostHeader));
  return "http://" + std::string(request.header("host"));
}

std::optional<TelephonyWebhookOutcome> TelephonySignaling::signature_refusal(
    PhoneProvider provider, const HttpRequest& request, const std::vector<FormField>& form,
    std::string_view base) const {
  if (provider == PhoneProvider::twilio) {
    const std::string_view signature = request.header("x-twilio-signature");
    if (signature.empty()) return TelephonyWebhookOutcome::no_signature;
    // Twilio signs the URL it was configured with, query included, and the form.
    const std::string url =
        std::string(base) + request.path + (request.query.empty() ? "" : "?" + request.query);
    for (const auto& token : config_.twilio_auth_tokens)
      if (twilio_signature_valid(token, url, form, signature)) return std::nullopt;
    spdlog::info("telephony webhook from {}: the Twilio signature does not verify for {}",
                 request.peer.to_string(), url);
    return TelephonyWebhookOutcome::bad_signature;
  }
  // Telnyx signs the timestamp and the raw body with its account key (Ed25519).
  const std::string_view signature = request.header("telnyx-signature-ed25519");
  const std::string_view timestamp = request.header("telnyx-timestamp");
  if (signature.empty() || timestamp.empty()) return TelephonyWebhookOutcome::no_signature;
  if (telnyx_signature_valid(*config_.telnyx_public_key, timestamp, request.body, signature,
                             hooks_.unix_now()))
    return std::nullopt;
  spdlog::info("telephony webhook from {}: the Telnyx signature does not verify (or is older than 5 min)",
               request.peer.to_string());
  return TelephonyWebhookOutcome::bad_signature;
}

std::string TelephonySignaling::answer_markup(
    const PendingCall& call, const std::string& stream_url,
    std::vector<std::pair<std::string, std::string>> parameters) const {
  TwimlStream stream;
  stream.url = stream_url;
  stream.parameters = std::move(parameters);
  if (call.provider == PhoneProvider::telnyx)
    return texml_start_stream(stream, config_.telnyx_max_call_seconds);
  return twiml_connect_stream(stream);
}

void TelephonySignaling::webhook(PhoneProvider provider, const HttpRequest& request,
                                 const HttpServer::Responder& respond) {
  const Nanos now = monotonic_now();
  expire(now);
  if (request.method != "POST") {
    count(provider, TelephonyWebhookOutcome::bad_request);
    return respond(HttpResponse::text(405, "the voice webhook takes POST"));
  }
  if (!media_type_is(request.header("content-type"), "application/x-www-form-urlencoded")) {
    count(provider, TelephonyWebhookOutcome::bad_request);
    return respond(HttpResponse::text(415, "the voice webhook takes application/x-www-form-urlencoded"));
  }
  auto form = parse_form_urlencoded(request.body);
  if (!form) {
    count(provider, TelephonyWebhookOutcome::bad_request);
    return respond(HttpResponse::text(400, "the form does not parse"));
  }
  const std::string base = public_base(request);
  if (auto refusal = signature_refusal(provider, request, *form, base)) {
    count(provider, *refusal);
    return respond(HttpResponse::text(403, *refusal == TelephonyWebhookOutcome::no_signature
                                               ? "the request is not signed"
                                               : "the request's signature does not verify"));
  }
  const std::string call_sid = field(*form, "CallSid");
  if (!printable_id(call_sid)) {
    count(provider, TelephonyWebhookOutcome::bad_request);
    return respond(HttpResponse::text(400, "the form has no CallSid"));
  }
  // The webhook URL's own query parameters are the stream's custom parameters (the number's
  // configuration is where an operator says which agent answers it), within what a stream's
  // start may carry: a call the start would refuse is refused here, before it is answered.
  auto parameters = custom_parameters(request.query);
  if (!parameters) {
    count(provider, TelephonyWebhookOutcome::bad_request);
    return respond(
        HttpResponse::text(400, "the webhook URL's query must be at most 32 parameters of at most 1 KiB"));
  }
  const std::string key = std::string(phone_provider_name(provider)) + ":" + call_sid;
  if (answered_.contains(key)) {
    count(provider, TelephonyWebhookOutcome::replayed);
    return respond(HttpResponse::text(403, "this call's stream has opened already"));
  }
  if (auto it = pending_.find(key); it != pending_.end()) {
    count(provider, TelephonyWebhookOutcome::retried);
    return respond(xml(200, it->second.twiml));
  }
  MediaWorker* worker = nullptr;
  const size_t streams = http_.stats().websockets_open.load(std::memory_order_relaxed) + pending_.size();
  if (pending_.size() < kMaxPending && streams < config_.max_websockets && !hooks_.admit())
    worker = hooks_.reserve_worker();
  if (!worker) {
    count(provider, TelephonyWebhookOutcome::busy);
    return respond(xml(200, twiml_reject("busy")));
  }

  PendingCall call;
  call.provider = provider;
  call.worker = worker;
  call.session_id = hooks_.mint_session_id(*worker);
  call.token = random_hex(16);
  call.call_sid = call_sid;
  call.account_sid = field(*form, "AccountSid");
  call.from = field(*form, "From");
  call.to = field(*form, "To");
  call.expires_at = now + config_.stream_wait;
  const std::string ws_base =
      base.starts_with("https://") ? "wss://" + base.substr(8) : "ws://" + base.substr(7);
  const std::string stream_url = ws_base + std::string(kRoutePrefix) + phone_provider_name(provider) +
                                 std::string(kStreamSegment) + std::string(kCallIdPrefix) + call.session_id +
                                 "/" + call.token;
  call.twiml = answer_markup(call, stream_url, std::move(*parameters));
  if (!hooks_.claim_call) return answer(std::move(call), respond);
  // A fleet: the CallSid is claimed in the registry first, so that a replay on another pod is
  // one, and a provider's retry that lands elsewhere reaches the pod that answered.
  const std::string our_call_id = std::string(kCallIdPrefix) + call.session_id;
  hooks_.claim_call(provider, call_sid, our_call_id,
                    [this, call = std::move(call), request, respond,
                     our_call_id](std::optional<std::string> holder) mutable {
                      http_.post([this, call = std::move(call), request = std::move(request), respond,
                                  our_call_id, holder = std::move(holder)]() mutable {
                        claimed(std::move(call), request, respond, our_call_id, holder);
                      });
                    });
}

void TelephonySignaling::claimed(PendingCall call, const HttpRequest& request,
                                 const HttpServer::Responder& respond, const std::string& our_call_id,
                                 const std::optional<std::string>& holder) {
  if (!holder) {
    // The registry did not answer: this pod decides alone (a replay on another pod would be
    // answered too); counted, like the ek_ key budget's fallback.
    stats_.claims_pod_fallback.fetch_add(1, std::memory_order_relaxed);
    return answer(std::move(call), respond);
  }
  if (*holder == our_call_id) return answer(std::move(call), respond);
  release(call);
  // A retry that came while this pod's own first claim was out: the first one's answer.
  if (holder->starts_with(kCallIdPrefix)) {
    auto by_id = pending_by_id_.find(holder->substr(kCallIdPrefix.size()));
    if (auto it = by_id == pending_by_id_.end() ? pending_.end() : pending_.find(by_id->second);
        it != pending_.end()) {
      count(call.provider, TelephonyWebhookOutcome::retried);
      return respond(xml(200, it->second.twiml));
    }
  }
  // Answered before, by the call `holder`: its pod says whether this is the provider's retry
  // (the same answer) or a replay.
  if (hooks_.forward_to_owner && hooks_.forward_to_owner(request, *holder, respond)) {
    count(call.provider, TelephonyWebhookOutcome::forwarded);
    return;
  }
  count(call.provider, TelephonyWebhookOutcome::replayed);
  respond(HttpResponse::text(403, "this call was answered already"));
}

void TelephonySignaling::answer(PendingCall call, const HttpServer::Responder& respond) {
  // A retry may have come in while the claim was out: it waits on the same answer.
  const std::string key = std::string(phone_provider_name(call.provider)) + ":" + call.call_sid;
  if (auto it = pending_.find(key); it != pending_.end()) {
    release(call);
    count(call.provider, TelephonyWebhookOutcome::retried);
    return respond(xml(200, it->second.twiml));
  }
  count(call.provider, TelephonyWebhookOutcome::answered);
  // The caller's number is personal data: it goes to the backend, not to the logs.
  spdlog::info("telephony: {} call {} answered as rtc_{}", phone_provider_name(call.provider), call.call_sid,
               call.session_id);
  auto twiml = call.twiml;
  pending_by_id_[call.session_id] = key;
  pending_.emplace(key, std::move(call));
  stats_.pending.store(pending_.size(), std::memory_order_relaxed);
  respond(xml(200, std::move(twiml)));
}

void TelephonySignaling::stream(PhoneProvider provider, std::string_view rest, const HttpRequest& request,
                                const HttpServer::Responder& respond) {
  expire(monotonic_now());
  if (!request.websocket_upgrade) {
    count(provider, TelephonyStreamOutcome::not_websocket);
    return respond(HttpResponse::text(426, "the media stream is a WebSocket"));
  }
  // rtc_<session id>/<token>
  const size_t slash = rest.find('/');
  std::string_view call_id = rest.substr(0, slash);
  const std::string_view token =
      slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  auto by_id = call_id.starts_with(kCallIdPrefix)
                   ? pending_by_id_.find(std::string(call_id.substr(kCallIdPrefix.size())))
                   : pending_by_id_.end();
  auto it = by_id == pending_by_id_.end() ? pending_.end() : pending_.find(by_id->second);
  if (it == pending_.end() || it->second.provider != provider) {
    count(provider, TelephonyStreamOutcome::unknown_call);
    return respond(HttpResponse::text(404, "no call waits for a stream under this id"));
  }
  PendingCall& call = it->second;
  if (token.size() != call.token.size() ||
      CRYPTO_memcmp(token.data(), call.token.data(), token.size()) != 0) {
    count(provider, TelephonyStreamOutcome::bad_token);
    spdlog::warn("telephony: a stream for rtc_{} from {} with a wrong token", call.session_id,
                 request.peer.to_string());
    return respond(HttpResponse::text(403, "the stream token is not this call's"));
  }
  // One use: the call leaves the waiting list, and its CallSid is a replay from now on.
  PhonePlan plan;
  plan.id = call.session_id;
  plan.access.any_server_key = true;  // no key placed it: the app servers' keys act on it
  plan.call_sid = call.call_sid;
  plan.account_sid = call.account_sid;
  plan.from = call.from;
  plan.to = call.to;
  plan.client_address = request.peer.to_string();
  plan.user_agent = std::string(request.header("user-agent"));
  plan.provider = provider;
  // Twilio's start names the webhook's CallSid; Telnyx's names its call_control_id instead
  // (the token in the path is what binds a Telnyx stream to its call).
  plan.start_names_call_sid = provider == PhoneProvider::twilio;
  MediaWorker& worker = *call.worker;
  remember_answered(it->first);
  pending_by_id_.erase(by_id);
  pending_.erase(it);
  stats_.pending.store(pending_.size(), std::memory_order_relaxed);
  count(provider, TelephonyStreamOutcome::opened);

  auto socket = std::make_shared<PhoneStreamSocket>(http_, worker, plan.id, stats_);
  // Posted before any of the provider's messages: the worker builds the session first.
  worker.post([&worker, plan = std::move(plan), socket]() mutable {
    const PhoneProvider provider = plan.provider;
    worker.add_phone_session(std::move(plan), make_codec(provider), socket);
  });
  respond(HttpResponse::accept_websocket(socket->handlers()));
}

void TelephonySignaling::remember_answered(const std::string& call_sid) {
  answered_.insert(call_sid);
  answered_order_.push_back(call_sid);
  if (answered_order_.size() > kRememberedCalls) {
    answered_.erase(answered_order_.front());
    answered_order_.pop_front();
  }
}

void TelephonySignaling::release(const PendingCall& call) {
  call.worker->metrics().sessions_active.fetch_sub(1, std::memory_order_relaxed);
}

void TelephonySignaling::expire(Nanos now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expires_at > now) {
      ++it;
      continue;
    }
    spdlog::info("telephony: call {} (rtc_{}): no stream came within the wait, released", it->first,
                 it->second.session_id);
    release(it->second);
    pending_by_id_.erase(it->second.session_id);
    it = pending_.erase(it);
  }
  stats_.pending.store(pending_.size(), std::memory_order_relaxed);
}

}  // namespace rtce
