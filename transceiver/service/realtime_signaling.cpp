// realtime_signaling.cpp — see realtime_signaling.h.
#include "realtime_signaling.h"

#include <utility>

#include "config_file.h"
#include "error.h"
#include "json_depth.h"
#include "multipart_form.h"
#include "random.h"

namespace rtce {
namespace {

#define RTCE_REALTIME_ERROR_LABEL_(code, status, type, message) #code,
constexpr const char* kErrorNames[] = {RTCE_REALTIME_ERRORS(RTCE_REALTIME_ERROR_LABEL_)};
#undef RTCE_REALTIME_ERROR_LABEL_
#define RTCE_REALTIME_ERROR_STATUS_(code, status, type, message) status,
constexpr unsigned kErrorStatuses[] = {RTCE_REALTIME_ERRORS(RTCE_REALTIME_ERROR_STATUS_)};
#undef RTCE_REALTIME_ERROR_STATUS_
#define RTCE_REALTIME_ERROR_TYPE_(code, status, type, message) type,
constexpr const char* kErrorTypes[] = {RTCE_REALTIME_ERRORS(RTCE_REALTIME_ERROR_TYPE_)};
#undef RTCE_REALTIME_ERROR_TYPE_
#define RTCE_REALTIME_ERROR_MESSAGE_(code, status, type, message) message,
constexpr const char* kErrorMessages[] = {RTCE_REALTIME_ERRORS(RTCE_REALTIME_ERROR_MESSAGE_)};
#undef RTCE_REALTIME_ERROR_MESSAGE_

// Session configs are a few levels deep; a deeper body is refused before nlohmann recurses
// through it (its serializer does, and an attacker picks the depth).
constexpr size_t kMaxJsonDepth = 32;
// A session config is a few KiB; the same bound as the one an ephemeral key carries.
constexpr size_t kMaxSessionPartBytes = kEphemeralKeyMaxChars;

// A JSON object, or nullopt (malformed, too deep, or another type).
std::optional<nlohmann::json> parse_object(std::string_view text) {
  if (json_nests_deeper_than(text, kMaxJsonDepth)) return std::nullopt;
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return std::nullopt;
  return value;
}

// What a Realtime client expects of a session object: the defaults filled and an id, a fresh
// one for a new key (a client does not choose it), else the key's own.
nlohmann::json filled_session(nlohmann::json session, bool fresh_id) {
  if (!session.contains("type")) session["type"] = "realtime";
  if (!session.contains("model")) session["model"] = "rtcedge";
  session["object"] = "realtime.session";
  if (fresh_id || !session.contains("id") || !session["id"].is_string())
    session["id"] = "sess_" + random_hex(12);
  return session;
}

HttpResponse json_response(unsigned status, const nlohmann::json& body) {
  return HttpResponse::json(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

std::string session_id_of_call(std::string_view call_id) {
  if (!call_id.starts_with(kRealtimeCallIdPrefix)) return {};
  call_id.remove_prefix(kRealtimeCallIdPrefix.size());
  if (call_id.empty() || call_id.size() > 64 ||
      call_id.find_first_not_of("0123456789abcdef") != std::string_view::npos)
    return {};
  return std::string(call_id);
}

std::string_view query_value(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=')
      return pair.substr(name.size() + 1);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
  }
  return {};
}

std::string_view realtime_error_name(RealtimeError error) { return vocab_name(kErrorNames, error); }
unsigned realtime_error_status(RealtimeError error) { return kErrorStatuses[static_cast<size_t>(error)]; }
std::string_view realtime_error_type(RealtimeError error) { return vocab_name(kErrorTypes, error); }
std::string_view realtime_error_message(RealtimeError error) { return vocab_name(kErrorMessages, error); }

HttpResponse realtime_error_response(RealtimeError error, std::string_view detail, std::string_view param) {
  std::string message(realtime_error_message(error));
  if (!detail.empty()) message.append(": ").append(detail);
  nlohmann::json body = {{"error",
                          {{"message", message},
                           {"type", realtime_error_type(error)},
                           {"code", realtime_error_name(error)},
                           {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)}}}};
  HttpResponse response = json_response(realtime_error_status(error), body);
  if (error == RealtimeError::rate_limited) response.headers.emplace_back("Retry-After", "1");
  if (error == RealtimeError::at_capacity) response.headers.emplace_back("Retry-After", "2");
  if (error == RealtimeError::draining) response.headers.emplace_back("Retry-After", "5");
  if (realtime_error_status(error) == 401) response.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (error == RealtimeError::websocket_required) {  // RFC 9110 §15.5.22
    response.headers.emplace_back("Upgrade", "websocket");
    response.headers.emplace_back("Connection", "Upgrade");
  }
  return response;
}

std::vector<EphemeralSecret> realtime_key_secrets(const TransceiverConfig& config) {
  std::vector<EphemeralSecret> secrets;
  auto add = [&secrets](std::string_view item, const std::string& where) {
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon == 0)
      throw ConfigError(where + ": an ephemeral-key secret must be 'id:secret'");
    secrets.push_back({std::string(item.substr(0, colon)), std::string(item.substr(colon + 1))});
  };
  for (const std::string& item : config.realtime_key_secrets) add(item, "realtime.key_secrets");
  if (!config.realtime_key_file.empty()) {
    // A regular file of bounded size: a FIFO or /dev/zero named here must fail start-up, not
    // hang it or grow a line without end.
    const ConfigFileText file =
        read_config_file(config.realtime_key_file, "realtime.key_file", kMaxConfigFileBytes);
    std::string_view rest = file.text;
    for (int number = 1; !rest.empty(); ++number) {
      const size_t end = rest.find('\n');
      std::string_view line = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      const size_t start = line.find_first_not_of(" \t");
      if (start == std::string_view::npos || line[start] == '#') continue;
      add(line.substr(start),
          "realtime.key_file " + config.realtime_key_file + " line " + std::to_string(number));
    }
  }
  return secrets;
}

RealtimeSignaling::RealtimeSignaling(EphemeralKeyring keyring, int64_t default_key_lifetime_s,
                                     size_t max_part_bytes, RealtimeHooks hooks)
    : keyring_(std::move(keyring)),
      default_key_lifetime_s_(default_key_lifetime_s),
      max_part_bytes_(max_part_bytes),
      hooks_(std::move(hooks)) {}

bool RealtimeSignaling::handle(const HttpRequest& request, const HttpServer::Responder& respond) {
  const std::string_view path = request.path;
  constexpr std::string_view kBase = "/v1/realtime";
  if (path != kBase && !path.starts_with("/v1/realtime/")) return false;
  const bool post = request.method == "POST";
  auto not_allowed = [&] { respond(realtime_error_response(RealtimeError::method_not_allowed, "use POST")); };
  if (path == kBase && request.method == "GET" && !query_value(request.query, "call_id").empty()) {
    sideband(request, respond);
  } else if (path == kRealtimeCallsPath || path == kBase) {
    post ? create_call(request, respond) : not_allowed();
  } else if (path.starts_with(std::string(kRealtimeCallsPath) + "/")) {
    call_request(path.substr(kRealtimeCallsPath.size() + 1), request, respond);
  } else if (path == "/v1/realtime/client_secrets") {
    post ? mint(request, respond, false) : not_allowed();
  } else if (path == "/v1/realtime/sessions") {
    post ? mint(request, respond, true) : not_allowed();
  } else {
    respond(realtime_error_response(RealtimeError::not_found));
  }
  return true;
}

void RealtimeSignaling::create_call(const HttpRequest& request, const HttpServer::Responder& respond) {
  auto refuse = [this, &respond](RealtimeError error, std::string_view detail = {},
                                 std::string_view param = {}) {
    stats_.calls_rejected[static_cast<size_t>(error)].fetch_add(1, std::memory_order_relaxed);
    respond(realtime_error_response(error, detail, param));
  };
  // An ek_ key carries the session config it was minted with; any other key must be a server key.
  PendingCall call;
  uint32_t max_calls = 0;
  int64_t key_expires_at = 0;
  const auto credentials = credentials_for_scheme(request.header("authorization"), "Bearer");
  if (credentials && credentials->starts_with(kEphemeralKeyPrefix)) {
    VerifiedKey verified = keyring_.verify(*credentials, hooks_.unix_now());
    if (verified.error) {
      return refuse(*verified.error == EphemeralKeyError::expired ? RealtimeError::expired_api_key
                                                                  : RealtimeError::invalid_api_key,
                    ephemeral_key_error_message(*verified.error));
    }
    call.offer.session = std::move(verified.session);
    call.offer.access =
        CallAccess{key_principal(kEphemeralPrincipalPrefix, *credentials), std::move(verified.minter)};
    max_calls = verified.max_calls;
    key_expires_at = verified.expires_at;
    // One key, its calls (1 unless minted for more): on this pod now, unless the fleet counts
    // them (take_key_call, after the request is known to be good).
    if (!hooks_.take_key_call) {
      switch (key_calls_.take(call.offer.access.creator, max_calls, key_expires_at, hooks_.unix_now())) {
        case KeyCallBudget::Take::ok: call.budget = Budget::pod; break;
        case KeyCallBudget::Take::exhausted: return refuse(RealtimeError::key_exhausted);
        case KeyCallBudget::Take::full: return refuse(RealtimeError::rate_limited, "too many live keys");
      }
    }
  } else if (!hooks_.server_key_ok(request)) {
    return refuse(RealtimeError::invalid_api_key);
  } else {
    call.offer.access = CallAccess{hooks_.server_principal(request), std::nullopt};
  }
  const bool ephemeral = max_calls > 0;
  // Every refusal after a take gives the call back: the key did not make a call.
  auto refuse_with_budget = [this, &refuse, &call](RealtimeError error, std::string_view detail = {},
                                                   std::string_view param = {}) {
    give_back(call);
    refuse(error, detail, param);
  };

  const std::string_view content_type = request.header("content-type");
  if (media_type_is(content_type, "application/sdp")) {
    call.sdp = request.body;
  } else if (media_type_is(content_type, "multipart/form-data")) {
    MultipartResult form = parse_multipart_form(content_type, request.body, max_part_bytes_);
    if (form.error)
      return refuse_with_budget(RealtimeError::invalid_multipart, multipart_error_message(*form.error));
    const FormPart* sdp_part = form.form.find("sdp");
    if (sdp_part == nullptr) return refuse_with_budget(RealtimeError::missing_sdp, {}, "sdp");
    call.sdp = sdp_part->content;
    if (const FormPart* session_part = form.form.find("session")) {
      if (session_part->content.size() > kMaxSessionPartBytes)
        return refuse_with_budget(RealtimeError::invalid_session,
                                  "larger than " + std::to_string(kMaxSessionPartBytes) + " bytes",
                                  "session");
      auto parsed = parse_object(session_part->content);
      if (!parsed) return refuse_with_budget(RealtimeError::invalid_session, {}, "session");
      // The data-channel policy restricts the browser: the browser's own form cannot set it
      // (or lift the one its key carries).
      if (ephemeral && parsed->contains("client"))
        return refuse_with_budget(RealtimeError::client_policy_not_allowed, {}, "session.client");
      // The form's session wins, field by top-level field, over the key's.
      call.offer.session.update(*parsed);
    }
  } else {
    return refuse_with_budget(RealtimeError::unsupported_media_type);
  }
  if (!call.offer.session.contains("model")) {
    const std::string_view model = query_value(request.query, "model");
    if (!model.empty() && model.size() <= 128) call.offer.session["model"] = std::string(model);
  }
  call.offer.session = filled_session(std::move(call.offer.session), false);
  call.offer.user_agent = std::string(request.header("user-agent").substr(0, 256));
  if (!ingress_header_.empty())
    call.offer.region_header = std::string(request.header(ingress_header_).substr(0, 64));
  call.offer.client = request.peer;
  if (!ephemeral || !hooks_.take_key_call) return place_call(std::move(call), respond);

  // The fleet's count of this key's calls (Redis). A store that does not answer leaves it to
  // this pod's own count, as without one: a key may then make its calls once per pod.
  const std::string principal = call.offer.access.creator;
  hooks_.take_key_call(
      principal, max_calls, key_expires_at,
      [this, call = std::make_shared<PendingCall>(std::move(call)), respond, max_calls,
       key_expires_at](std::optional<bool> taken) mutable {
        if (taken && !*taken) {
          stats_.key_budget[static_cast<size_t>(KeyBudgetOutcome::fleet_exhausted)].fetch_add(1);
          stats_.calls_rejected[static_cast<size_t>(RealtimeError::key_exhausted)].fetch_add(1);
          return respond(realtime_error_response(RealtimeError::key_exhausted));
        }
        if (taken) {
          stats_.key_budget[static_cast<size_t>(KeyBudgetOutcome::fleet_taken)].fetch_add(1);
          call->budget = Budget::fleet;
          return place_call(std::move(*call), respond);
        }
        stats_.key_budget[static_cast<size_t>(KeyBudgetOutcome::pod_fallback)].fetch_add(1);
        switch (key_calls_.take(call->offer.access.creator, max_calls, key_expires_at, hooks_.unix_now())) {
          case KeyCallBudget::Take::ok:
            call->budget = Budget::pod;
            return place_call(std::move(*call), respond);
          case KeyCallBudget::Take::exhausted:
            stats_.calls_rejected[static_cast<size_t>(RealtimeError::key_exhausted)].fetch_add(1);
            return respond(realtime_error_response(RealtimeError::key_exhausted));
          case KeyCallBudget::Take::full:
            stats_.calls_rejected[static_cast<size_t>(RealtimeError::rate_limited)].fetch_add(1);
            return respond(realtime_error_response(RealtimeError::rate_limited, "too many live keys"));
        }
      });
}

void RealtimeSignaling::give_back(const PendingCall& call) {
  // (from a worker too: the pod's budget locks, the fleet's hook posts)
  if (call.budget == Budget::pod) key_calls_.give_back(call.offer.access.creator);
  if (call.budget == Budget::fleet && hooks_.give_back_key_call)
    hooks_.give_back_key_call(call.offer.access.creator);
}

void RealtimeSignaling::place_call(PendingCall call, const HttpServer::Responder& respond) {
  if (auto refusal = hooks_.admit()) {
    give_back(call);
    stats_.calls_rejected[static_cast<size_t>(*refusal)].fetch_add(1, std::memory_order_relaxed);
    return respond(realtime_error_response(*refusal));
  }
  auto pending = std::make_shared<PendingCall>(std::move(call));
  pending->offer.sdp = pending->sdp;
  hooks_.place(pending->offer, [this, respond, pending](PlaceResult result) {
    if (auto* refusal = std::get_if<PlaceRefusal>(&result)) {
      give_back(*pending);
      stats_.calls_rejected[static_cast<size_t>(refusal->error)].fetch_add(1, std::memory_order_relaxed);
      return respond(realtime_error_response(refusal->error, refusal->detail,
                                             refusal->error == RealtimeError::invalid_offer ? "sdp" : ""));
    }
    auto& placed = std::get<PlacedCall>(result);
    stats_.calls_created.fetch_add(1, std::memory_order_relaxed);
    HttpResponse response{201, "application/sdp", std::move(placed.answer), {}};
    response.headers.emplace_back("Location", std::string(kRealtimeCallsPath) + "/" +
                                                  std::string(kRealtimeCallIdPrefix) + placed.session_id);
    response.headers.emplace_back("ETag", "\"1\"");  // for If-Match on an ICE restart (PATCH)
    respond(std::move(response));
  });
}

void RealtimeSignaling::call_request(std::string_view rest, const HttpRequest& request,
                                     const HttpServer::Responder& respond) {
  // The same keys that may create a call may act on it, each on its own calls (call_access.h);
  // an ek_ key must still verify.
  const auto credentials = credentials_for_scheme(request.header("authorization"), "Bearer");
  std::string requester;
  if (credentials && credentials->starts_with(kEphemeralKeyPrefix)) {
    if (keyring_.verify(*credentials, hooks_.unix_now()).error)
      return respond(realtime_error_response(RealtimeError::invalid_api_key));
    requester = key_principal(kEphemeralPrincipalPrefix, *credentials);
  } else if (!hooks_.server_key_ok(request)) {
    return respond(realtime_error_response(RealtimeError::invalid_api_key));
  } else {
    requester = hooks_.server_principal(request);
  }
  const size_t slash = rest.find('/');
  const std::string id = session_id_of_call(rest.substr(0, slash));
  if (id.empty()) return respond(realtime_error_response(RealtimeError::call_not_found, {}, "call_id"));
  if (slash == std::string_view::npos) {
    // PATCH: an ICE restart or trickle, as on /v1/sessions/{id} (RFC 9725 §4.4).
    if (request.method != "GET" && request.method != "DELETE" && request.method != "PATCH")
      return respond(realtime_error_response(RealtimeError::method_not_allowed, "use GET, PATCH or DELETE"));
    return hooks_.session_request(id, requester, request, respond);
  }
  if (rest.substr(slash + 1) != "hangup") return respond(realtime_error_response(RealtimeError::not_found));
  if (request.method != "POST")
    return respond(realtime_error_response(RealtimeError::method_not_allowed, "use POST"));
  hooks_.hang_up(
      id, requester, [this, respond, call_id = std::string(kRealtimeCallIdPrefix) + id](bool ended) {
        if (!ended) return respond(realtime_error_response(RealtimeError::call_not_found, {}, "call_id"));
        stats_.calls_hung_up.fetch_add(1, std::memory_order_relaxed);
        respond(json_response(200, {{"id", call_id}, {"object", "realtime.call"}, {"status", "ended"}}));
      });
}

void RealtimeSignaling::sideband(const HttpRequest& request, const HttpServer::Responder& respond) {
  auto refuse = [this, &respond](RealtimeError error, std::string_view param = {}) {
    stats_.sidebands_refused[static_cast<size_t>(error)].fetch_add(1, std::memory_order_relaxed);
    respond(realtime_error_response(error, {}, param));
  };
  // The app server's own key: the browser's ek_ key must not reach the tools and the policy.
  const auto credentials = credentials_for_scheme(request.header("authorization"), "Bearer");
  if (credentials && credentials->starts_with(kEphemeralKeyPrefix))
    return refuse(RealtimeError::sideband_needs_server_key);
  if (!hooks_.server_key_ok(request)) return refuse(RealtimeError::invalid_api_key);
  if (!request.websocket_upgrade) return refuse(RealtimeError::websocket_required);
  const std::string id = session_id_of_call(query_value(request.query, "call_id"));
  if (id.empty()) return refuse(RealtimeError::call_not_found, "call_id");
  hooks_.attach_sideband(id, hooks_.server_principal(request), request, respond);
}

void RealtimeSignaling::mint(const HttpRequest& request, const HttpServer::Responder& respond,
                             bool legacy_sessions) {
  auto refuse = [this, &respond](RealtimeError error, std::string_view detail = {},
                                 std::string_view param = {}) {
    stats_.keys_refused[static_cast<size_t>(error)].fetch_add(1, std::memory_order_relaxed);
    respond(realtime_error_response(error, detail, param));
  };
  // A page holding an ek_ key must not be able to renew it forever.
  const auto credentials = credentials_for_scheme(request.header("authorization"), "Bearer");
  if (credentials && credentials->starts_with(kEphemeralKeyPrefix))
    return refuse(RealtimeError::ephemeral_key_not_allowed);
  if (!hooks_.server_key_ok(request)) return refuse(RealtimeError::invalid_api_key);
  const std::string minter = hooks_.server_principal(request);
  auto bucket = mint_buckets_.try_emplace(minter, kMintBurst, kMintPerSecond).first;
  if (!bucket->second.take(hooks_.unix_now() * 1'000'000'000))
    return refuse(RealtimeError::mint_rate_limited);

  nlohmann::json body = nlohmann::json::object();
  if (request.body.find_first_not_of(" \t\r\n") != std::string::npos) {
    auto parsed = parse_object(request.body);
    if (!parsed) return refuse(RealtimeError::invalid_json);
    body = std::move(*parsed);
  }
  int64_t lifetime = default_key_lifetime_s_;
  uint32_t max_calls = 1;
  nlohmann::json session = nlohmann::json::object();
  if (legacy_sessions) {
    session = std::move(body);  // the old endpoint's body is the session config itself
  } else {
    if (body.contains("expires_after")) {
      const nlohmann::json& expires = body["expires_after"];
      if (!expires.is_object()) return refuse(RealtimeError::invalid_expires_after, {}, "expires_after");
      if (expires.contains("anchor") && expires["anchor"] != "created_at")
        return refuse(RealtimeError::invalid_anchor, {}, "expires_after.anchor");
      if (expires.contains("seconds")) {
        const nlohmann::json& seconds = expires["seconds"];
        if (!seconds.is_number_integer() || seconds.get<int64_t>() < kEphemeralKeyMinLifetime ||
            seconds.get<int64_t>() > kEphemeralKeyMaxLifetime)
          return refuse(RealtimeError::invalid_expires_after, {}, "expires_after.seconds");
        lifetime = seconds.get<int64_t>();
      }
    }
    if (body.contains("session")) {
      if (!body["session"].is_object()) return refuse(RealtimeError::invalid_session, {}, "session");
      session = std::move(body["session"]);
    }
    // rtcedge's extension: how many calls the key may create (one by default).
    if (body.contains("max_calls")) {
      const nlohmann::json& n = body["max_calls"];
      if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxCallsPerKey)
        return refuse(RealtimeError::invalid_max_calls, {}, "max_calls");
      max_calls = static_cast<uint32_t>(n.get<int64_t>());
    }
  }
  session = filled_session(std::move(session), true);
  auto key = keyring_.mint(session, hooks_.unix_now(), lifetime, minter, max_calls);
  if (!key) return refuse(RealtimeError::session_too_large, {}, "session");
  stats_.keys_minted.fetch_add(1, std::memory_order_relaxed);
  if (legacy_sessions) {
    session["client_secret"] = {{"value", key->value}, {"expires_at", key->expires_at}};
    return respond(json_response(200, session));
  }
  respond(json_response(200, {{"value", key->value}, {"expires_at", key->expires_at}, {"session", session}}));
}

}  // namespace rtce
