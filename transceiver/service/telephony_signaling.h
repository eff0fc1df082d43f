// telephony_signaling.h — the phone providers' side of the transceiver (phone_provider.h): each
// one's voice webhook (`POST /v1/telephony/<provider>`) and the media stream its answer points
// at (`GET /v1/telephony/<provider>/stream/rtc_<session id>/<token>`, a WebSocket).
//
// The webhook checks the provider's signature, reserves a worker slot and a session id at
// once (so a pod at capacity rejects the call in TwiML instead of failing it later), and
// answers with `<Connect><Stream>` whose URL carries a one-time token minted for that call:
// the stream endpoint refuses any WebSocket without a live, unused token, so nobody can open
// streams to the backends. A provider that retries an unanswered webhook gets the same
// answer; a CallSid whose stream already opened is a replay. On the stream, the socket stays
// on the HTTP thread and the call on its worker (PhoneStreamSocket, like the sideband's).
// HTTP thread only, apart from the stats.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "clock.h"
#include "form_urlencoded.h"
#include "http_server.h"
#include "realtime_signaling.h"
#include "telephony/phone_provider.h"

namespace rtce {

class MediaWorker;

// What the webhook answered, by outcome; and what became of stream upgrades.
#define RTCE_TELEPHONY_WEBHOOK_OUTCOMES(X)                                                 \
  X(answered)      /* a new call: TwiML with a stream */                                   \
  X(retried)       /* the provider asked again for a call whose stream has not opened */   \
  X(busy)          /* draining, over the setup rate or at capacity: TwiML <Reject busy> */ \
  X(no_signature)  /* no X-Twilio-Signature (Telnyx: no telnyx-signature-ed25519): 403 */  \
  X(bad_signature) /* a signature that does not verify: 403 */                             \
  X(replayed)      /* a CallSid whose stream already opened: 403 */                        \
  X(bad_request)   /* not a form POST, no CallSid: 4xx */                                  \
  X(forwarded)     /* a fleet: another pod's call holds the CallSid; passed to that pod */
#define RTCE_TELEPHONY_STREAM_OUTCOMES(X)                                              \
  X(opened)        /* a valid token: the WebSocket is accepted */                      \
  X(bad_token)     /* the call is waiting, the token is not its: 403 */                \
  X(unknown_call)  /* no call waits for a stream under that id (used, expired): 404 */ \
  X(not_websocket) /* not an upgrade request: 426 */

enum class TelephonyWebhookOutcome : uint8_t { RTCE_TELEPHONY_WEBHOOK_OUTCOMES(RTCE_VOCAB_ENUMERATOR) count };
enum class TelephonyStreamOutcome : uint8_t { RTCE_TELEPHONY_STREAM_OUTCOMES(RTCE_VOCAB_ENUMERATOR) count };
inline constexpr const char* kTelephonyWebhookOutcomeNames[] = {
    RTCE_TELEPHONY_WEBHOOK_OUTCOMES(RTCE_VOCAB_LABEL)};
inline constexpr const char* kTelephonyStreamOutcomeNames[] = {
    RTCE_TELEPHONY_STREAM_OUTCOMES(RTCE_VOCAB_LABEL)};

// Read by /metrics scrapes; written on the HTTP thread.
struct TelephonyStats {
  template <typename Outcome>
  using ByProvider =
      std::array<std::array<std::atomic<uint64_t>, static_cast<size_t>(Outcome::count)>, kPhoneProviderCount>;
  ByProvider<TelephonyWebhookOutcome> webhooks{};
  ByProvider<TelephonyStreamOutcome> streams{};
  std::atomic<uint64_t> streams_closed_flood{0};
  std::atomic<uint64_t> pending{0};              // answered calls whose stream has not opened yet
  std::atomic<uint64_t> claims_pod_fallback{0};  // a fleet's CallSid claim unanswered: decided here
};

struct TelephonyConfig {
  // Every one verifies (a rotation: Twilio's primary and secondary token); none: Twilio's
  // endpoints are off.
  std::vector<std::string> twilio_auth_tokens;
  // The Telnyx account's Ed25519 public key (raw); unset: Telnyx's endpoints are off.
  std::optional<std::array<uint8_t, 32>> telnyx_public_key;
  // A Telnyx call's TeXML keeps the call up this long beside its stream (<Pause length>).
  int telnyx_max_call_seconds = 14400;
  std::string public_url;              // "https://host[:port]"; empty: http:// and the Host header
  Nanos stream_wait = 30'000'000'000;  // an answered call's stream must open within this
  size_t max_websockets = 256;  // the HTTP server's: a call whose stream would be refused is not answered
};

// What the service provides.
struct TelephonyHooks {
  // Draining or over the setup rate: the refusal (counted by the service).
  std::function<std::optional<RealtimeError>()> admit;
  // The least loaded worker with room, its sessions_active already counting the call; nullptr at capacity.
  std::function<MediaWorker*()> reserve_worker;
  std::function<std::string(const MediaWorker&)> mint_session_id;
  std::function<int64_t()> unix_now;  // wall clock, for the age of a signed webhook
  // With a registry (else empty): claims the provider's CallSid for the call `call_id`;
  // done(the call id holding it) on any thread, done(nullopt) when Redis did not answer.
  std::function<void(PhoneProvider provider, std::string call_sid, std::string call_id,
                     std::function<void(std::optional<std::string>)> done)>
      claim_call;
  // Passes the request to the pod that owns call `call_id` and answers with its answer; false
  // when that is this pod or no pod the registry knows.
  std::function<bool(const HttpRequest& request, const std::string& call_id,
                     const HttpServer::Responder& respond)>
      forward_to_owner;
};

class TelephonySignaling {
 public:
  // /v1/telephony/<provider> (the webhook), /v1/telephony/<provider>/stream/<call id>/<token>.
  static constexpr std::string_view kRoutePrefix = "/v1/telephony/";
  static constexpr std::string_view kStreamSegment = "/stream/";
  // The call id (rtc_…) a stream path names, whatever the provider; nullopt for another path.
  static std::optional<std::string_view> stream_call_id(std::string_view path);
  // Provider messages on one stream: a burst, then a steady rate (50 media a second, and a few
  // marks and DTMF).
  static constexpr double kMessageBurst = 100;
  static constexpr double kMessagesPerSecond = 75;
  static constexpr size_t kMaxPending = 4096;        // answered calls waiting for their streams
  static constexpr size_t kRememberedCalls = 16384;  // CallSids whose streams opened (replays)

  TelephonySignaling(TelephonyConfig config, HttpServer& http, TelephonyHooks hooks);

  bool enabled(PhoneProvider provider) const;
  bool enabled() const { return enabled(PhoneProvider::twilio) || enabled(PhoneProvider::telnyx); }
  // Answers the telephony routes; false for any other path.
  bool handle(const HttpRequest& request, const HttpServer::Responder& respond);
  // Gives back the reservations of answered calls whose stream never came.
  void expire(Nanos now);
  const TelephonyStats& stats() const { return stats_; }

 private:
  struct PendingCall {
    PhoneProvider provider;
    MediaWorker* worker;
    std::string session_id;
    std::string token;
    std::string call_sid, account_sid, from, to;
    std::string twiml;
    Nanos expires_at;
  };

  void webhook(PhoneProvider provider, const HttpRequest& request, const HttpServer::Responder& respond);
  void stream(PhoneProvider provider, std::string_view rest, const HttpRequest& request,
              const HttpServer::Responder& respond);
  // Whether the provider signed the request; else the refusal to count and send.
  std::optional<TelephonyWebhookOutcome> signature_refusal(PhoneProvider provider, const HttpRequest& request,
                                                           const std::vector<FormField>& form,
                                                           std::string_view base) const;
  std::string answer_markup(const PendingCall& call, const std::string& stream_url,
                            std::vector<std::pair<std::string, std::string>> parameters) const;
  // The rest of a webhook once the fleet's claim on its CallSid came back (HTTP thread).
  void claimed(PendingCall call, const HttpRequest& request, const HttpServer::Responder& respond,
               const std::string& our_call_id, const std::optional<std::string>& holder);
  void answer(PendingCall call, const HttpServer::Responder& respond);
  void count(PhoneProvider provider, TelephonyWebhookOutcome outcome);
  void count(PhoneProvider provider, TelephonyStreamOutcome outcome);
  std::string public_base(const HttpRequest& request) const;
  void remember_answered(const std::string& call_sid);
  void release(const PendingCall& call);

  TelephonyConfig config_;
  HttpServer& http_;
  TelephonyHooks hooks_;
  TelephonyStats stats_;
  // Keyed "<provider>:<CallSid>": each provider's ids are its own.
  std::unordered_map<std::string, PendingCall> pending_;        // by CallSid
  std::unordered_map<std::string, std::string> pending_by_id_;  // session id -> CallSid
  std::unordered_set<std::string> answered_;                    // CallSids whose stream opened
  std::deque<std::string> answered_order_;                      // oldest first, to bound answered_
};

}  // namespace rtce
