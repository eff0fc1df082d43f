// flow_recovery_test.cpp — the per-worker waiting room for packets of unknown flows, alone:
// what waits and comes back (order, bytes, VIP socket, headroom), every bound that turns a
// packet away, the lookup budget, the negative cache, the timeout, and slot reuse.
#include "flow_recovery.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "rtce_proxy_v2.h"

namespace {

using namespace rtce;
using Outcome = FlowRecovery::MissOutcome;

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kSecond = 1'000'000'000;
// Far from 0: a monotonic clock never reads 0, and the token bucket must not care where it starts.
constexpr Nanos kT = 100 * kSecond;

rtce_flow_key key(uint16_t client_port) {
  rtce_flow_key k{};
  k.family = RTCE_FAMILY_V4;
  const uint8_t client[4] = {198, 18, 0, 10};
  const uint8_t vip[4] = {198, 18, 0, 1};
  std::memcpy(k.client_addr, client, 4);
  std::memcpy(k.vip_addr, vip, 4);
  k.client_port_be = static_cast<uint16_t>((client_port >> 8) | (client_port << 8));
  k.vip_port_be = 0x960d;  // 3478
  return k;
}

std::vector<uint8_t> payload(uint8_t tag, size_t len) {
  std::vector<uint8_t> p(len);
  for (size_t i = 0; i < len; i++) p[i] = static_cast<uint8_t>(tag + i * 7);
  return p;
}

FlowRecovery::Options small_options() {
  FlowRecovery::Options o;
  o.max_waiting_flows = 4;
  o.packets_per_flow = 3;
  o.pool_packets = 8;
  o.headroom = 64;
  o.max_packet = 100;
  o.lookup_timeout = 500 * kMs;
  o.lookups_per_second = 1000;
  o.negative_ttl = kSecond;
  return o;
}

struct Delivered {
  std::vector<uint8_t> bytes;
  uint16_t vip_socket;
  const uint8_t* at;
};

class FlowRecoveryTest : public ::testing::Test {
 protected:
  explicit FlowRecoveryTest(const FlowRecovery::Options& o = small_options()) : options_(o), r_(o) {}

  Outcome miss(uint16_t port, const std::vector<uint8_t>& p, Nanos now = kT, uint16_t vip_socket = 0) {
    return r_.on_miss(key(port), vip_socket, p.data(), p.size(), now);
  }
  Outcome miss(uint16_t port, Nanos now = kT) {
    return miss(port, payload(static_cast<uint8_t>(port), 20), now);
  }

  // Collects what a reply hands back; writes every headroom byte, as framing would.
  uint32_t reply(uint16_t port, bool found, Nanos now, std::vector<Delivered>* out = nullptr) {
    return r_.on_reply(key(port), found, now, [&](uint8_t* p, size_t len, uint16_t vip_socket) {
      std::memset(p - options_.headroom, 0xee, options_.headroom);
      if (out) out->push_back({std::vector<uint8_t>(p, p + len), vip_socket, p});
    });
  }

  FlowRecovery::Options options_;
  FlowRecovery r_;
};

TEST_F(FlowRecoveryTest, FirstMissStartsALookupLaterOnesWaitAndComeBackOldestFirst) {
  const auto a = payload(1, 20), b = payload(2, 100), c = payload(3, 1);
  EXPECT_EQ(miss(7, a, kT, 5), Outcome::lookup_started);
  EXPECT_EQ(miss(7, b, kT + 1, 5), Outcome::queued);
  EXPECT_EQ(miss(7, c, kT + 2, 5), Outcome::queued);
  EXPECT_EQ(r_.waiting_flows(), 1u);
  EXPECT_EQ(r_.waiting_packets(), 3u);

  std::vector<Delivered> got;
  EXPECT_EQ(reply(7, true, kT + 3, &got), 3u);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].bytes, a);
  EXPECT_EQ(got[1].bytes, b) << "written after the headroom of the packet before it: not overlapping";
  EXPECT_EQ(got[2].bytes, c);
  for (const auto& d : got) EXPECT_EQ(d.vip_socket, 5u);
  // Each packet's [headroom, payload] span stays clear of every other packet's.
  for (size_t i = 0; i < got.size(); i++)
    for (size_t j = 0; j < got.size(); j++) {
      if (i == j) continue;
      const uint8_t* lo = got[i].at - options_.headroom;
      const uint8_t* hi = got[i].at + got[i].bytes.size();
      const uint8_t* other_lo = got[j].at - options_.headroom;
      const uint8_t* other_hi = got[j].at + got[j].bytes.size();
      EXPECT_TRUE(hi <= other_lo || other_hi <= lo) << i << " overlaps " << j;
    }
  EXPECT_EQ(r_.waiting_flows(), 0u);
  EXPECT_EQ(r_.waiting_packets(), 0u);
  EXPECT_EQ(reply(7, true, kT + 4), 0u) << "a second reply finds nothing waiting";
}

TEST_F(FlowRecoveryTest, RepliesOnlyReleaseTheirOwnFlow) {
  EXPECT_EQ(miss(1, payload(1, 10), kT, 1), Outcome::lookup_started);
  EXPECT_EQ(miss(2, payload(2, 10), kT, 2), Outcome::lookup_started);
  EXPECT_EQ(miss(1, payload(3, 10), kT, 1), Outcome::queued);
  std::vector<Delivered> got;
  EXPECT_EQ(reply(2, true, kT, &got), 1u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, payload(2, 10));
  EXPECT_EQ(got[0].vip_socket, 2u);
  EXPECT_EQ(r_.waiting_flows(), 1u);
  EXPECT_EQ(r_.waiting_packets(), 2u);
}

TEST_F(FlowRecoveryTest, PerFlowCapTurnsTheNextPacketAway) {
  EXPECT_EQ(miss(1), Outcome::lookup_started);
  EXPECT_EQ(miss(1), Outcome::queued);
  EXPECT_EQ(miss(1), Outcome::queued);
  EXPECT_EQ(miss(1), Outcome::queue_full);
  EXPECT_EQ(r_.waiting_packets(), 3u);
  EXPECT_EQ(miss(2), Outcome::lookup_started) << "the cap is per flow";
  EXPECT_EQ(reply(1, true, kT), 3u);
}

TEST_F(FlowRecoveryTest, PoolExhaustionTurnsPacketsAndNewFlowsAway) {
  // 8 pool slots: 3 + 3 + 2.
  for (int i = 0; i < 3; i++) EXPECT_NE(miss(1), Outcome::queue_full);
  for (int i = 0; i < 3; i++) EXPECT_NE(miss(2), Outcome::queue_full);
  for (int i = 0; i < 2; i++) EXPECT_NE(miss(3), Outcome::queue_full);
  EXPECT_EQ(r_.waiting_packets(), 8u);
  EXPECT_EQ(miss(3), Outcome::queue_full) << "flow 3 is under its cap but the pool is empty";
  EXPECT_EQ(miss(4), Outcome::queue_full) << "a new flow needs a slot for its packet";
  EXPECT_EQ(r_.waiting_flows(), 3u) << "no lookup started without a slot";
  EXPECT_EQ(reply(2, true, kT), 3u);
  EXPECT_EQ(miss(4), Outcome::lookup_started);
}

TEST_F(FlowRecoveryTest, MaxWaitingFlowsTurnsNewFlowsAway) {
  for (uint16_t p = 1; p <= 4; p++) EXPECT_EQ(miss(p), Outcome::lookup_started);
  EXPECT_EQ(miss(5), Outcome::queue_full);
  EXPECT_EQ(r_.waiting_flows(), 4u);
  EXPECT_EQ(miss(4), Outcome::queued) << "flows already waiting still take packets";
  EXPECT_EQ(reply(3, false, kT), 1u);
  EXPECT_EQ(miss(5), Outcome::lookup_started);
}

TEST_F(FlowRecoveryTest, OversizePacketsAreNotKept) {
  EXPECT_EQ(miss(1, payload(1, 101)), Outcome::queue_full);
  EXPECT_EQ(r_.waiting_flows(), 0u) << "no lookup for a packet that cannot wait";
  EXPECT_EQ(miss(1, payload(1, 100)), Outcome::lookup_started) << "max_packet itself fits";
  EXPECT_EQ(miss(1, payload(2, 101)), Outcome::queue_full);
  EXPECT_EQ(r_.waiting_packets(), 1u);
  std::vector<Delivered> got;
  EXPECT_EQ(reply(1, true, kT, &got), 1u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, payload(1, 100));
}

TEST(FlowRecoveryOptions, ZeroSizesAreRefused) {
  auto o = small_options();
  o.pool_packets = 0;
  EXPECT_THROW(FlowRecovery{o}, std::invalid_argument);
  o = small_options();
  o.packets_per_flow = 0;
  EXPECT_THROW(FlowRecovery{o}, std::invalid_argument);
  o = small_options();
  o.max_waiting_flows = 0;
  EXPECT_THROW(FlowRecovery{o}, std::invalid_argument);
}

class FlowRecoveryBudgetTest : public FlowRecoveryTest {
 protected:
  static FlowRecovery::Options options() {
    auto o = small_options();
    o.max_waiting_flows = 64;
    o.pool_packets = 64;
    o.lookups_per_second = 3;
    o.lookup_timeout = 100 * kSecond;
    return o;
  }
  FlowRecoveryBudgetTest() : FlowRecoveryTest(options()) {}
};

TEST_F(FlowRecoveryBudgetTest, TokenBucketAllowsItsRateThenRefillsWithTime) {
  uint16_t port = 1;
  for (int i = 0; i < 3; i++) EXPECT_EQ(miss(port++, kT), Outcome::lookup_started);
  EXPECT_EQ(miss(port, kT), Outcome::rate_limited);
  EXPECT_EQ(miss(port, kT + 300 * kMs), Outcome::rate_limited) << "0.9 token is not a lookup";
  EXPECT_EQ(r_.waiting_flows(), 3u) << "a rate-limited miss does not wait";
  EXPECT_EQ(miss(1, kT + 300 * kMs), Outcome::queued) << "flows already looked up need no token";

  EXPECT_EQ(miss(port++, kT + 334 * kMs), Outcome::lookup_started) << "1/3 s refills one token";
  EXPECT_EQ(miss(port, kT + 334 * kMs), Outcome::rate_limited);

  // A long quiet period refills to the rate, not beyond.
  const Nanos later = kT + 60 * kSecond;
  for (int i = 0; i < 3; i++) EXPECT_EQ(miss(port++, later), Outcome::lookup_started) << i;
  EXPECT_EQ(miss(port, later), Outcome::rate_limited);
}

TEST_F(FlowRecoveryTest, NotFoundIsRememberedForNegativeTtl) {
  EXPECT_EQ(miss(1, kT), Outcome::lookup_started);
  EXPECT_EQ(miss(1, kT), Outcome::queued);
  EXPECT_EQ(reply(1, false, kT + 10 * kMs), 2u);
  EXPECT_EQ(miss(1, kT + 10 * kMs), Outcome::known_missing);
  EXPECT_EQ(miss(1, kT + 10 * kMs + kSecond - 1), Outcome::known_missing);
  EXPECT_EQ(r_.waiting_flows(), 0u);
  EXPECT_EQ(miss(2, kT + 20 * kMs), Outcome::lookup_started) << "only that flow is remembered";
  EXPECT_EQ(miss(1, kT + 10 * kMs + kSecond), Outcome::lookup_started) << "asks again after negative_ttl";
}

TEST_F(FlowRecoveryTest, FoundIsNotRememberedAsMissing) {
  EXPECT_EQ(miss(1, kT), Outcome::lookup_started);
  EXPECT_EQ(reply(1, true, kT), 1u);
  EXPECT_EQ(miss(1, kT + kMs), Outcome::lookup_started);
}

TEST_F(FlowRecoveryTest, ExpireDropsLookupsAfterTheTimeoutAndLateRepliesFindNothing) {
  EXPECT_EQ(miss(1, kT), Outcome::lookup_started);
  EXPECT_EQ(miss(1, kT + 100 * kMs), Outcome::queued);
  EXPECT_EQ(miss(2, kT + 300 * kMs), Outcome::lookup_started);
  EXPECT_EQ(r_.expire(kT + 500 * kMs - 1), 0u);
  EXPECT_EQ(r_.expire(kT + 500 * kMs), 2u) << "timed from the lookup, not the last packet";
  EXPECT_EQ(r_.waiting_flows(), 1u);
  EXPECT_EQ(r_.waiting_packets(), 1u);
  EXPECT_EQ(r_.expire(kT + 800 * kMs), 1u);
  EXPECT_EQ(r_.waiting_packets(), 0u);

  bool called = false;
  EXPECT_EQ(r_.on_reply(key(1), true, kT + kSecond, [&](uint8_t*, size_t, uint16_t) { called = true; }), 0u);
  EXPECT_FALSE(called);
  EXPECT_EQ(miss(1, kT + kSecond), Outcome::lookup_started) << "a timeout is not a negative answer";
}

TEST_F(FlowRecoveryTest, SlotsAreReusedAcrossManyCycles) {
  // 8 pool slots and 4 entries serve thousands of lookups: replies (found or not) and
  // timeouts all give their slots back.
  Nanos now = kT;
  for (uint32_t cycle = 0; cycle < 3000; cycle++) {
    const uint16_t a = static_cast<uint16_t>(2 * cycle + 1), b = static_cast<uint16_t>(2 * cycle + 2);
    now += 10 * kMs;  // 100 lookups/s against a budget of 1000/s
    ASSERT_EQ(miss(a, now), Outcome::lookup_started) << cycle;
    ASSERT_EQ(miss(a, now), Outcome::queued) << cycle;
    ASSERT_EQ(miss(a, now), Outcome::queued) << cycle;
    ASSERT_EQ(miss(b, now), Outcome::lookup_started) << cycle;
    ASSERT_EQ(r_.waiting_packets(), 4u) << cycle;
    switch (cycle % 3) {
      case 0:
        ASSERT_EQ(reply(a, true, now), 3u);
        ASSERT_EQ(reply(b, false, now), 1u);
        break;
      case 1:
        ASSERT_EQ(reply(b, true, now), 1u);
        ASSERT_EQ(reply(a, false, now), 3u);
        break;
      default:
        now += 500 * kMs;
        ASSERT_EQ(r_.expire(now), 4u);
        break;
    }
    ASSERT_EQ(r_.waiting_packets(), 0u) << cycle;
    ASSERT_EQ(r_.waiting_flows(), 0u) << cycle;
  }
}

}  // namespace
