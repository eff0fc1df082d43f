// client_ice_agent_test.cpp — the load generator's client ICE: when each profile checks and
// nominates (ClientIceAgent), and its answer to a server's Binding request
// (IceBindingResponder), round-tripped through the transceiver's IceClientChecker.
#include "client_ice_agent.h"

#include <gtest/gtest.h>

#include "ice/ice_client.h"
#include "ice_responder.h"

namespace rtce::loadgen {
namespace {

constexpr Nanos kMs = 1'000'000;

TEST(ClientIceAgent, BrowserNominatesEveryCheckAndIsConnectedOnTheFirstSuccess) {
  ClientIceAgent ice(ClientProfile::browser, ConsentChecks::periodic);
  EXPECT_TRUE(ice.start(0).use_candidate);
  EXPECT_FALSE(ice.poll(99 * kMs));
  auto retry = ice.poll(100 * kMs);
  ASSERT_TRUE(retry);
  EXPECT_TRUE(retry->use_candidate);
  ice.on_check_success(101 * kMs);
  EXPECT_TRUE(ice.connected());
  EXPECT_EQ(ice.connected_at(), 101 * kMs);
  EXPECT_EQ(ice.next_deadline(), 101 * kMs + 2500 * kMs);  // consent
}

TEST(ClientIceAgent, PionNominatesOnTheTickAfterTheFirstSuccess) {
  ClientIceAgent ice(ClientProfile::pion, ConsentChecks::none);
  EXPECT_FALSE(ice.start(0).use_candidate);
  ice.on_check_success(1 * kMs);  // the first check succeeded: not yet connected
  EXPECT_TRUE(ice.pair_succeeded());
  EXPECT_FALSE(ice.connected());
  EXPECT_FALSE(ice.poll(199 * kMs));
  auto nominate = ice.poll(200 * kMs);
  ASSERT_TRUE(nominate);
  EXPECT_TRUE(nominate->use_candidate);
  EXPECT_TRUE(nominate->controlling);
  ice.on_check_success(201 * kMs);
  EXPECT_TRUE(ice.connected());
  EXPECT_EQ(ice.connected_at(), 201 * kMs);
}

TEST(ClientIceAgent, PionRetriesUnansweredChecksOnItsTickWithoutNominating) {
  ClientIceAgent ice(ClientProfile::pion, ConsentChecks::none);
  ice.start(0);
  auto retry = ice.poll(200 * kMs);
  ASSERT_TRUE(retry);
  EXPECT_FALSE(retry->use_candidate);  // no success yet: nothing to nominate
  auto again = ice.poll(400 * kMs);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->use_candidate);
}

TEST(ClientIceAgent, PionNominatesAtOnceWhenThePeerChecksASucceededPair) {
  ClientIceAgent ice(ClientProfile::pion, ConsentChecks::none);
  ice.start(0);
  EXPECT_FALSE(ice.on_peer_request(1 * kMs));  // before any success: answered, nothing else
  ice.on_check_success(2 * kMs);
  auto nominate = ice.on_peer_request(3 * kMs);
  ASSERT_TRUE(nominate);
  EXPECT_TRUE(nominate->use_candidate);
  EXPECT_FALSE(ice.on_peer_request(4 * kMs));  // a nomination is already in flight
  ice.on_check_success(4 * kMs);
  EXPECT_EQ(ice.connected_at(), 4 * kMs);
  EXPECT_FALSE(ice.on_peer_request(5 * kMs));  // connected: nothing more
}

TEST(ClientIceAgent, PionWithoutConsentChecksSendsNoStunOnceConnected) {
  ClientIceAgent ice(ClientProfile::pion, ConsentChecks::none);
  ice.start(0);
  ice.on_check_success(1 * kMs);
  ASSERT_TRUE(ice.poll(200 * kMs));
  ice.on_check_success(201 * kMs);
  ASSERT_TRUE(ice.connected());
  EXPECT_EQ(ice.next_deadline(), INT64_MAX);
  for (Nanos t = 201 * kMs; t < 60'000 * kMs; t += 20 * kMs) EXPECT_FALSE(ice.poll(t));
  EXPECT_EQ(ice.checks_after_connected(), 0u);
}

TEST(ClientIceAgent, OnSilenceChecksOnlyAfterTwoSecondsWithoutTraffic) {
  ClientIceAgent ice(ClientProfile::pion, ConsentChecks::on_silence);
  ice.start(0);
  ice.on_check_success(1 * kMs);
  ASSERT_TRUE(ice.poll(200 * kMs));
  ice.on_check_success(201 * kMs);
  ASSERT_TRUE(ice.connected());
  // Media every 20 ms for 10 s: no check.
  for (Nanos t = 220 * kMs; t < 10'000 * kMs; t += 20 * kMs) {
    ice.on_traffic(t);
    EXPECT_FALSE(ice.poll(t)) << t;
  }
  // Then silence: one check 2 s after the last datagram, the next 2 s later.
  const Nanos last = 9'980 * kMs;
  EXPECT_FALSE(ice.poll(last + 1'999 * kMs));
  auto check = ice.poll(last + 2'000 * kMs);
  ASSERT_TRUE(check);
  EXPECT_FALSE(check->use_candidate);
  EXPECT_FALSE(ice.poll(last + 3'999 * kMs));
  EXPECT_TRUE(ice.poll(last + 4'000 * kMs));
  EXPECT_EQ(ice.checks_after_connected(), 2u);
}

TEST(ClientIceAgent, RoleConflictResponseSwitchesRoleAndChecksAgain) {
  ClientIceAgent ice(ClientProfile::pion, ConsentChecks::none);
  ice.start(0);
  auto retry = ice.on_role_conflict_response(1 * kMs);
  ASSERT_TRUE(retry);
  EXPECT_FALSE(retry->controlling);
  EXPECT_FALSE(ice.controlling());
  ice.on_check_success(2 * kMs);
  auto next = ice.poll(201 * kMs);
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->use_candidate);  // the controlled agent never nominates
}

TEST(ClientIceAgent, ProfileAndConsentNamesRoundTrip) {
  for (auto p : {ClientProfile::browser, ClientProfile::pion})
    EXPECT_EQ(parse_client_profile(to_string(p)), p);
  for (auto c : {ConsentChecks::periodic, ConsentChecks::none, ConsentChecks::on_silence})
    EXPECT_EQ(parse_consent_checks(to_string(c)), c);
  EXPECT_FALSE(parse_client_profile("chrome"));
  EXPECT_FALSE(parse_consent_checks("never"));
}

// The server's side of a check on the client: USERNAME "<client ufrag>:<server ufrag>",
// keyed with the client's pwd. IceClientChecker builds exactly that when given the client's
// credentials as the "server" ones.
struct ServerCheck {
  IceClientChecker server;
  IceBindingResponder client;
  SocketAddress server_address = *SocketAddress::parse("127.0.0.1:3478");
  uint8_t request[512]{}, reply[512]{};
  size_t request_len = 0;

  ServerCheck(std::string client_pwd_seen_by_server, uint64_t server_tie_breaker = 1)
      : server("cliU", std::move(client_pwd_seen_by_server), "srvU", server_tie_breaker),
        client("cliU", "client-password-0123456789", "srvU") {}
  void build(bool server_controlling) {
    IceClientChecker::RequestOptions o;
    o.use_candidate = false;
    o.controlling = server_controlling;
    request_len = server.build_request(request, o);
    ASSERT_GT(request_len, 0u);
  }
};

TEST(IceBindingResponder, AnswersTheServersCheckSignedWithTheClientPwd) {
  ServerCheck t("client-password-0123456789");
  t.build(/*server_controlling=*/false);
  EXPECT_TRUE(IceBindingResponder::is_request({t.request, t.request_len}));
  bool controlling = true;
  auto r = t.client.answer({t.request, t.request_len}, t.server_address, controlling, 42, t.reply);
  EXPECT_EQ(r.outcome, IceBindingResponder::Outcome::success) << to_string(r.outcome);
  EXPECT_TRUE(controlling);
  ASSERT_GT(r.reply_len, 0u);
  EXPECT_FALSE(IceBindingResponder::is_request({t.reply, r.reply_len}));
  // The server verifies MESSAGE-INTEGRITY with the client pwd and reads its mapped address.
  auto verdict = t.server.process_response({t.reply, r.reply_len});
  EXPECT_EQ(verdict.verdict, IceClientChecker::Verdict::success) << to_string(verdict.verdict);
  ASSERT_TRUE(verdict.mapped);
  EXPECT_EQ(*verdict.mapped, t.server_address);
}

TEST(IceBindingResponder, RefusesAWrongKeyWithoutASuccess) {
  ServerCheck t("not-the-client-password!!");
  t.build(false);
  bool controlling = true;
  auto r = t.client.answer({t.request, t.request_len}, t.server_address, controlling, 42, t.reply);
  EXPECT_EQ(r.outcome, IceBindingResponder::Outcome::unauthenticated);
  EXPECT_TRUE(controlling);
}

TEST(IceBindingResponder, RoleConflictTheLargerTieBreakerKeepsControlling) {
  // Both controlling; ours is larger: we stay controlling and answer 487.
  ServerCheck t("client-password-0123456789", /*server_tie_breaker=*/5);
  t.build(/*server_controlling=*/true);
  bool controlling = true;
  auto r = t.client.answer({t.request, t.request_len}, t.server_address, controlling, 9, t.reply);
  EXPECT_EQ(r.outcome, IceBindingResponder::Outcome::role_conflict);
  EXPECT_TRUE(controlling);
  auto verdict = t.server.process_response({t.reply, r.reply_len});
  EXPECT_EQ(verdict.verdict, IceClientChecker::Verdict::error_response);
  EXPECT_EQ(verdict.error_code, 487);
}

TEST(IceBindingResponder, RoleConflictTheSmallerTieBreakerSwitchesAndAnswers200) {
  ServerCheck t("client-password-0123456789", /*server_tie_breaker=*/900);
  t.build(/*server_controlling=*/true);
  bool controlling = true;
  auto r = t.client.answer({t.request, t.request_len}, t.server_address, controlling, 9, t.reply);
  EXPECT_EQ(r.outcome, IceBindingResponder::Outcome::role_switched);
  EXPECT_FALSE(controlling);
  EXPECT_EQ(t.server.process_response({t.reply, r.reply_len}).verdict, IceClientChecker::Verdict::success);
}

TEST(IceBindingResponder, DropsGarbageAndTruncatedRequests) {
  ServerCheck t("client-password-0123456789");
  t.build(false);
  bool controlling = true;
  for (size_t len : {size_t{0}, size_t{19}, size_t{20}, t.request_len - 4}) {
    auto r = t.client.answer({t.request, len}, t.server_address, controlling, 42, t.reply);
    EXPECT_NE(r.outcome, IceBindingResponder::Outcome::success) << len;
    EXPECT_NE(r.outcome, IceBindingResponder::Outcome::role_switched) << len;
  }
  uint8_t junk[64] = {0x00, 0x01, 0x00, 0x2c, 0x21, 0x12, 0xa4, 0x42};
  auto r = t.client.answer(junk, t.server_address, controlling, 42, t.reply);
  EXPECT_NE(r.outcome, IceBindingResponder::Outcome::success);
  EXPECT_NE(r.outcome, IceBindingResponder::Outcome::role_switched);
  EXPECT_TRUE(controlling);
}

}  // namespace
}  // namespace rtce::loadgen
