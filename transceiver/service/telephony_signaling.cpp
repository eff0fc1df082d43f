// telephony_signaling.cpp — see telephony_signaling.h.
#include "telephony_signaling.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "call_forwarder.h"
#include "form_urlencoded.h"
#include "media_worker.h"
#include "random.h"
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
constexpr size_t kMaxCallSidChars = 64;
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

bool printable_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxCallSidChars) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string field(const std::vector<FormField>& form, std::string_view name) {
  for (const auto& f : form)
    if (f.name == name) return f.value;
  return {};
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

void TelephonySignaling::count(TelephonyWebhookOutcome outcome) {
  stats_.webhooks[static_cast<size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
}

void TelephonySignaling::count(TelephonyStreamOutcome outcome) {
  stats_.streams[static_cast<size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
}

bool TelephonySignaling::handle(const HttpRequest& request, const HttpServer::Responder& respond) {
  if (!enabled()) return false;
  if (request.path == kWebhookPath) {
    webhook(request, respond);
    return true;
  }
  if (request.path.starts_with(kStreamPrefix)) {
    stream(request, respond);
    return true;
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

void TelephonySignaling::webhook(const HttpRequest& request, const HttpServer::Responder& respond) {
  const Nanos now = monotonic_now();
  expire(now);
  if (request.method != "POST") {
    count(TelephonyWebhookOutcome::bad_request);
    return respond(HttpResponse::text(405, "the voice webhook takes POST"));
  }
  if (!media_type_is(request.header("content-type"), "application/x-www-form-urlencoded")) {
    count(TelephonyWebhookOutcome::bad_request);
    return respond(HttpResponse::text(415, "the voice webhook takes application/x-www-form-urlencoded"));
  }
  const std::string_view signature = request.header("x-twilio-signature");
  if (signature.empty()) {
    count(TelephonyWebhookOutcome::no_signature);
    return respond(HttpResponse::text(403, "the request has no X-Twilio-Signature"));
  }
  auto form = parse_form_urlencoded(request.body);
  if (!form) {
    count(TelephonyWebhookOutcome::bad_request);
    return respond(HttpResponse::text(400, "the form does not parse"));
  }
  // Twilio signs the URL it was configured with, query included.
  const std::string base = public_base(request);
  const std::string url = base + request.path + (request.query.empty() ? "" : "?" + request.query);
  if (!twilio_signature_valid(config_.twilio_auth_token, url, *form, signature)) {
    count(TelephonyWebhookOutcome::bad_signature);
    spdlog::info("telephony webhook from {}: the signature does not verify for {}", request.peer.to_string(),
                 url);
    return respond(HttpResponse::text(403, "the X-Twilio-Signature does not verify"));
  }
  const std::string call_sid = field(*form, "CallSid");
  if (!printable_id(call_sid)) {
    count(TelephonyWebhookOutcome::bad_request);
    return respond(HttpResponse::text(400, "the form has no CallSid"));
  }
  if (answered_.contains(call_sid)) {
    count(TelephonyWebhookOutcome::replayed);
    return respond(HttpResponse::text(403, "this call's stream has opened already"));
  }
  if (auto it = pending_.find(call_sid); it != pending_.end()) {
    count(TelephonyWebhookOutcome::retried);
    return respond(xml(200, it->second.twiml));
  }
  MediaWorker* worker = nullptr;
  if (pending_.size() < kMaxPending && !hooks_.admit()) worker = hooks_.reserve_worker();
  if (!worker) {
    count(TelephonyWebhookOutcome::busy);
    return respond(xml(200, twiml_reject("busy")));
  }

  PendingCall call;
  call.worker = worker;
  call.session_id = hooks_.mint_session_id(*worker);
  call.token = random_hex(16);
  call.call_sid = call_sid;
  call.account_sid = field(*form, "AccountSid");
  call.from = field(*form, "From");
  call.to = field(*form, "To");
  call.expires_at = now + config_.stream_wait;
  TwimlStream stream;
  const std::string ws_base =
      base.starts_with("https://") ? "wss://" + base.substr(8) : "ws://" + base.substr(7);
  stream.url =
      ws_base + std::string(kStreamPrefix) + std::string(kCallIdPrefix) + call.session_id + "/" + call.token;
  // The webhook URL's own query parameters are the stream's custom parameters: the number's
  // configuration is where an operator says which agent answers it.
  if (auto query = parse_form_urlencoded(request.query))
    for (auto& f : *query) stream.parameters.emplace_back(std::move(f.name), std::move(f.value));
  call.twiml = twiml_connect_stream(stream);
  if (!hooks_.claim_call) return answer(std::move(call), respond);
  // A fleet: the CallSid is claimed in the registry first, so that a replay on another pod is
  // one, and a provider's retry that lands elsewhere reaches the pod that answered.
  const std::string our_call_id = std::string(kCallIdPrefix) + call.session_id;
  hooks_.claim_call(call_sid, our_call_id,
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
  // Answered before, by the call `holder`: its pod says whether this is the provider's retry
  // (the same answer) or a replay.
  if (hooks_.forward_to_owner && hooks_.forward_to_owner(request, *holder, respond)) {
    count(TelephonyWebhookOutcome::forwarded);
    return;
  }
  count(TelephonyWebhookOutcome::replayed);
  respond(HttpResponse::text(403, "this call was answered already"));
}

void TelephonySignaling::answer(PendingCall call, const HttpServer::Responder& respond) {
  // A retry may have come in while the claim was out: it waits on the same answer.
  if (auto it = pending_.find(call.call_sid); it != pending_.end()) {
    release(call);
    count(TelephonyWebhookOutcome::retried);
    return respond(xml(200, it->second.twiml));
  }
  count(TelephonyWebhookOutcome::answered);
  spdlog::info("telephony: call {} from {} answered as rtc_{}", call.call_sid, call.from, call.session_id);
  auto twiml = call.twiml;
  pending_by_id_[call.session_id] = call.call_sid;
  const std::string call_sid = call.call_sid;
  pending_.emplace(call_sid, std::move(call));
  stats_.pending.store(pending_.size(), std::memory_order_relaxed);
  respond(xml(200, std::move(twiml)));
}

void TelephonySignaling::stream(const HttpRequest& request, const HttpServer::Responder& respond) {
  expire(monotonic_now());
  if (!request.websocket_upgrade) {
    count(TelephonyStreamOutcome::not_websocket);
    return respond(HttpResponse::text(426, "the media stream is a WebSocket"));
  }
  // rtc_<session id>/<token>
  std::string_view rest = std::string_view(request.path).substr(kStreamPrefix.size());
  const size_t slash = rest.find('/');
  std::string_view call_id = rest.substr(0, slash);
  const std::string_view token =
      slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  auto by_id = call_id.starts_with(kCallIdPrefix)
                   ? pending_by_id_.find(std::string(call_id.substr(kCallIdPrefix.size())))
                   : pending_by_id_.end();
  if (by_id == pending_by_id_.end()) {
    count(TelephonyStreamOutcome::unknown_call);
    return respond(HttpResponse::text(404, "no call waits for a stream under this id"));
  }
  auto it = pending_.find(by_id->second);
  PendingCall& call = it->second;
  if (token.size() != call.token.size() ||
      CRYPTO_memcmp(token.data(), call.token.data(), token.size()) != 0) {
    count(TelephonyStreamOutcome::bad_token);
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
  MediaWorker& worker = *call.worker;
  remember_answered(call.call_sid);
  pending_by_id_.erase(by_id);
  pending_.erase(it);
  stats_.pending.store(pending_.size(), std::memory_order_relaxed);
  count(TelephonyStreamOutcome::opened);

  auto socket = std::make_shared<PhoneStreamSocket>(http_, worker, plan.id, stats_);
  // Posted before any of the provider's messages: the worker builds the session first.
  worker.post([&worker, plan = std::move(plan), socket]() mutable {
    worker.add_phone_session(std::move(plan), std::make_unique<TwilioStreamCodec>(), socket);
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
