// realtime_signaling_test.cpp — RealtimeSignaling with fake hooks and a fake clock: what only
// a controlled clock can show over HTTP (a key that expires between minting and calling), the
// session-config merge the placement receives, who may mint, and the error vocabulary against
// docs/operations.md.
#include "realtime_signaling.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "doc_tables.h"

namespace rtce {
namespace {

constexpr const char* kServerKey = "server-key-0123456789";

struct Harness {
  int64_t now = 1'700'000'000;
  std::optional<RealtimeOffer> placed;
  std::string placed_sdp;
  std::optional<RealtimeError> admit_refusal;
  std::string hung_up;
  std::string sideband_for;  // the session id the last sideband request attached to
  std::string requester;     // the principal the last call request acted as
  RealtimeSignaling signaling;

  // `customize` may add or replace hooks (the fleet's key budget, say).
  explicit Harness(const std::function<void(RealtimeHooks&)>& customize = {})
      : signaling(EphemeralKeyring({{"k1", std::string(40, 's')}}), 60, 64 * 1024, customized(customize)) {}

  RealtimeHooks customized(const std::function<void(RealtimeHooks&)>& customize) {
    RealtimeHooks h = hooks();
    if (customize) customize(h);
    return h;
  }

  RealtimeHooks hooks() {
    RealtimeHooks h;
    h.server_key_ok = [](const HttpRequest& r) {
      return r.header("authorization") == std::string("Bearer ") + kServerKey;
    };
    h.server_principal = [](const HttpRequest& r) {
      return key_principal(kServerPrincipalPrefix, r.header("authorization").substr(7));
    };
    h.admit = [this] { return admit_refusal; };
    h.place = [this](const RealtimeOffer& offer, std::function<void(PlaceResult)> done) {
      placed = offer;
      placed_sdp = std::string(offer.sdp);
      if (offer.sdp == "bad") return done(PlaceRefusal{RealtimeError::invalid_offer, "line 1: nope"});
      done(PlacedCall{"0a" + std::string(30, 'b'), "v=0\r\n"});
    };
    h.session_request = [this](const std::string&, const std::string& who, const HttpRequest&,
                               HttpServer::Responder respond) {
      requester = who;
      respond(HttpResponse::json(200, "{}"));
    };
    h.hang_up = [this](const std::string& id, const std::string& who, std::function<void(bool)> done) {
      hung_up = id;
      requester = who;
      done(id == "0a" + std::string(30, 'b'));
    };
    h.attach_sideband = [this](const std::string& id, const std::string& who, const HttpRequest&,
                               HttpServer::Responder respond) {
      sideband_for = id;
      requester = who;
      respond(HttpResponse::accept_websocket({}));
    };
    h.unix_now = [this] { return now; };
    return h;
  }

  HttpResponse request(std::string method, std::string path, std::string body, std::string key,
                       std::string content_type = "application/json", bool websocket_upgrade = false) {
    HttpRequest r;
    r.websocket_upgrade = websocket_upgrade;
    r.method = std::move(method);
    const size_t q = path.find('?');
    r.path = path.substr(0, q);
    if (q != std::string::npos) r.query = path.substr(q + 1);
    r.body = std::move(body);
    if (!key.empty()) r.headers.emplace_back("authorization", "Bearer " + key);
    r.headers.emplace_back("content-type", content_type);
    std::optional<HttpResponse> out;
    EXPECT_TRUE(signaling.handle(r, [&out](HttpResponse response) {
      EXPECT_FALSE(out) << "responded twice";
      out = std::move(response);
    }));
    EXPECT_TRUE(out) << "no response";
    return out.value_or(HttpResponse{});
  }

  std::string mint(const std::string& body) {
    HttpResponse r = request("POST", "/v1/realtime/client_secrets", body, kServerKey);
    EXPECT_EQ(r.status, 200u) << r.body;
    return nlohmann::json::parse(r.body)["value"];
  }
};

std::string error_code(const HttpResponse& r) {
  auto body = nlohmann::json::parse(r.body, nullptr, false);
  return body.is_object() && body.contains("error") ? body["error"]["code"].get<std::string>()
                                                    : "(not an error)";
}

TEST(RealtimeSignaling, KeyExpiresAtItsLifetime) {
  Harness h;
  const std::string key = h.mint(R"({"expires_after":{"anchor":"created_at","seconds":10}})");
  h.now += 9;
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp").status, 201u);
  h.now += 1;  // exp == now: expired
  HttpResponse r = h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp");
  EXPECT_EQ(r.status, 401u);
  EXPECT_EQ(error_code(r), "expired_api_key");
  EXPECT_EQ(h.signaling.stats().calls_rejected[static_cast<size_t>(RealtimeError::expired_api_key)].load(),
            1u);
  // The default lifetime is the configured one (60 s here).
  const std::string default_key = h.mint("");
  h.now += 59;
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", default_key, "application/sdp").status, 201u);
  h.now += 1;
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls", "v=0", default_key, "application/sdp")),
            "expired_api_key");
}

TEST(RealtimeSignaling, FormSessionWinsOverTheKeysFieldByField) {
  Harness h;
  HttpResponse minted = h.request(
      "POST", "/v1/realtime/client_secrets",
      R"({"session":{"model":"from-key","instructions":"key says","audio":{"output":{"voice":"a"}},"id":"mine"}})",
      kServerKey);
  ASSERT_EQ(minted.status, 200u);
  const std::string key = nlohmann::json::parse(minted.body)["value"];
  const std::string key_session_id = nlohmann::json::parse(minted.body)["session"]["id"];
  EXPECT_NE(key_session_id, "mine") << "a client does not choose the session id";
  const std::string form =
      "--b\r\nContent-Disposition: form-data; name=\"sdp\"\r\nContent-Type: application/sdp\r\n\r\nv=0\r\n"
      "--b\r\nContent-Disposition: form-data; name=\"session\"\r\nContent-Type: application/json\r\n\r\n"
      "{\"instructions\":\"form says\",\"audio\":{\"input\":{}}}\r\n--b--\r\n";
  HttpResponse r = h.request("POST", "/v1/realtime/calls", form, key, "multipart/form-data; boundary=b");
  ASSERT_EQ(r.status, 201u) << r.body;
  ASSERT_TRUE(h.placed);
  EXPECT_EQ(h.placed_sdp, "v=0");
  const nlohmann::json& session = h.placed->session;
  EXPECT_EQ(session["model"], "from-key");
  EXPECT_EQ(session["instructions"], "form says");
  EXPECT_EQ(session["audio"], nlohmann::json::parse(R"({"input":{}})"));  // shallow: replaced whole
  EXPECT_EQ(session["object"], "realtime.session");
  EXPECT_EQ(session["id"], key_session_id) << "the call keeps the id its key was minted with";
  bool location = false;
  for (const auto& [name, value] : r.headers)
    if (name == "Location") location = value == "/v1/realtime/calls/rtc_0a" + std::string(30, 'b');
  EXPECT_TRUE(location);
}

TEST(RealtimeSignaling, ServerKeyCallWithoutSessionGetsTheDefaultsAndTheQueryModel) {
  Harness h;
  ASSERT_EQ(h.request("POST", "/v1/realtime?model=gpt-realtime", "v=0", kServerKey, "application/sdp").status,
            201u);
  const nlohmann::json& session = h.placed->session;
  EXPECT_EQ(session["model"], "gpt-realtime");
  EXPECT_EQ(session["type"], "realtime");
  EXPECT_EQ(session["object"], "realtime.session");
  EXPECT_TRUE(session["id"].get<std::string>().starts_with("sess_"));
  EXPECT_EQ(session.size(), 4u);
}

TEST(RealtimeSignaling, RefusalsKeepTheirOrderAndShape) {
  Harness h;
  // Authentication comes before the body is looked at.
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls", "", "", "text/plain")), "invalid_api_key");
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls", "", kServerKey, "text/plain")),
            "unsupported_media_type");
  h.admit_refusal = RealtimeError::draining;
  HttpResponse r = h.request("POST", "/v1/realtime/calls", "v=0", kServerKey, "application/sdp");
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(error_code(r), "draining");
  EXPECT_FALSE(h.placed) << "a draining transceiver must not parse or place";
  h.admit_refusal.reset();
  r = h.request("POST", "/v1/realtime/calls", "bad", kServerKey, "application/sdp");
  EXPECT_EQ(r.status, 400u);
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["error"]["code"], "invalid_offer");
  EXPECT_EQ(body["error"]["param"], "sdp");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["message"], "the SDP offer was refused: line 1: nope");
}

TEST(RealtimeSignaling, EphemeralKeysCannotMint) {
  Harness h;
  const std::string key = h.mint("{}");
  HttpResponse r = h.request("POST", "/v1/realtime/client_secrets", "{}", key);
  EXPECT_EQ(r.status, 403u);
  EXPECT_EQ(error_code(r), "ephemeral_key_not_allowed");
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/sessions", "{}", key)), "ephemeral_key_not_allowed");
  EXPECT_EQ(h.signaling.stats().keys_minted.load(), 1u);
}

TEST(RealtimeSignaling, HangupParsesTheCallIdBack) {
  Harness h;
  const std::string id = "0a" + std::string(30, 'b');
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls/rtc_" + id + "/hangup", "", kServerKey).status, 200u);
  EXPECT_EQ(h.hung_up, id);
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls/rtc_" + std::string(32, 'c') + "/hangup", "",
                                 kServerKey)),
            "call_not_found");
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls/" + id + "/hangup", "", kServerKey)),
            "call_not_found");
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls/rtc_" + id + "/refer", "", kServerKey)),
            "not_found");
}

// Issue 27 §3: a call records who created it, and an ek_ key's call also the server key that
// minted the key; every request on a call says who it acts as.
TEST(RealtimeSignaling, CallsRecordTheirCreatorAndRequestsTheirPrincipal) {
  Harness h;
  const std::string server = key_principal(kServerPrincipalPrefix, kServerKey);
  const std::string key = h.mint("");
  ASSERT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp").status, 201u);
  ASSERT_TRUE(h.placed);
  EXPECT_EQ(h.placed->access.creator, key_principal(kEphemeralPrincipalPrefix, key));
  EXPECT_EQ(h.placed->access.minter, server);
  EXPECT_TRUE(h.placed->access.allows(server)) << "the minting server key";
  EXPECT_FALSE(h.placed->access.allows(key_principal(kServerPrincipalPrefix, "another server key")));
  EXPECT_FALSE(h.placed->access.allows(key_principal(kEphemeralPrincipalPrefix, h.mint(""))))
      << "another ek_ key of the same server";
  ASSERT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", kServerKey, "application/sdp").status, 201u);
  EXPECT_EQ(h.placed->access.creator, server);
  EXPECT_FALSE(h.placed->access.minter);

  const std::string id = "0a" + std::string(30, 'b');
  EXPECT_EQ(h.request("GET", "/v1/realtime/calls/rtc_" + id, "", key).status, 200u);
  EXPECT_EQ(h.requester, key_principal(kEphemeralPrincipalPrefix, key));
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls/rtc_" + id + "/hangup", "", kServerKey).status, 200u);
  EXPECT_EQ(h.requester, server);
}

// One ek_ key, one call (or its max_calls); a refused offer gives the call back.
TEST(RealtimeSignaling, AKeyCreatesItsCallsAndNoMore) {
  Harness h;
  const std::string key = h.mint("");
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "bad", key, "application/sdp").status, 400u);
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp").status, 201u)
      << "the refused offer made no call";
  HttpResponse again = h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp");
  EXPECT_EQ(again.status, 403u);
  EXPECT_EQ(error_code(again), "key_exhausted");
  const std::string three = h.mint(R"({"max_calls":3})");
  for (int i = 0; i < 3; i++)
    EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", three, "application/sdp").status, 201u);
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls", "v=0", three, "application/sdp")),
            "key_exhausted");
  for (const char* bad : {R"({"max_calls":0})", R"({"max_calls":1001})", R"({"max_calls":"2"})"})
    EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/client_secrets", bad, kServerKey)),
              "invalid_max_calls")
        << bad;
  // A server key makes as many calls as admission lets it.
  for (int i = 0; i < 3; i++)
    EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", kServerKey, "application/sdp").status, 201u);
}

// The sideband: a server key's WebSocket on a call; an ek_ key, a plain GET, a bad id are refused
// before any call is asked.
TEST(RealtimeSignaling, TheSidebandIsAServerKeysWebSocket) {
  Harness h;
  const std::string call = "rtc_0a" + std::string(30, 'b');
  auto sideband = [&](const std::string& query, const std::string& key, bool upgrade = true) {
    return h.request("GET", "/v1/realtime?" + query, "", key, "application/json", upgrade);
  };
  HttpResponse accepted = sideband("call_id=" + call, kServerKey);
  EXPECT_EQ(accepted.status, 101u);
  EXPECT_TRUE(accepted.websocket);
  EXPECT_EQ(h.sideband_for, "0a" + std::string(30, 'b'));
  EXPECT_EQ(h.requester, key_principal(kServerPrincipalPrefix, kServerKey));
  h.sideband_for.clear();
  const std::string ek = h.mint("");
  EXPECT_EQ(error_code(sideband("call_id=" + call, ek)), "sideband_needs_server_key");
  EXPECT_EQ(sideband("call_id=" + call, "wrong").status, 401u);
  HttpResponse plain = sideband("call_id=" + call, kServerKey, false);
  EXPECT_EQ(plain.status, 426u);
  EXPECT_EQ(error_code(plain), "websocket_required");
  EXPECT_EQ(h.request("GET", "/v1/realtime?call_id=rtc_nothex", "", kServerKey, "", true).status, 404u);
  EXPECT_TRUE(h.sideband_for.empty()) << "no refused request reached a worker";
  EXPECT_EQ(
      h.signaling.stats().sidebands_refused[static_cast<size_t>(RealtimeError::websocket_required)].load(),
      1u);
}

// With a registry the fleet counts an ek_ key's calls; when Redis does not answer, this pod does.
TEST(RealtimeSignaling, TheFleetCountsAKeysCallsAndThePodStandsInWhenItCannot) {
  std::map<std::string, uint32_t> fleet;  // a stand-in for the Redis counters
  bool redis_up = true;
  std::vector<std::string> given_back;
  Harness h([&](RealtimeHooks& hooks) {
    hooks.take_key_call = [&](const std::string& who, uint32_t max_calls, int64_t,
                              std::function<void(std::optional<bool>)> done) {
      if (!redis_up) return done(std::nullopt);
      if (fleet[who] >= max_calls) return done(false);
      ++fleet[who];
      done(true);
    };
    hooks.give_back_key_call = [&](const std::string& who) {
      given_back.push_back(who);
      --fleet[who];
    };
  });
  const std::string key = h.mint("");
  const std::string who = key_principal(kEphemeralPrincipalPrefix, key);
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "bad", key, "application/sdp").status, 400u);
  EXPECT_EQ(given_back, std::vector<std::string>{who}) << "the refused offer gave its call back to the fleet";
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp").status, 201u);
  EXPECT_EQ(fleet[who], 1u);
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp")),
            "key_exhausted");
  // Redis gone: this pod's own count decides (it has not counted this key yet), and says so.
  redis_up = false;
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp").status, 201u);
  EXPECT_EQ(error_code(h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp")),
            "key_exhausted");
  const auto& budget = h.signaling.stats().key_budget;
  EXPECT_EQ(budget[static_cast<size_t>(KeyBudgetOutcome::fleet_taken)].load(), 2u);
  EXPECT_EQ(budget[static_cast<size_t>(KeyBudgetOutcome::fleet_exhausted)].load(), 1u);
  EXPECT_EQ(budget[static_cast<size_t>(KeyBudgetOutcome::pod_fallback)].load(), 2u);
  // A server key's calls are not counted.
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", kServerKey, "application/sdp").status, 201u);
  EXPECT_EQ(budget[static_cast<size_t>(KeyBudgetOutcome::pod_fallback)].load(), 2u);
}

// The browser cannot lift (or set) the data-channel policy its key carries.
TEST(RealtimeSignaling, TheBrowsersFormCannotSetTheDataChannelPolicy) {
  Harness h;
  const std::string key =
      h.mint(R"({"session":{"client":{"data_channel":{"allowed_client_events":["response.cancel"]}}}})");
  const std::string form =
      "--b\r\nContent-Disposition: form-data; name=\"sdp\"\r\n\r\nv=0\r\n"
      "--b\r\nContent-Disposition: form-data; name=\"session\"\r\n\r\n"
      R"({"client":{"data_channel":{"allowed_client_events":null}}})"
      "\r\n--b--\r\n";
  HttpResponse refused =
      h.request("POST", "/v1/realtime/calls", form, key, "multipart/form-data; boundary=b");
  EXPECT_EQ(refused.status, 400u);
  EXPECT_EQ(error_code(refused), "client_policy_not_allowed");
  // The key was given back: the same key still makes its call, with the key's policy.
  EXPECT_EQ(h.request("POST", "/v1/realtime/calls", "v=0", key, "application/sdp").status, 201u);
  ASSERT_TRUE(h.placed);
  EXPECT_EQ(h.placed->session["client"]["data_channel"]["allowed_client_events"],
            nlohmann::json::array({"response.cancel"}));
}

TEST(RealtimeSignaling, MintingIsRateLimitedPerServerKey) {
  Harness h;
  int minted = 0;
  while (minted < 1000 && h.request("POST", "/v1/realtime/client_secrets", "", kServerKey).status == 200)
    ++minted;
  EXPECT_EQ(minted, static_cast<int>(kMintBurst));
  HttpResponse refused = h.request("POST", "/v1/realtime/client_secrets", "", kServerKey);
  EXPECT_EQ(refused.status, 429u);
  EXPECT_EQ(error_code(refused), "mint_rate_limited");
  h.now += 1;
  minted = 0;
  while (minted < 1000 && h.request("POST", "/v1/realtime/client_secrets", "", kServerKey).status == 200)
    ++minted;
  EXPECT_EQ(minted, static_cast<int>(kMintPerSecond));
}

TEST(CallAccess, PrincipalsAreOneWayAndDistinct) {
  const std::string a = key_principal(kServerPrincipalPrefix, "key-a");
  EXPECT_EQ(a.size(), 2u + 32u);
  EXPECT_EQ(a, key_principal(kServerPrincipalPrefix, "key-a"));
  EXPECT_NE(a, key_principal(kServerPrincipalPrefix, "key-b"));
  EXPECT_NE(a.substr(2), key_principal(kEphemeralPrincipalPrefix, "key-a").substr(0, 2)) << "prefixes differ";
  EXPECT_EQ(a.find("key-a"), std::string::npos);
  // A key minted before keys named their minter owns only its own calls.
  const CallAccess legacy{key_principal(kEphemeralPrincipalPrefix, "ek_old"), std::nullopt};
  EXPECT_TRUE(legacy.allows(legacy.creator));
  EXPECT_FALSE(legacy.allows(""));
  // Without http.api_keys everyone is "": calls of keys minted then stay everyone's.
  const CallAccess open{key_principal(kEphemeralPrincipalPrefix, "ek_open"), std::string()};
  EXPECT_TRUE(open.allows(""));
}

TEST(RealtimeSignaling, OtherPathsAreNotOurs) {
  Harness h;
  HttpRequest r;
  r.method = "POST";
  r.path = "/v1/realtimex";
  EXPECT_FALSE(h.signaling.handle(r, [](HttpResponse) { ADD_FAILURE() << "answered a path not ours"; }));
  r.path = "/v1/sessions";
  EXPECT_FALSE(h.signaling.handle(r, [](HttpResponse) { ADD_FAILURE() << "answered a path not ours"; }));
}

TEST(RealtimeSignaling, ErrorVocabularyMatchesTheDoc) {
  auto name = +[](RealtimeError e) { return realtime_error_name(e).data(); };
  const auto labels = test::labels_of(kRealtimeErrors, name);
  EXPECT_EQ(labels.size(), kRealtimeErrorCount);
  for (const RealtimeError e : kRealtimeErrors) {
    EXPECT_GE(realtime_error_status(e), 400u);
    EXPECT_LT(realtime_error_status(e), 600u);
    EXPECT_FALSE(realtime_error_message(e).empty());
  }
  EXPECT_EQ(test::doc_table_codes(RTCE_SOURCE_DIR "/docs/operations.md", "Realtime error codes"), labels)
      << "docs/operations.md 'Realtime error codes' and RTCE_REALTIME_ERRORS (realtime_signaling.h) differ";
}

}  // namespace
}  // namespace rtce
