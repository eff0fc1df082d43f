// realtime_signaling.h — the Realtime-compatible signaling surface of rtcedge-transceiver, so
// that voice-agent code written for it (`@openai/agents-realtime`, the `openai` SDKs) connects
// by changing only its base URL: POST /v1/realtime/calls (raw SDP or multipart/form-data),
// the older POST /v1/realtime, hangup and GET/DELETE of a call, POST
// /v1/realtime/client_secrets and the legacy POST /v1/realtime/sessions, all with the JSON
// errors those clients read. Socket-free: the service supplies admission, placement and
// session lookups as hooks, and the clock; this class owns the parsing, the ephemeral keys
// and the response shapes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "call_access.h"
#include "ephemeral_key.h"
#include "http_server.h"
#include "token_bucket.h"
#include "transceiver_config.h"
#include "vocab.h"

namespace rtce {

// X(code, HTTP status, error type, message): every error a Realtime route answers, as
// {"error":{"message","type","code","param"}}.
#define RTCE_REALTIME_ERRORS(X)                                                                           \
  X(invalid_offer, 400, "invalid_request_error", "the SDP offer was refused")                             \
  X(missing_sdp, 400, "invalid_request_error", "the form has no sdp part")                                \
  X(invalid_multipart, 400, "invalid_request_error", "the multipart/form-data body is malformed")         \
  X(invalid_session, 400, "invalid_request_error", "the session is not a JSON object")                    \
  X(invalid_json, 400, "invalid_request_error", "the body is not a JSON object")                          \
  X(invalid_expires_after, 400, "invalid_request_error",                                                  \
    "expires_after.seconds must be an integer 10..7200")                                                  \
  X(invalid_anchor, 400, "invalid_request_error", "expires_after.anchor must be \"created_at\"")          \
  X(session_too_large, 400, "invalid_request_error", "the session config is too large to carry in a key") \
  X(unsupported_media_type, 415, "invalid_request_error",                                                 \
    "Content-Type must be application/sdp or multipart/form-data")                                        \
  X(invalid_api_key, 401, "invalid_request_error",                                                        \
    "missing or unknown API key (Authorization: Bearer <key>)")                                           \
  X(expired_api_key, 401, "invalid_request_error", "the ephemeral key has expired")                       \
  X(ephemeral_key_not_allowed, 403, "invalid_request_error",                                              \
    "an ephemeral key cannot mint keys: use a server API key")                                            \
  X(key_exhausted, 403, "invalid_request_error",                                                          \
    "this ephemeral key has created every call it may (max_calls): mint another")                         \
  X(invalid_max_calls, 400, "invalid_request_error", "max_calls must be an integer 1..1000")              \
  X(mint_rate_limited, 429, "rate_limit_error", "too many keys minted with this API key: slow down")      \
  X(call_not_found, 404, "invalid_request_error", "no such call")                                         \
  X(sideband_needs_server_key, 403, "invalid_request_error",                                              \
    "a sideband needs a server API key: an ephemeral key cannot attach to a call")                        \
  X(websocket_required, 426, "invalid_request_error",                                                     \
    "the sideband is a WebSocket: GET with Upgrade: websocket")                                           \
  X(too_many_sidebands, 409, "invalid_request_error",                                                     \
    "the call has realtime.sideband.max_per_call sidebands attached")                                     \
  X(owner_unreachable, 502, "server_error", "the transceiver pod that owns this call did not answer")     \
  X(client_policy_not_allowed, 400, "invalid_request_error",                                              \
    "session.client is set by the app server (in the key it mints), not by the browser")                  \
  X(not_found, 404, "invalid_request_error", "no such Realtime endpoint")                                 \
  X(method_not_allowed, 405, "invalid_request_error", "method not allowed on this path")                  \
  X(rate_limited, 429, "rate_limit_error", "session setup rate exceeded")                                 \
  X(at_capacity, 503, "server_error", "every media worker is at sessions.max_per_worker")                 \
  X(draining, 503, "server_error", "draining: this transceiver takes no new calls")

#define RTCE_REALTIME_ERROR_ENUMERATOR_(code, status, type, message) code,
enum class RealtimeError { RTCE_REALTIME_ERRORS(RTCE_REALTIME_ERROR_ENUMERATOR_) };
#undef RTCE_REALTIME_ERROR_ENUMERATOR_
#define RTCE_REALTIME_ERROR_VALUE_(code, status, type, message) RealtimeError::code,
inline constexpr RealtimeError kRealtimeErrors[] = {RTCE_REALTIME_ERRORS(RTCE_REALTIME_ERROR_VALUE_)};
#undef RTCE_REALTIME_ERROR_VALUE_
inline constexpr size_t kRealtimeErrorCount = std::size(kRealtimeErrors);

std::string_view realtime_error_name(RealtimeError error);  // the "code" field and the metric label
unsigned realtime_error_status(RealtimeError error);
std::string_view realtime_error_type(RealtimeError error);
std::string_view realtime_error_message(RealtimeError error);

// The JSON error response; `detail` is appended to the message ("...: line 3: no Opus codec"),
// `param` names the offending field (null when empty). 429 and 503 carry Retry-After.
HttpResponse realtime_error_response(RealtimeError error, std::string_view detail = {},
                                     std::string_view param = {});

// What the service needs to place a call.
struct RealtimeOffer {
  std::string_view sdp;                               // valid until the place hook returns
  nlohmann::json session = nlohmann::json::object();  // the call's session config
  std::string user_agent;
  std::string region_header;  // the value of relay.ingress_header ("" = none; global relay)
  SocketAddress client;       // the HTTP peer
  CallAccess access;          // who may act on the call (call_access.h)
};
struct PlacedCall {
  std::string session_id;  // session_id.h: names its owner; the call id is "rtc_" + it
  std::string answer;      // SDP
};
struct PlaceRefusal {
  RealtimeError error = RealtimeError::invalid_offer;
  std::string detail;  // the SDP parser's reason, say
};
using PlaceResult = std::variant<PlacedCall, PlaceRefusal>;

struct RealtimeHooks {
  // http.api_keys accept the request's Bearer key (true for any request when none are set).
  std::function<bool(const HttpRequest&)> server_key_ok;
  // The principal of a request server_key_ok accepted (call_access.h): "" without http.api_keys.
  std::function<std::string(const HttpRequest&)> server_principal;
  // Draining or over the setup rate: the refusal; nullopt = go ahead (a token is taken).
  std::function<std::optional<RealtimeError>()> admit;
  // Parses the offer and places a session; calls done exactly once, from any thread.
  std::function<void(const RealtimeOffer&, std::function<void(PlaceResult)> done)> place;
  // GET, PATCH or DELETE of /v1/realtime/calls/rtc_<id> by `requester` (a principal): the
  // /v1/sessions/<id> handling, a call the requester may not act on answering as unknown
  // (JSON call_not_found).
  std::function<void(const std::string& session_id, const std::string& requester, const HttpRequest&,
                     HttpServer::Responder)>
      session_request;
  // Ends the session; done(true) when it was live, done(false) when unknown or not the
  // requester's to end.
  std::function<void(const std::string& session_id, const std::string& requester,
                     std::function<void(bool ended)> done)>
      hang_up;
  // GET /v1/realtime?call_id=rtc_<id> upgrading to a WebSocket, by a server key's `requester`:
  // attaches the sideband and accepts the WebSocket, or answers call_not_found (unknown, not
  // the requester's, not a Realtime call, or ended) or too_many_sidebands.
  std::function<void(const std::string& session_id, const std::string& requester, const HttpRequest&,
                     HttpServer::Responder)>
      attach_sideband;
  std::function<int64_t()> unix_now;
  // The fleet's count of an ek_ key's calls (Redis; unset without one: per pod). done(true):
  // taken; done(false): the key made its max_calls; done(nullopt): the store did not answer
  // (this pod's own count decides). done runs on the HTTP thread.
  std::function<void(const std::string& principal, uint32_t max_calls, int64_t expires_at,
                     std::function<void(std::optional<bool> taken)> done)>
      take_key_call;
  // A call take_key_call counted that was not made after all (a refused offer, say).
  std::function<void(const std::string& principal)> give_back_key_call;
};

// Where an ek_ key's call was counted: fleet (Redis), or this pod (no Redis, or it did not
// answer: the fallback is counted).
#define RTCE_KEY_BUDGET_OUTCOMES(X) X(fleet_taken) X(fleet_exhausted) X(pod_fallback)
enum class KeyBudgetOutcome : uint8_t { RTCE_KEY_BUDGET_OUTCOMES(RTCE_VOCAB_ENUMERATOR) };
inline constexpr const char* kKeyBudgetOutcomeNames[] = {RTCE_KEY_BUDGET_OUTCOMES(RTCE_VOCAB_LABEL)};

// Counters for /metrics; the create counters are bumped from worker threads too.
struct RealtimeStats {
  std::atomic<uint64_t> calls_created{0};
  std::array<std::atomic<uint64_t>, kRealtimeErrorCount> calls_rejected{};
  std::atomic<uint64_t> calls_hung_up{0};
  std::array<std::atomic<uint64_t>, kRealtimeErrorCount> sidebands_refused{};  // before the call was asked
  std::array<std::atomic<uint64_t>, std::size(kKeyBudgetOutcomeNames)> key_budget{};
  std::atomic<uint64_t> keys_minted{0};
  std::array<std::atomic<uint64_t>, kRealtimeErrorCount> keys_refused{};
};

inline constexpr std::string_view kRealtimeCallIdPrefix = "rtc_";
inline constexpr double kMintBurst = 100;
inline constexpr double kMintPerSecond = 20;
inline constexpr uint32_t kMaxCallsPerKey = 1000;  // the most a client_secrets request may ask for
inline constexpr std::string_view kRealtimeCallsPath = "/v1/realtime/calls";

// The ephemeral-key secrets of the configuration: realtime.key_secrets, then the lines of
// realtime.key_file. Throws ConfigError naming the key (and the file's line) on a bad item.
std::vector<EphemeralSecret> realtime_key_secrets(const TransceiverConfig& config);

// The session id in a call id "rtc_<hex>", or "" when it is not one.
std::string session_id_of_call(std::string_view call_id);
// A query parameter's raw value ("" when absent): call_id, the legacy route's model.
std::string_view query_value(std::string_view query, std::string_view name);

class RealtimeSignaling {
 public:
  // max_part_bytes bounds each multipart part.
  RealtimeSignaling(EphemeralKeyring keyring, int64_t default_key_lifetime_s, size_t max_part_bytes,
                    RealtimeHooks hooks);

  // True when the path is under /v1/realtime; respond is then called exactly once.
  bool handle(const HttpRequest& request, const HttpServer::Responder& respond);

  const RealtimeStats& stats() const { return stats_; }
  // The global relay's region header (relay.ingress_header, lowercase): its value goes into
  // each RealtimeOffer. Call before serving.
  void set_ingress_header(std::string lowercase_name) { ingress_header_ = std::move(lowercase_name); }

 private:
  // A call on its way to a worker: the offer (its SDP owned here) and where its key's call was counted.
  enum class Budget : uint8_t { none, pod, fleet };
  struct PendingCall {
    std::string sdp;
    RealtimeOffer offer;
    Budget budget = Budget::none;
  };
  void create_call(const HttpRequest& request, const HttpServer::Responder& respond);
  void place_call(PendingCall call, const HttpServer::Responder& respond);
  void give_back(const PendingCall& call);
  void call_request(std::string_view rest, const HttpRequest& request, const HttpServer::Responder& respond);
  void mint(const HttpRequest& request, const HttpServer::Responder& respond, bool legacy_sessions);
  void sideband(const HttpRequest& request, const HttpServer::Responder& respond);

  EphemeralKeyring keyring_;
  int64_t default_key_lifetime_s_;
  size_t max_part_bytes_;
  RealtimeHooks hooks_;
  RealtimeStats stats_;
  std::string ingress_header_;
  KeyCallBudget key_calls_;  // calls per ek_ key on this pod
  // Keys minted per server key (its principal): kMintBurst at once, kMintPerSecond after.
  // As many entries as http.api_keys has keys (one, "", without keys). HTTP thread only.
  std::unordered_map<std::string, TokenBucket> mint_buckets_;
};

}  // namespace rtce
