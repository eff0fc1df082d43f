// ice_restart_test.cpp — ICE restart (RFC 8445 section 9) in the ICE-lite state machine: two
// credential generations side by side, completion by nomination or by the fallback, the old
// generation refused afterwards, per-generation triggered checks, consent across the switch.
// Checks are built by IceClientChecker (libnice, as a client); replies are verified with
// stun_test_util.h, which shares no code with libnice.
#include <gtest/gtest.h>

#include "ice_client.h"
#include "ice_lite.h"
#include "stun_test_util.h"

namespace rtce {
namespace {

namespace st = stun_test;
using Outcome = IceLiteSession::Outcome;
using State = IceLiteSession::State;
using Credentials = IceLiteSession::Credentials;

constexpr Nanos kSecond = 1'000'000'000;
constexpr Nanos kT0 = 1000 * kSecond;

SocketAddress addr(const char* text) { return *SocketAddress::parse(text); }

const Credentials kOld{"oldsrv0123", "oldserverpassword0123456", "oldcli", "oldclientpassword012345"};
const Credentials kNew{"newsrv4567", "newserverpassword7654321", "newcli", "newclientpassword765432"};
const Credentials kNewer{"nwrsrv8901", "newerserverpassword98765", "nwrcli", "newerclientpassword9876"};

// A client of one generation: its checks are keyed with that generation's server pwd.
IceClientChecker client_of(const Credentials& c) {
  return IceClientChecker(c.local_ufrag, c.local_pwd, c.remote_ufrag);
}

struct Check {
  IceLiteSession::Result result;
  std::vector<uint8_t> reply;
};

Check check(IceLiteSession& session, IceClientChecker& client, const SocketAddress& from, Nanos now,
            bool use_candidate = true) {
  std::vector<uint8_t> request(512), reply(kIceReplyBufferSize);
  const size_t len = client.build_request(request, {.use_candidate = use_candidate});
  EXPECT_GT(len, 0u);
  Check c;
  c.result = session.handle_request(std::span(request).first(len), from, reply, now);
  reply.resize(c.result.reply_len);
  c.reply = reply;
  return c;
}

// A session connected on the old generation from `from`.
IceLiteSession connected_session(const SocketAddress& from, IceLiteSession::Config config = {}) {
  IceLiteSession session(kOld, config);
  auto client = client_of(kOld);
  EXPECT_TRUE(check(session, client, from, kT0).result.nominated);
  EXPECT_EQ(session.state(), State::connected);
  return session;
}

TEST(IceRestart, OldCredentialsKeepWorkingWhilePending) {
  auto wifi = addr("192.0.2.2:54321");
  auto session = connected_session(wifi);
  ASSERT_TRUE(session.begin_restart(kNew));
  EXPECT_TRUE(session.restart_pending());
  ASSERT_NE(session.pending_credentials(), nullptr);
  EXPECT_EQ(session.pending_credentials()->local_ufrag, kNew.local_ufrag);
  EXPECT_EQ(session.credentials().local_ufrag, kOld.local_ufrag);

  auto old_client = client_of(kOld);
  auto c = check(session, old_client, wifi, kT0 + kSecond);
  EXPECT_EQ(c.result.outcome, Outcome::success);
  EXPECT_FALSE(c.result.pending_credentials_used);
  EXPECT_FALSE(c.result.completed_restart);
  EXPECT_EQ(old_client.process_response(c.reply).verdict, IceClientChecker::Verdict::success);
  EXPECT_TRUE(session.restart_pending());
  EXPECT_EQ(session.selected_address(), wifi);
}

TEST(IceRestart, PendingCredentialsAuthenticateAndReplyWithTheNewPwd) {
  auto wifi = addr("192.0.2.2:54321");
  auto cellular = addr("198.51.100.7:40000");
  auto session = connected_session(wifi);
  ASSERT_TRUE(session.begin_restart(kNew));
  auto new_client = client_of(kNew);
  auto c = check(session, new_client, cellular, kT0 + kSecond, /*use_candidate=*/false);
  ASSERT_EQ(c.result.outcome, Outcome::success);
  EXPECT_TRUE(c.result.authenticated);
  EXPECT_TRUE(c.result.pending_credentials_used);
  EXPECT_FALSE(c.result.completed_restart);
  EXPECT_TRUE(st::integrity_valid(c.reply, kNew.local_pwd));
  EXPECT_FALSE(st::integrity_valid(c.reply, kOld.local_pwd));
  auto response = new_client.process_response(c.reply);
  EXPECT_EQ(response.verdict, IceClientChecker::Verdict::success);
  EXPECT_EQ(response.mapped, cellular);
  // Not nominated yet: media stays on the old path, the restart stays pending.
  EXPECT_EQ(session.selected_address(), wifi);
  EXPECT_TRUE(session.restart_pending());

  // The new server ufrag with the old pwd, or the old with the new, is refused.
  IceClientChecker crossed(kNew.local_ufrag, kOld.local_pwd, kNew.remote_ufrag);
  EXPECT_EQ(check(session, crossed, cellular, kT0 + kSecond).result.outcome, Outcome::unauthorized);
  IceClientChecker crossed2(kOld.local_ufrag, kNew.local_pwd, kOld.remote_ufrag);
  EXPECT_EQ(check(session, crossed2, cellular, kT0 + kSecond).result.outcome, Outcome::unauthorized);
  // Ufrags of different generations do not mix.
  IceClientChecker mixed(kNew.local_ufrag, kNew.local_pwd, kOld.remote_ufrag);
  EXPECT_EQ(check(session, mixed, cellular, kT0 + kSecond).result.outcome, Outcome::wrong_username);
  EXPECT_EQ(session.selected_address(), wifi);
}

TEST(IceRestart, NominationWithNewCredentialsCompletesThenOldAreRefused) {
  auto wifi = addr("192.0.2.2:54321");
  auto cellular = addr("198.51.100.7:40000");
  auto session = connected_session(wifi);
  ASSERT_TRUE(session.begin_restart(kNew));
  auto new_client = client_of(kNew);
  auto c = check(session, new_client, cellular, kT0 + 2 * kSecond);
  ASSERT_EQ(c.result.outcome, Outcome::success);
  EXPECT_TRUE(c.result.nominated);
  EXPECT_TRUE(c.result.pending_credentials_used);
  EXPECT_TRUE(c.result.completed_restart);
  EXPECT_FALSE(session.restart_pending());
  EXPECT_EQ(session.pending_credentials(), nullptr);
  EXPECT_EQ(session.credentials().local_ufrag, kNew.local_ufrag);
  EXPECT_EQ(session.credentials().remote_pwd, kNew.remote_pwd);
  EXPECT_EQ(session.selected_address(), cellular);
  EXPECT_EQ(session.state(), State::connected);

  // The old generation is gone, from either address: 401 wrong_username, no state change.
  auto old_client = client_of(kOld);
  for (const auto& from : {wifi, cellular}) {
    auto refused = check(session, old_client, from, kT0 + 3 * kSecond);
    EXPECT_EQ(refused.result.outcome, Outcome::wrong_username);
    EXPECT_FALSE(refused.result.authenticated);
    EXPECT_EQ(old_client.process_response(refused.reply).error_code, 401);
  }
  EXPECT_EQ(session.selected_address(), cellular);
  EXPECT_EQ(session.last_valid_check(), kT0 + 2 * kSecond);
  // The new generation is now the current one: its checks no longer say "pending".
  auto again = check(session, new_client, cellular, kT0 + 4 * kSecond);
  EXPECT_EQ(again.result.outcome, Outcome::success);
  EXPECT_FALSE(again.result.pending_credentials_used);
  EXPECT_FALSE(again.result.completed_restart);
}

TEST(IceRestart, OldCredentialRefusalsAfterCompletionAreRateLimited) {
  IceLiteSession::Config config;
  config.error_replies_per_second = 2;
  auto wifi = addr("192.0.2.2:54321");
  auto session = connected_session(wifi, config);
  ASSERT_TRUE(session.begin_restart(kNew));
  auto new_client = client_of(kNew);
  ASSERT_TRUE(check(session, new_client, wifi, kT0 + kSecond).result.completed_restart);
  auto old_client = client_of(kOld);
  int replied = 0, suppressed = 0;
  for (int i = 0; i < 10; ++i) {
    auto c = check(session, old_client, wifi, kT0 + kSecond);
    EXPECT_EQ(c.result.outcome, Outcome::wrong_username);
    if (c.result.reply_len > 0) ++replied;
    if (c.result.reply_suppressed) ++suppressed;
  }
  EXPECT_EQ(replied, 2);
  EXPECT_EQ(suppressed, 8);
}

TEST(IceRestart, ReplacingAPendingRestartForgetsIt) {
  auto wifi = addr("192.0.2.2:54321");
  auto session = connected_session(wifi);
  ASSERT_TRUE(session.begin_restart(kNew));
  ASSERT_TRUE(session.begin_restart(kNewer));
  EXPECT_EQ(session.pending_credentials()->local_ufrag, kNewer.local_ufrag);
  auto new_client = client_of(kNew);
  EXPECT_EQ(check(session, new_client, wifi, kT0 + kSecond).result.outcome, Outcome::wrong_username);
  auto old_client = client_of(kOld);
  EXPECT_EQ(check(session, old_client, wifi, kT0 + kSecond).result.outcome, Outcome::success);
  auto newer_client = client_of(kNewer);
  auto c = check(session, newer_client, wifi, kT0 + 2 * kSecond);
  EXPECT_TRUE(c.result.completed_restart);
  EXPECT_EQ(session.credentials().local_ufrag, kNewer.local_ufrag);
}

TEST(IceRestart, ConsentIsContinuousAcrossTheSwitch) {
  IceLiteSession::Config config;
  config.consent_timeout = 30 * kSecond;
  config.nomination_wait = 60 * kSecond;  // only nomination completes here
  auto wifi = addr("192.0.2.2:54321");
  auto cellular = addr("198.51.100.7:40000");
  auto session = connected_session(wifi, config);
  ASSERT_TRUE(session.begin_restart(kNew));
  // A check with the pending credentials refreshes consent like any valid check.
  auto new_client = client_of(kNew);
  check(session, new_client, cellular, kT0 + 25 * kSecond, /*use_candidate=*/false);
  session.on_timer(kT0 + 40 * kSecond);
  EXPECT_EQ(session.state(), State::connected);
  EXPECT_TRUE(session.restart_pending());
  EXPECT_EQ(session.last_valid_check(), kT0 + 25 * kSecond);
  // Completion keeps the clock: still connected, and consent lapses 30 s after the last check.
  ASSERT_TRUE(check(session, new_client, cellular, kT0 + 41 * kSecond).result.completed_restart);
  EXPECT_EQ(session.last_valid_check(), kT0 + 41 * kSecond);
  session.on_timer(kT0 + 70 * kSecond);
  EXPECT_EQ(session.state(), State::connected);
  session.on_timer(kT0 + 71 * kSecond);
  EXPECT_EQ(session.state(), State::disconnected);
}

TEST(IceRestart, TriggeredCheckForTheNewGeneration) {
  auto wifi = addr("192.0.2.2:54321");
  auto session = connected_session(wifi);
  std::vector<uint8_t> out(kIceReplyBufferSize);
  // The nominated pair of the old generation gets none.
  EXPECT_EQ(session.build_triggered_check(wifi, out), 0u);
  ASSERT_TRUE(session.begin_restart(kNew));
  // The same address checked with the new credentials is a new pair: it gets one, keyed with
  // the client's new pwd and naming the new ufrags.
  auto new_client = client_of(kNew);
  ASSERT_EQ(check(session, new_client, wifi, kT0 + kSecond, false).result.outcome, Outcome::success);
  const size_t n = session.build_triggered_check(wifi, out);
  ASSERT_GT(n, 0u);
  std::span<const uint8_t> request(out.data(), n);
  auto decoded = st::decode(request);
  ASSERT_TRUE(decoded);
  const auto* username = decoded->find(st::kUsername);
  ASSERT_NE(username, nullptr);
  EXPECT_EQ(std::string(username->value.begin(), username->value.end()),
            kNew.remote_ufrag + ":" + kNew.local_ufrag);
  EXPECT_TRUE(st::integrity_valid(request, kNew.remote_pwd));
  EXPECT_EQ(session.build_triggered_check(wifi, out), 0u);  // once per pair
  // Its response is recognised.
  st::Message response;
  response.type = 0x0101;
  std::memcpy(response.transaction_id.data(), request.data() + 8, 12);
  EXPECT_TRUE(session.handle_response(st::encode(response, std::string_view(kNew.remote_pwd))));

  // A new address of the new generation gets its own, too.
  auto cellular = addr("198.51.100.7:40000");
  ASSERT_EQ(check(session, new_client, cellular, kT0 + 2 * kSecond, false).result.outcome, Outcome::success);
  EXPECT_GT(session.build_triggered_check(cellular, out), 0u);
  // After completion on cellular, that nominated pair gets none.
  ASSERT_TRUE(check(session, new_client, cellular, kT0 + 3 * kSecond).result.completed_restart);
  EXPECT_EQ(session.build_triggered_check(cellular, out), 0u);
}

TEST(IceRestart, RefusedWhenDisconnectedClosedOrInvalid) {
  IceLiteSession::Config config;
  config.consent_timeout = 30 * kSecond;
  auto wifi = addr("192.0.2.2:54321");
  {
    auto session = connected_session(wifi, config);
    Credentials same_ufrag = kNew;
    same_ufrag.local_ufrag = kOld.local_ufrag;
    EXPECT_FALSE(session.begin_restart(same_ufrag));
    Credentials empty_pwd = kNew;
    empty_pwd.local_pwd.clear();
    EXPECT_FALSE(session.begin_restart(empty_pwd));
    Credentials empty_remote = kNew;
    empty_remote.remote_ufrag.clear();
    EXPECT_FALSE(session.begin_restart(empty_remote));
    EXPECT_FALSE(session.restart_pending());
    session.on_timer(kT0 + 31 * kSecond);
    ASSERT_EQ(session.state(), State::disconnected);
    EXPECT_FALSE(session.begin_restart(kNew));
    EXPECT_FALSE(session.restart_pending());
  }
  {
    auto session = connected_session(wifi, config);
    session.close();
    EXPECT_FALSE(session.begin_restart(kNew));
    EXPECT_EQ(session.pending_credentials(), nullptr);
  }
  {
    // Before any check (waiting) a restart is allowed: the client may restart at once.
    IceLiteSession session(kOld, config);
    EXPECT_TRUE(session.begin_restart(kNew));
  }
}

TEST(IceRestart, FallbackCompletesForAClientThatNeverNominates) {
  IceLiteSession::Config config;
  config.nomination_wait = 2 * kSecond;
  auto wifi = addr("192.0.2.2:54321");
  auto cellular = addr("198.51.100.7:40000");
  auto session = connected_session(wifi, config);
  ASSERT_TRUE(session.begin_restart(kNew));
  // Nothing to time before a check with the new credentials.
  EXPECT_EQ(session.next_deadline(), kT0 + config.consent_timeout);
  auto new_client = client_of(kNew);
  ASSERT_TRUE(check(session, new_client, cellular, kT0 + 5 * kSecond, false).result.pending_credentials_used);
  EXPECT_EQ(session.next_deadline(), kT0 + 7 * kSecond);
  session.on_timer(kT0 + 6 * kSecond);
  EXPECT_TRUE(session.restart_pending());
  EXPECT_EQ(session.selected_address(), wifi);
  session.on_timer(kT0 + 7 * kSecond);
  EXPECT_FALSE(session.restart_pending());
  EXPECT_EQ(session.credentials().local_ufrag, kNew.local_ufrag);
  EXPECT_EQ(session.selected_address(), cellular);
  EXPECT_EQ(session.state(), State::connected);
  auto old_client = client_of(kOld);
  EXPECT_EQ(check(session, old_client, wifi, kT0 + 8 * kSecond).result.outcome, Outcome::wrong_username);
}

TEST(IceRestart, ZeroNominationWaitCompletesOnTheFirstNewCheck) {
  IceLiteSession::Config config;
  config.nomination_wait = 0;
  auto wifi = addr("192.0.2.2:54321");
  auto session = connected_session(wifi, config);
  ASSERT_TRUE(session.begin_restart(kNew));
  auto new_client = client_of(kNew);
  EXPECT_TRUE(check(session, new_client, wifi, kT0 + kSecond, false).result.completed_restart);
}

TEST(IceRestart, ReplayedNewGenerationCheckCompletesNothing) {
  auto wifi = addr("192.0.2.2:54321");
  auto attacker = addr("203.0.113.66:9999");
  auto session = connected_session(wifi);
  ASSERT_TRUE(session.begin_restart(kNew));
  auto new_client = client_of(kNew);
  std::vector<uint8_t> request(512), reply(kIceReplyBufferSize);
  const size_t len = new_client.build_request(request);
  // The client's own nominating check arrives first (answered, it completes the restart);
  // a copy of it from elsewhere then moves nothing.
  auto r = session.handle_request(std::span(request).first(len), wifi, reply, kT0 + kSecond);
  ASSERT_TRUE(r.completed_restart);
  r = session.handle_request(std::span(request).first(len), attacker, reply, kT0 + 2 * kSecond);
  EXPECT_TRUE(r.replayed);
  EXPECT_FALSE(r.completed_restart);
  EXPECT_EQ(session.selected_address(), wifi);
}

TEST(IceRestart, WaitingSessionCompletesOnTheNewGeneration) {
  // A client that restarts before it ever nominated: the restart's nomination connects it.
  IceLiteSession session(kOld, {});
  ASSERT_TRUE(session.begin_restart(kNew));
  auto new_client = client_of(kNew);
  auto cellular = addr("198.51.100.7:40000");
  EXPECT_TRUE(check(session, new_client, cellular, kT0).result.completed_restart);
  EXPECT_EQ(session.state(), State::connected);
  EXPECT_EQ(session.selected_address(), cellular);
}

}  // namespace
}  // namespace rtce
