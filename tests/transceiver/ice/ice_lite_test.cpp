// ice_lite_test.cpp — the ICE-lite server against a real Chromium Binding request (the golden
// capture) and its mutations, consent and nomination timing, the routing-ufrag walk, and a
// round trip with IceClientChecker. Replies are checked with stun_test_util.h, which shares
// no code with libnice.
#include "ice_lite.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ice_client.h"
#include "stun_test_util.h"

namespace rtce {
namespace {

namespace st = stun_test;
using Outcome = IceLiteSession::Outcome;
using State = IceLiteSession::State;

constexpr Nanos kSecond = 1'000'000'000;
constexpr Nanos kT0 = 1000 * kSecond;

struct Golden {
  std::vector<uint8_t> request;
  std::string server_ufrag, server_pwd, client_ufrag;
};

const Golden& golden() {
  static const Golden g = [] {
    std::string dir = std::string(RTCE_SOURCE_DIR) + "/tests/golden/";
    Golden out;
    out.request = st::hex_decode(st::read_file(dir + "chrome_binding_request.hex"));
    auto json = nlohmann::json::parse(st::read_file(dir + "chrome_binding_request.json"));
    out.server_ufrag = json.at("server_ufrag").get<std::string>();
    out.server_pwd = json.at("server_pwd").get<std::string>();
    out.client_ufrag = json.at("client_ufrag").get<std::string>();
    if (out.request.size() != json.at("total_length").get<size_t>())
      throw std::runtime_error("golden hex length");
    return out;
  }();
  return g;
}

SocketAddress addr(const char* text) { return *SocketAddress::parse(text); }

IceLiteSession::Credentials golden_credentials() {
  return {golden().server_ufrag, golden().server_pwd, golden().client_ufrag, "clientpasswordnotusedbylite"};
}

// The golden request, decoded so that tests can alter it and re-sign it with `key`.
st::Message golden_message() { return *st::decode(golden().request); }

void replace_attribute_type(st::Message& m, uint16_t from, uint16_t to) {
  for (auto& a : m.attributes)
    if (a.type == from) a.type = to;
}

void add_before_integrity(st::Message& m, st::Attribute attr) {
  for (auto it = m.attributes.begin(); it != m.attributes.end(); ++it) {
    if (it->type == st::kMessageIntegrity) {
      m.attributes.insert(it, std::move(attr));
      return;
    }
  }
  m.attributes.push_back(std::move(attr));
}

struct Exchange {
  IceLiteSession::Result result;
  std::vector<uint8_t> reply;
  std::optional<st::Message> decoded;
};

Exchange exchange(IceLiteSession& session, std::span<const uint8_t> request, const SocketAddress& client,
                  Nanos now) {
  Exchange x;
  std::vector<uint8_t> out(kIceReplyBufferSize);
  x.result = session.handle_request(request, client, out, now);
  out.resize(x.result.reply_len);
  x.reply = out;
  if (!out.empty()) x.decoded = st::decode(out);
  return x;
}

// An error response as RFC 5389 wants it: our transaction id, the code, a valid FINGERPRINT,
// and MESSAGE-INTEGRITY only when the request authenticated.
void expect_error_reply(const Exchange& x, std::span<const uint8_t> request, int code, bool signed_with_pwd) {
  ASSERT_TRUE(x.decoded) << "reply does not decode";
  EXPECT_EQ(x.decoded->type, 0x0111);
  EXPECT_EQ(0, std::memcmp(x.decoded->transaction_id.data(), request.data() + 8, 12));
  EXPECT_EQ(st::error_code(*x.decoded), code);
  EXPECT_TRUE(st::fingerprint_valid(x.reply));
  EXPECT_EQ(x.decoded->find(st::kMessageIntegrity) != nullptr, signed_with_pwd);
  if (signed_with_pwd) {
    EXPECT_TRUE(st::integrity_valid(x.reply, golden().server_pwd));
  } else {
    // Unauthenticated requests must not be amplified (docs/transceiver-ice.md).
    EXPECT_LE(x.reply.size(), request.size());
  }
}

TEST(IceGolden, GoldenBytesAreWhatTheJsonSays) {
  ASSERT_EQ(golden().request.size(), 108u);
  EXPECT_TRUE(st::integrity_valid(golden().request, golden().server_pwd));
  EXPECT_TRUE(st::fingerprint_valid(golden().request));
  // The re-encoder reproduces Chrome's bytes exactly, so mutations differ only where meant.
  EXPECT_EQ(st::encode(golden_message(), golden().server_pwd), golden().request);
}

TEST(IceGolden, ChromeRequestGetsSuccessWithMappedAddressIntegrityAndFingerprint) {
  IceLiteSession session(golden_credentials(), {});
  auto client = addr("192.0.2.2:54321");
  auto x = exchange(session, golden().request, client, kT0);
  EXPECT_EQ(x.result.outcome, Outcome::success);
  EXPECT_TRUE(x.result.authenticated);
  EXPECT_FALSE(x.result.nominated);  // Chrome's first check carries no USE-CANDIDATE
  ASSERT_TRUE(x.decoded);
  EXPECT_EQ(x.decoded->type, 0x0101);
  EXPECT_EQ(0, std::memcmp(x.decoded->transaction_id.data(), golden().request.data() + 8, 12));
  EXPECT_EQ(st::xor_mapped_address(*x.decoded), client);
  EXPECT_TRUE(st::integrity_valid(x.reply, golden().server_pwd));
  EXPECT_FALSE(st::integrity_valid(x.reply, "someotherpassword0123456"));
  EXPECT_TRUE(st::fingerprint_valid(x.reply));
  // FINGERPRINT last, MESSAGE-INTEGRITY just before it (RFC 5389 15.4, 15.5).
  ASSERT_GE(x.decoded->attributes.size(), 3u);
  EXPECT_EQ(x.decoded->attributes.back().type, st::kFingerprint);
  EXPECT_EQ(x.decoded->attributes[x.decoded->attributes.size() - 2].type, st::kMessageIntegrity);

  EXPECT_EQ(session.state(), State::waiting);
  EXPECT_EQ(session.last_valid_check(), kT0);
}

TEST(IceGolden, MappedAddressFollowsTheClientFamily) {
  IceLiteSession session(golden_credentials(), {});
  auto v6 = addr("[2001:db8::7]:40000");
  auto x = exchange(session, golden().request, v6, kT0);
  ASSERT_EQ(x.result.outcome, Outcome::success);
  EXPECT_EQ(st::xor_mapped_address(*x.decoded), v6);
  // A dual-stack socket reports IPv4 clients as ::ffff:a.b.c.d; the client must see its IPv4.
  auto mapped_v4 = addr("[::ffff:192.0.2.9]:5000");
  x = exchange(session, golden().request, mapped_v4, kT0);
  ASSERT_EQ(x.result.outcome, Outcome::success);
  EXPECT_EQ(st::xor_mapped_address(*x.decoded), addr("192.0.2.9:5000"));
}

TEST(IceGolden, WrongPasswordGets401WithoutIntegrity) {
  auto creds = golden_credentials();
  creds.local_pwd = "notthepasswordchromeused";
  IceLiteSession session(creds, {});
  auto x = exchange(session, golden().request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::unauthorized);
  EXPECT_FALSE(x.result.authenticated);
  expect_error_reply(x, golden().request, 401, false);
  EXPECT_FALSE(session.last_valid_check());
}

TEST(IceGolden, WrongServerUfragGets401EvenWhenIntegrityIsRight) {
  auto m = golden_message();
  auto& username = const_cast<st::Attribute&>(*m.find(st::kUsername));
  username.value[0] = username.value[0] == 'X' ? 'Y' : 'X';
  auto request = st::encode(m, golden().server_pwd);
  ASSERT_TRUE(st::integrity_valid(request, golden().server_pwd));
  IceLiteSession session(golden_credentials(), {});
  auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::wrong_username);
  expect_error_reply(x, request, 401, false);
}

TEST(IceGolden, WrongClientUfragGets401) {
  auto creds = golden_credentials();
  creds.remote_ufrag = "abcd";  // the offer named another client ufrag
  IceLiteSession session(creds, {});
  auto x = exchange(session, golden().request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::wrong_username);
  expect_error_reply(x, golden().request, 401, false);
}

TEST(IceGolden, MissingIntegrityGets400) {
  auto m = golden_message();
  auto request = st::encode(m, std::nullopt);
  IceLiteSession session(golden_credentials(), {});
  auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::bad_request);
  expect_error_reply(x, request, 400, false);
  EXPECT_FALSE(session.last_valid_check());
}

TEST(IceGolden, MissingUsernameGets400) {
  auto m = golden_message();
  std::erase_if(m.attributes, [](const st::Attribute& a) { return a.type == st::kUsername; });
  auto request = st::encode(m, golden().server_pwd);
  IceLiteSession session(golden_credentials(), {});
  auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::bad_request);
  expect_error_reply(x, request, 400, false);
}

TEST(IceGolden, IceControlledGets487SignedAndNoStateChange) {
  auto m = golden_message();
  replace_attribute_type(m, st::kIceControlling, st::kIceControlled);
  auto request = st::encode(m, golden().server_pwd);
  IceLiteSession session(golden_credentials(), {});
  auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::role_conflict);
  EXPECT_TRUE(x.result.authenticated);
  expect_error_reply(x, request, 487, true);
  EXPECT_EQ(session.state(), State::waiting);
  EXPECT_FALSE(session.last_valid_check());
}

TEST(IceGolden, IceControlledGets487WhateverTheTieBreakers) {
  // libnice would switch a controlled agent to controlling when its tie-breaker is larger;
  // a lite agent must not, whatever the peer's value.
  for (uint8_t fill : {0x00, 0x7f, 0xff}) {
    auto m = golden_message();
    replace_attribute_type(m, st::kIceControlling, st::kIceControlled);
    for (auto& a : m.attributes)
      if (a.type == st::kIceControlled) std::fill(a.value.begin(), a.value.end(), fill);
    auto request = st::encode(m, golden().server_pwd);
    IceLiteSession session(golden_credentials(), {});
    auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
    EXPECT_EQ(x.result.outcome, Outcome::role_conflict) << int(fill);
    expect_error_reply(x, request, 487, true);
  }
}

TEST(IceGolden, CorruptFingerprintIsDroppedSilently) {
  auto request = golden().request;
  request.back() ^= 0x01;
  IceLiteSession session(golden_credentials(), {});
  auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::malformed);
  EXPECT_EQ(x.result.reply_len, 0u);
  EXPECT_FALSE(session.last_valid_check());
}

TEST(IceGolden, MissingFingerprintIsDroppedSilently) {
  auto request = st::encode(golden_message(), golden().server_pwd, /*fingerprint=*/false);
  IceLiteSession session(golden_credentials(), {});
  auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::malformed);
  EXPECT_EQ(x.result.reply_len, 0u);
}

TEST(IceGolden, EveryBitFlipIsRefused) {
  // MESSAGE-INTEGRITY and FINGERPRINT cover every byte: no single flipped bit may yield a 200.
  for (size_t i = 0; i < golden().request.size(); i++) {
    for (int bit = 0; bit < 8; bit++) {
      auto request = golden().request;
      request[i] ^= static_cast<uint8_t>(1 << bit);
      IceLiteSession session(golden_credentials(), {});
      auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
      EXPECT_NE(x.result.outcome, Outcome::success) << "byte " << i << " bit " << bit;
      EXPECT_FALSE(session.last_valid_check());
    }
  }
}

TEST(IceGolden, UseCandidateNominatesAndConnects) {
  auto m = golden_message();
  add_before_integrity(m, {st::kUseCandidate, {}});
  auto request = st::encode(m, golden().server_pwd);
  IceLiteSession session(golden_credentials(), {});
  auto client = addr("192.0.2.2:54321");
  auto x = exchange(session, request, client, kT0);
  EXPECT_EQ(x.result.outcome, Outcome::success);
  EXPECT_TRUE(x.result.nominated);
  EXPECT_EQ(session.state(), State::connected);
  EXPECT_EQ(session.selected_address(), client);
}

TEST(IceGolden, UnknownComprehensionRequiredAttributeGets420) {
  auto m = golden_message();
  add_before_integrity(m, {0x0033, {1, 2, 3, 4}});
  auto request = st::encode(m, golden().server_pwd);
  IceLiteSession session(golden_credentials(), {});
  auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::unknown_attribute);
  expect_error_reply(x, request, 420, true);
  const st::Attribute* unknown = x.decoded->find(st::kUnknownAttributes);
  ASSERT_NE(unknown, nullptr);
  ASSERT_GE(unknown->value.size(), 2u);
  EXPECT_EQ(st::be16(unknown->value.data()), 0x0033);
  EXPECT_FALSE(session.last_valid_check());
}

TEST(IceGolden, NonBindingMethodGets400Signed) {
  auto m = golden_message();
  m.type = 0x0003;  // Allocate request
  auto request = st::encode(m, golden().server_pwd);
  IceLiteSession session(golden_credentials(), {});
  auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::bad_request);
  ASSERT_TRUE(x.decoded);
  EXPECT_EQ(x.decoded->type, 0x0113);
  EXPECT_EQ(st::error_code(*x.decoded), 400);
}

TEST(IceGolden, ResponsesAndIndicationsGetNoReply) {
  for (uint16_t type : {0x0101, 0x0111, 0x0011}) {
    auto m = golden_message();
    m.type = type;
    auto request = st::encode(m, golden().server_pwd);
    IceLiteSession session(golden_credentials(), {});
    auto x = exchange(session, request, addr("192.0.2.2:54321"), kT0);
    EXPECT_EQ(x.result.outcome, Outcome::not_a_request) << type;
    EXPECT_EQ(x.result.reply_len, 0u);
  }
}

TEST(IceGolden, ReplyBufferTooSmallSendsNothing) {
  IceLiteSession session(golden_credentials(), {});
  std::vector<uint8_t> out(40);
  auto result = session.handle_request(golden().request, addr("192.0.2.2:54321"), out, kT0);
  EXPECT_EQ(result.outcome, Outcome::internal_error);
  EXPECT_EQ(result.reply_len, 0u);
}

TEST(IceConsent, LapsesThirtySecondsAfterTheLastCheck) {
  IceLiteSession session(golden_credentials(), {});
  auto client = addr("192.0.2.2:54321");
  session.on_timer(kT0 + 100 * kSecond);  // no check yet: nothing to lapse
  EXPECT_EQ(session.state(), State::waiting);
  ASSERT_EQ(exchange(session, golden().request, client, kT0).result.outcome, Outcome::success);
  // A consent check five seconds later (Chrome's cadence) moves the deadline.
  ASSERT_EQ(exchange(session, golden().request, client, kT0 + 5 * kSecond).result.outcome, Outcome::success);
  EXPECT_EQ(session.last_valid_check(), kT0 + 5 * kSecond);
  session.on_timer(kT0 + 30 * kSecond);
  EXPECT_NE(session.state(), State::disconnected);
  session.on_timer(kT0 + 35 * kSecond - 1);
  EXPECT_NE(session.state(), State::disconnected);
  session.on_timer(kT0 + 35 * kSecond);
  EXPECT_EQ(session.state(), State::disconnected);
  // Lapsed consent is final for this session (RFC 7675 5.1): no more answers.
  auto x = exchange(session, golden().request, client, kT0 + 36 * kSecond);
  EXPECT_EQ(x.result.outcome, Outcome::session_inactive);
  EXPECT_EQ(x.result.reply_len, 0u);
}

TEST(IceConsent, FailedChecksDoNotRefreshConsent) {
  IceLiteSession session(golden_credentials(), {});
  auto client = addr("192.0.2.2:54321");
  ASSERT_EQ(exchange(session, golden().request, client, kT0).result.outcome, Outcome::success);
  auto bad = golden().request;
  bad[*st::attribute_offset(bad, st::kMessageIntegrity) + 9] ^= 1;  // inside the HMAC
  auto resigned_fp_only = bad;
  {
    // Keep the broken MAC but give it a valid FINGERPRINT so that it reaches the HMAC check.
    auto off = st::attribute_offset(resigned_fp_only, st::kFingerprint);
    uint32_t fp = st::fingerprint_of(std::span<const uint8_t>(resigned_fp_only).first(*off));
    for (int i = 0; i < 4; i++) resigned_fp_only[*off + 4 + i] = static_cast<uint8_t>(fp >> (24 - 8 * i));
  }
  auto x = exchange(session, resigned_fp_only, client, kT0 + 20 * kSecond);
  EXPECT_EQ(x.result.outcome, Outcome::unauthorized);
  EXPECT_EQ(session.last_valid_check(), kT0);
  session.on_timer(kT0 + 30 * kSecond);
  EXPECT_EQ(session.state(), State::disconnected);
}

// The golden request (or m) re-signed with another transaction id: a fresh check.
std::vector<uint8_t> fresh_check(st::Message m, uint8_t id_byte) {
  m.transaction_id[11] = id_byte;
  m.transaction_id[10] = 0xA5;
  return st::encode(m, golden().server_pwd);
}

TEST(IceConsent, NewClientAddressKeepsTheSession) {
  auto m = golden_message();
  add_before_integrity(m, {st::kUseCandidate, {}});
  auto nominating = fresh_check(m, 1);
  IceLiteSession session(golden_credentials(), {});
  auto first = addr("192.0.2.2:54321");
  auto moved = addr("198.51.100.20:61000");
  ASSERT_EQ(exchange(session, nominating, first, kT0).result.outcome, Outcome::success);
  ASSERT_EQ(session.state(), State::connected);
  nominating = fresh_check(m, 2);

  // A plain check from elsewhere (NAT rebinding): answered with the new address, consent
  // refreshed, the selected pair unchanged until the client nominates the new one.
  auto x = exchange(session, golden().request, moved, kT0 + 10 * kSecond);
  EXPECT_EQ(x.result.outcome, Outcome::success);
  EXPECT_EQ(st::xor_mapped_address(*x.decoded), moved);
  EXPECT_EQ(session.state(), State::connected);
  EXPECT_EQ(session.last_valid_check(), kT0 + 10 * kSecond);
  EXPECT_EQ(session.selected_address(), first);

  x = exchange(session, nominating, moved, kT0 + 11 * kSecond);
  EXPECT_TRUE(x.result.nominated);
  EXPECT_EQ(session.selected_address(), moved);
  session.on_timer(kT0 + 40 * kSecond);
  EXPECT_EQ(session.state(), State::connected);
}

TEST(IceReplay, SameTransactionFromAnotherAddressIsAnsweredButProvesNothing) {
  auto m = golden_message();
  add_before_integrity(m, {st::kUseCandidate, {}});
  auto nominating = st::encode(m, golden().server_pwd);
  IceLiteSession session(golden_credentials(), {});
  auto client = addr("192.0.2.2:54321");
  auto attacker = addr("192.0.2.2:54999");
  ASSERT_TRUE(exchange(session, nominating, client, kT0).result.nominated);

  // The captured check, re-sent from another port: a success reply (the sender might be a
  // rebinding client), but flagged, not nominating, no consent refresh, no new selection.
  auto x = exchange(session, nominating, attacker, kT0 + 5 * kSecond);
  EXPECT_EQ(x.result.outcome, Outcome::success);
  EXPECT_TRUE(x.result.replayed);
  EXPECT_FALSE(x.result.nominated);
  EXPECT_EQ(session.selected_address(), client);
  EXPECT_EQ(session.last_valid_check(), kT0);

  // A retransmission from the client itself is not a replay.
  x = exchange(session, nominating, client, kT0 + 6 * kSecond);
  EXPECT_FALSE(x.result.replayed);
  EXPECT_TRUE(x.result.nominated);
  EXPECT_EQ(session.last_valid_check(), kT0 + 6 * kSecond);

  // A fresh check (new id: only the password holder can sign it) from the new port does move.
  x = exchange(session, fresh_check(m, 7), attacker, kT0 + 7 * kSecond);
  EXPECT_FALSE(x.result.replayed);
  EXPECT_TRUE(x.result.nominated);
  EXPECT_EQ(session.selected_address(), attacker);
}

TEST(IceConsent, AuthenticatedMediaRefreshesConsent) {
  IceLiteSession::Config config;
  config.consent_timeout = 30 * kSecond;
  IceLiteSession session(golden_credentials(), config);
  // Before any valid check there is nothing to keep alive.
  session.refresh_consent(kT0);
  EXPECT_FALSE(session.last_valid_check());
  auto m = golden_message();
  add_before_integrity(m, {st::kUseCandidate, {}});
  ASSERT_TRUE(
      exchange(session, st::encode(m, golden().server_pwd), addr("192.0.2.2:54321"), kT0).result.nominated);
  // SRTP keeps arriving every 20 s, no STUN at all: the session outlives the timeout twice.
  for (int i = 1; i <= 4; ++i) {
    session.refresh_consent(kT0 + i * 20 * kSecond);
    session.on_timer(kT0 + i * 20 * kSecond + kSecond);
    EXPECT_EQ(session.state(), State::connected) << i;
  }
  session.on_timer(kT0 + 80 * kSecond + 30 * kSecond);
  EXPECT_EQ(session.state(), State::disconnected);
}

IceLiteSession::Credentials credentials_with_client_pwd() {
  auto c = golden_credentials();
  c.remote_pwd = "clientpassword0123456789";
  return c;
}

TEST(IceTriggered, OneCheckPerPairAfterAnAuthenticatedCheckOnly) {
  IceLiteSession session(credentials_with_client_pwd(), {});
  auto client = addr("192.0.2.2:54321");
  std::vector<uint8_t> out(kIceReplyBufferSize);
  // Nothing for a pair that sent no valid check: strangers cannot provoke a request.
  EXPECT_EQ(session.build_triggered_check(client, out), 0u);
  auto bad = golden().request;
  bad[*st::attribute_offset(bad, st::kMessageIntegrity) + 9] ^= 1;
  exchange(session, bad, client, kT0);
  EXPECT_EQ(session.build_triggered_check(client, out), 0u);

  ASSERT_EQ(exchange(session, golden().request, client, kT0).result.outcome, Outcome::success);
  const size_t n = session.build_triggered_check(client, out);
  ASSERT_GT(n, 0u);
  std::span<const uint8_t> request(out.data(), n);
  auto decoded = st::decode(request);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->type, 0x0001);  // Binding request
  const auto* username = decoded->find(st::kUsername);
  ASSERT_NE(username, nullptr);
  EXPECT_EQ(std::string(username->value.begin(), username->value.end()),
            golden().client_ufrag + ":" + golden().server_ufrag);
  EXPECT_TRUE(st::integrity_valid(request, "clientpassword0123456789"));  // the client's key
  EXPECT_TRUE(st::fingerprint_valid(request));
  EXPECT_NE(decoded->find(st::kIceControlled), nullptr);  // a lite agent is controlled
  EXPECT_EQ(decoded->find(st::kIceControlling), nullptr);
  EXPECT_EQ(decoded->find(st::kUseCandidate), nullptr);
  EXPECT_NE(decoded->find(st::kPriority), nullptr);
  // Not larger than what provoked it, and only once per pair.
  EXPECT_LE(n, golden().request.size());
  EXPECT_EQ(session.build_triggered_check(client, out), 0u);

  // The client's answer matches by transaction id; another id does not.
  st::Message response;
  response.type = 0x0101;
  std::memcpy(response.transaction_id.data(), request.data() + 8, 12);
  auto answer = st::encode(response, std::string_view("clientpassword0123456789"));
  EXPECT_TRUE(session.handle_response(answer));
  response.transaction_id[0] ^= 1;
  EXPECT_FALSE(session.handle_response(st::encode(response, std::string_view("clientpassword0123456789"))));
  EXPECT_FALSE(session.handle_response(golden().request));  // a request is not a response
}

TEST(IceTriggered, NoneWithoutTheClientPwdNorOnANominatedPairNorBeyondTheBound) {
  auto client = addr("192.0.2.2:54321");
  std::vector<uint8_t> out(kIceReplyBufferSize);
  {
    auto creds = golden_credentials();
    creds.remote_pwd.clear();
    IceLiteSession no_pwd(creds, {});
    ASSERT_EQ(exchange(no_pwd, golden().request, client, kT0).result.outcome, Outcome::success);
    EXPECT_EQ(no_pwd.build_triggered_check(client, out), 0u);
  }
  {
    IceLiteSession session(credentials_with_client_pwd(), {});
    auto m = golden_message();
    add_before_integrity(m, {st::kUseCandidate, {}});
    ASSERT_TRUE(exchange(session, st::encode(m, golden().server_pwd), client, kT0).result.nominated);
    EXPECT_EQ(session.build_triggered_check(client, out), 0u);  // already nominated: nothing to trigger
  }
  {
    IceLiteSession session(credentials_with_client_pwd(), {});
    size_t sent = 0;
    for (int port = 0; port < 10; ++port) {
      auto from = addr(("192.0.2.2:" + std::to_string(50000 + port)).c_str());
      ASSERT_EQ(exchange(session, fresh_check(golden_message(), static_cast<uint8_t>(port)), from, kT0)
                    .result.outcome,
                Outcome::success);
      if (session.build_triggered_check(from, out) > 0) ++sent;
    }
    EXPECT_EQ(sent, IceLiteSession::kMaxTriggeredChecks);
  }
}

TEST(IceErrors, UnauthenticatedErrorRepliesAreRateLimitedPerSession) {
  IceLiteSession::Config config;
  config.error_replies_per_second = 5;
  IceLiteSession session(golden_credentials(), config);
  auto bad = golden().request;
  bad[*st::attribute_offset(bad, st::kMessageIntegrity) + 9] ^= 1;
  {
    auto off = st::attribute_offset(bad, st::kFingerprint);
    uint32_t fp = st::fingerprint_of(std::span<const uint8_t>(bad).first(*off));
    for (int i = 0; i < 4; i++) bad[*off + 4 + i] = static_cast<uint8_t>(fp >> (24 - 8 * i));
  }
  auto spoofed = addr("203.0.113.9:4000");
  int replies = 0, suppressed = 0;
  for (int i = 0; i < 1000; ++i) {  // 1000 forged checks within one second
    auto x = exchange(session, bad, spoofed, kT0 + i * 1'000'000);
    EXPECT_EQ(x.result.outcome, Outcome::unauthorized);
    replies += x.result.reply_len > 0;
    suppressed += x.result.reply_suppressed;
  }
  EXPECT_LE(replies, 5 + 5);  // the burst, plus what one second refills
  EXPECT_GE(replies, 5);
  EXPECT_EQ(replies + suppressed, 1000);
  // 0 = silent.
  config.error_replies_per_second = 0;
  IceLiteSession silent(golden_credentials(), config);
  EXPECT_EQ(exchange(silent, bad, spoofed, kT0).result.reply_len, 0u);
  // Authenticated checks are never limited.
  for (int i = 0; i < 100; ++i)
    EXPECT_GT(exchange(session, golden().request, addr("192.0.2.2:54321"), kT0 + kSecond).result.reply_len,
              0u);
}

TEST(IceNomination, FallsBackToTheLatestCheckedAddressAfterTheWait) {
  IceLiteSession::Config config;
  config.nomination_wait = 2 * kSecond;
  IceLiteSession session(golden_credentials(), config);
  EXPECT_EQ(session.next_deadline(), std::numeric_limits<Nanos>::max());
  ASSERT_EQ(exchange(session, golden().request, addr("192.0.2.2:1111"), kT0).result.outcome,
            Outcome::success);
  // A check of its own (another transaction id): the same bytes from another address would be a replay.
  ASSERT_EQ(exchange(session, fresh_check(golden_message(), 9), addr("192.0.2.2:2222"), kT0 + kSecond)
                .result.outcome,
            Outcome::success);
  EXPECT_EQ(session.next_deadline(), kT0 + 2 * kSecond);
  session.on_timer(kT0 + 2 * kSecond - 1);
  EXPECT_EQ(session.state(), State::waiting);
  EXPECT_FALSE(session.selected_address());
  session.on_timer(kT0 + 2 * kSecond);
  EXPECT_EQ(session.state(), State::connected);
  EXPECT_EQ(session.selected_address(), addr("192.0.2.2:2222"));
  EXPECT_EQ(session.next_deadline(), kT0 + kSecond + 30 * kSecond);
}

TEST(IceNomination, ZeroWaitSelectsOnTheFirstCheck) {
  IceLiteSession::Config config;
  config.nomination_wait = 0;
  IceLiteSession session(golden_credentials(), config);
  auto x = exchange(session, golden().request, addr("192.0.2.2:1111"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::success);
  EXPECT_FALSE(x.result.nominated);
  EXPECT_EQ(session.state(), State::connected);
}

TEST(IceSession, ClosedSessionAnswersNothing) {
  IceLiteSession session(golden_credentials(), {});
  session.close();
  auto x = exchange(session, golden().request, addr("192.0.2.2:1111"), kT0);
  EXPECT_EQ(x.result.outcome, Outcome::session_inactive);
  EXPECT_EQ(x.result.reply_len, 0u);
  EXPECT_EQ(session.state(), State::closed);
}

TEST(IceSession, RefusesEmptyCredentials) {
  auto creds = golden_credentials();
  creds.local_pwd.clear();  // libnice would skip the HMAC with an empty key
  EXPECT_THROW(IceLiteSession(creds, {}), std::invalid_argument);
}

TEST(IceSession, TieBreakersDifferPerSession) {
  IceLiteSession a(golden_credentials(), {});
  IceLiteSession b(golden_credentials(), {});
  EXPECT_NE(a.tie_breaker(), b.tie_breaker());
}

TEST(IceUfrag, ServerUfragOfTheGoldenRequest) {
  auto ufrag = stun_request_server_ufrag(golden().request);
  ASSERT_TRUE(ufrag);
  EXPECT_EQ(*ufrag, golden().server_ufrag);
  EXPECT_TRUE(looks_like_stun(golden().request));
}

TEST(IceUfrag, EveryTruncationIsRefusedWithinBounds) {
  // Each prefix lives in its own exact-size heap block, so ASan (fuzz_ice, RTCE_SANITIZE)
  // catches a read past it; the result must be "not a request" for every proper prefix.
  const auto& full = golden().request;
  IceLiteSession session(golden_credentials(), {});
  for (size_t n = 0; n < full.size(); n++) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(stun_request_server_ufrag(prefix)) << n;
    auto x = exchange(session, prefix, addr("192.0.2.2:1111"), kT0);
    EXPECT_EQ(x.result.reply_len, 0u) << n;
    EXPECT_EQ(x.result.outcome, Outcome::malformed) << n;
  }
  // So is a prefix whose length field is patched to match (attributes cut mid-way).
  for (size_t n = 20; n < full.size(); n += 4) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    st::set_length(prefix, n - 20);
    auto x = exchange(session, prefix, addr("192.0.2.2:1111"), kT0);
    EXPECT_NE(x.result.outcome, Outcome::success) << n;
    EXPECT_FALSE(session.last_valid_check()) << n;
  }
}

TEST(IceUfrag, RefusesWhatIsNotABindingRequestWithUsername) {
  auto m = golden_message();
  m.type = 0x0101;
  EXPECT_FALSE(stun_request_server_ufrag(st::encode(m, golden().server_pwd)));
  m = golden_message();
  std::erase_if(m.attributes, [](const st::Attribute& a) { return a.type == st::kUsername; });
  EXPECT_FALSE(stun_request_server_ufrag(st::encode(m, golden().server_pwd)));
  m = golden_message();
  const_cast<st::Attribute*>(m.find(st::kUsername))->value = {'n', 'o', 'c', 'o', 'l', 'o', 'n'};
  EXPECT_FALSE(stun_request_server_ufrag(st::encode(m, golden().server_pwd)));
}

TEST(IceUfrag, LooksLikeStunFollowsRfc7983) {
  auto d = golden().request;
  EXPECT_TRUE(looks_like_stun(d));
  d[0] = 22;  // DTLS handshake
  EXPECT_FALSE(looks_like_stun(d));
  d = golden().request;
  d[5] ^= 1;  // cookie
  EXPECT_FALSE(looks_like_stun(d));
  EXPECT_FALSE(looks_like_stun(std::span<const uint8_t>(golden().request).first(19)));
}

TEST(IceClient, RequestCarriesWhatABrowserSends) {
  IceClientChecker checker("serverufrag0123", "serverpassword0123456789", "cli1", 0x0102030405060708ull);
  std::vector<uint8_t> buf(512);
  size_t len = checker.build_request(buf);
  ASSERT_GT(len, 0u);
  buf.resize(len);
  auto m = st::decode(buf);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->type, 0x0001);
  auto txid = checker.transaction_id();
  EXPECT_EQ(0, std::memcmp(m->transaction_id.data(), txid.data(), 12));
  const auto* username = m->find(st::kUsername);
  ASSERT_NE(username, nullptr);
  EXPECT_EQ(std::string(username->value.begin(), username->value.end()), "serverufrag0123:cli1");
  ASSERT_NE(m->find(st::kPriority), nullptr);
  EXPECT_EQ(st::be32(m->find(st::kPriority)->value.data()), IceClientChecker::kDefaultPriority);
  ASSERT_NE(m->find(st::kIceControlling), nullptr);
  EXPECT_EQ(m->find(st::kIceControlling)->value, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_NE(m->find(st::kUseCandidate), nullptr);
  EXPECT_TRUE(st::integrity_valid(buf, "serverpassword0123456789"));
  EXPECT_TRUE(st::fingerprint_valid(buf));
  EXPECT_EQ(stun_request_server_ufrag(buf), "serverufrag0123");
}

IceLiteSession::Credentials round_trip_credentials() {
  return {"serverufrag0123", "serverpassword0123456789", "cli1", "clientpassword0123456789"};
}

TEST(IceClient, RoundTripNominatesAndReturnsTheMappedAddress) {
  IceLiteSession session(round_trip_credentials(), {});
  IceClientChecker checker("serverufrag0123", "serverpassword0123456789", "cli1");
  std::vector<uint8_t> request(512), reply(kIceReplyBufferSize);
  auto client = addr("203.0.113.5:50123");
  size_t len = checker.build_request(request);
  auto result = session.handle_request(std::span(request).first(len), client, reply, kT0);
  ASSERT_EQ(result.outcome, Outcome::success);
  EXPECT_TRUE(result.nominated);
  EXPECT_EQ(session.state(), State::connected);
  auto response = checker.process_response(std::span(reply).first(result.reply_len));
  EXPECT_EQ(response.verdict, IceClientChecker::Verdict::success) << to_string(response.verdict);
  EXPECT_EQ(response.mapped, client);
  // The same answer again: the transaction is done, so it no longer matches.
  EXPECT_EQ(checker.process_response(std::span(reply).first(result.reply_len)).verdict,
            IceClientChecker::Verdict::unmatched);
}

TEST(IceClient, RoundTripErrors) {
  IceLiteSession session(round_trip_credentials(), {});
  std::vector<uint8_t> request(512), reply(kIceReplyBufferSize);
  auto client = addr("203.0.113.5:50123");

  IceClientChecker controlled("serverufrag0123", "serverpassword0123456789", "cli1");
  size_t len = controlled.build_request(request, {.use_candidate = false, .controlling = false});
  auto result = session.handle_request(std::span(request).first(len), client, reply, kT0);
  ASSERT_EQ(result.outcome, Outcome::role_conflict);
  auto response = controlled.process_response(std::span(reply).first(result.reply_len));
  EXPECT_EQ(response.verdict, IceClientChecker::Verdict::error_response);
  EXPECT_EQ(response.error_code, 487);

  IceClientChecker wrong_pwd("serverufrag0123", "wrongpassword01234567890", "cli1");
  len = wrong_pwd.build_request(request);
  result = session.handle_request(std::span(request).first(len), client, reply, kT0);
  ASSERT_EQ(result.outcome, Outcome::unauthorized);
  response = wrong_pwd.process_response(std::span(reply).first(result.reply_len));
  EXPECT_EQ(response.verdict, IceClientChecker::Verdict::error_response);
  EXPECT_EQ(response.error_code, 401);
}

TEST(IceClient, RejectsForgedAndForeignResponses) {
  IceLiteSession session(round_trip_credentials(), {});
  IceClientChecker checker("serverufrag0123", "serverpassword0123456789", "cli1");
  std::vector<uint8_t> request(512), reply(kIceReplyBufferSize);
  size_t len = checker.build_request(request);
  auto result = session.handle_request(std::span(request).first(len), addr("203.0.113.5:50123"), reply, kT0);
  ASSERT_EQ(result.outcome, Outcome::success);
  reply.resize(result.reply_len);

  // A response re-signed with another pwd but otherwise intact: integrity fails.
  auto forged = st::encode(*st::decode(reply), std::string_view("anotherpassword012345678"));
  EXPECT_EQ(checker.process_response(forged).verdict, IceClientChecker::Verdict::bad_integrity);
  // Broken FINGERPRINT: not even considered.
  auto broken = reply;
  broken.back() ^= 1;
  EXPECT_EQ(checker.process_response(broken).verdict, IceClientChecker::Verdict::malformed);
  // Another transaction id.
  auto foreign_msg = *st::decode(reply);
  foreign_msg.transaction_id[0] ^= 1;
  EXPECT_EQ(
      checker.process_response(st::encode(foreign_msg, std::string_view("serverpassword0123456789"))).verdict,
      IceClientChecker::Verdict::unmatched);
  // The genuine one still works after all that.
  EXPECT_EQ(checker.process_response(reply).verdict, IceClientChecker::Verdict::success);
}

TEST(IceClient, ManyChecksDoNotExhaustTheTransactionTable) {
  // libnice's agent keeps 200 outstanding transactions; lost answers must not wedge the
  // load generator.
  IceClientChecker checker("serverufrag0123", "serverpassword0123456789", "cli1");
  std::vector<uint8_t> request(512);
  for (int i = 0; i < 1000; i++) ASSERT_GT(checker.build_request(request), 0u) << i;
}

}  // namespace
}  // namespace rtce
