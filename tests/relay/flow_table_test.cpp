// flow_table_test.cpp — the bounded flow table: lookups, expiry, the full-table policy,
// and index integrity under random insert/erase against a reference map.
#include "flow_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

namespace {

using rtce::FlowTable;
using rtce::FlowValue;
using rtce::Nanos;

constexpr Nanos kSecond = 1'000'000'000;

rtce_flow_key key_for(uint32_t n) {
  rtce_flow_key k{};
  k.family = 4;
  k.client_addr[0] = 198;
  k.client_addr[1] = 18;
  std::memcpy(&k.client_addr[2], &n, 2);
  k.client_port_be = static_cast<uint16_t>(n >> 16 | 1);
  k.vip_addr[0] = 198;
  k.vip_port_be = 3478;
  return k;
}

FlowValue value_for(uint16_t endpoint) {
  FlowValue v;
  v.endpoint_id = endpoint;
  return v;
}

FlowTable::Options options(uint32_t capacity) {
  FlowTable::Options o;
  o.capacity = capacity;
  o.idle_timeout = 30 * kSecond;
  o.evict_idle_after = 5 * kSecond;
  o.eviction_sample = capacity;
  return o;
}

TEST(FlowTable, InsertFindUpdateErase) {
  FlowTable t(options(8));
  EXPECT_EQ(t.find(key_for(1)), nullptr);
  auto r = t.insert(key_for(1), value_for(10), 0);
  ASSERT_EQ(r.outcome, FlowTable::InsertOutcome::inserted);
  ASSERT_NE(t.find(key_for(1)), nullptr);
  EXPECT_EQ(t.find(key_for(1))->value.endpoint_id, 10);
  EXPECT_EQ(t.insert(key_for(1), value_for(11), 1).outcome, FlowTable::InsertOutcome::updated);
  EXPECT_EQ(t.find(key_for(1))->value.endpoint_id, 11);
  EXPECT_EQ(t.size(), 1u);
  t.erase(t.find(key_for(1)));
  EXPECT_EQ(t.find(key_for(1)), nullptr);
  EXPECT_EQ(t.size(), 0u);
}

TEST(FlowTable, IdleFlowsExpireAndActiveOnesStay) {
  FlowTable t(options(16));
  t.insert(key_for(1), value_for(1), 0);
  t.insert(key_for(2), value_for(2), 0);
  t.find(key_for(2))->last_seen = 20 * kSecond;  // a packet at t=20s
  EXPECT_EQ(t.expire(29 * kSecond, 16), 0u);
  EXPECT_EQ(t.expire(30 * kSecond, 16), 1u);
  EXPECT_EQ(t.find(key_for(1)), nullptr);
  ASSERT_NE(t.find(key_for(2)), nullptr);
  EXPECT_EQ(t.expire(50 * kSecond, 16), 1u);
  EXPECT_EQ(t.size(), 0u);
}

TEST(FlowTable, ExpirySweepIsBoundedPerCall) {
  FlowTable t(options(64));
  for (uint32_t i = 0; i < 64; i++) t.insert(key_for(i), value_for(1), 0);
  uint32_t total = 0;
  for (int call = 0; call < 8; call++) {
    const uint32_t n = t.expire(100 * kSecond, 8);
    EXPECT_LE(n, 8u);
    total += n;
  }
  EXPECT_EQ(total, 64u) << "eight calls of eight slots sweep the whole table";
}

TEST(FlowTable, FullTableRefusesWhenEveryFlowIsActive) {
  FlowTable t(options(4));
  for (uint32_t i = 0; i < 4; i++)
    ASSERT_EQ(t.insert(key_for(i), value_for(1), 0).outcome, FlowTable::InsertOutcome::inserted);
  for (uint32_t i = 0; i < 4; i++) t.find(key_for(i))->last_seen = 9 * kSecond;
  auto r = t.insert(key_for(100), value_for(1), 10 * kSecond);
  EXPECT_EQ(r.outcome, FlowTable::InsertOutcome::full);
  EXPECT_EQ(r.flow, nullptr);
  EXPECT_EQ(t.size(), 4u);
  for (uint32_t i = 0; i < 4; i++) EXPECT_NE(t.find(key_for(i)), nullptr) << "active calls are never evicted";
}

TEST(FlowTable, FullTableEvictsTheLeastRecentlyActiveIdleFlow) {
  FlowTable t(options(4));
  for (uint32_t i = 0; i < 4; i++) t.insert(key_for(i), value_for(1), 0);
  for (uint32_t i = 0; i < 4; i++) t.find(key_for(i))->last_seen = (10 + i) * kSecond;
  t.find(key_for(2))->last_seen = 1 * kSecond;  // the one spoofed-looking, idle flow
  auto r = t.insert(key_for(100), value_for(7), 14 * kSecond);
  ASSERT_EQ(r.outcome, FlowTable::InsertOutcome::evicted_idle);
  EXPECT_EQ(t.find(key_for(2)), nullptr);
  ASSERT_NE(t.find(key_for(100)), nullptr);
  EXPECT_EQ(t.find(key_for(100))->value.endpoint_id, 7);
  EXPECT_EQ(t.size(), 4u);
}

TEST(FlowTable, MatchesAReferenceMapUnderRandomChurn) {
  constexpr uint32_t kCapacity = 512;
  FlowTable t(options(kCapacity));
  std::map<uint32_t, uint16_t> reference;
  std::mt19937 rng(1234);
  for (int step = 0; step < 200000; step++) {
    const uint32_t id = rng() % 2048;
    const uint16_t ep = static_cast<uint16_t>(rng());
    if (rng() % 3 == 0) {
      if (auto* f = t.find(key_for(id))) t.erase(f);
      reference.erase(id);
    } else if (reference.size() < kCapacity || reference.count(id)) {
      auto r = t.insert(key_for(id), value_for(ep), 0);
      ASSERT_NE(r.flow, nullptr);
      reference[id] = ep;
    }
    if (step % 1000 == 0) {
      ASSERT_EQ(t.size(), reference.size());
      for (uint32_t probe = 0; probe < 2048; probe++) {
        auto* f = t.find(key_for(probe));
        auto it = reference.find(probe);
        ASSERT_EQ(f != nullptr, it != reference.end()) << "flow " << probe << " at step " << step;
        if (f) ASSERT_EQ(f->value.endpoint_id, it->second);
      }
    }
  }
}

// ------------------------------------------------------------------ FlowLimitTable

rtce_hint_limit_key hint_key(uint32_t nonce) {
  rtce_hint_limit_key k{};
  k.nonce = nonce;
  k.endpoint_id = 1;
  return k;
}

TEST(FlowLimitTable, AllowsMaxPerWindowThenOpensANewWindow) {
  rtce::FlowLimitTable t(64, 3, 10 * kSecond);
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(t.allows(hint_key(7), kSecond));
    t.charge(hint_key(7), kSecond);
  }
  EXPECT_FALSE(t.allows(hint_key(7), kSecond));
  EXPECT_FALSE(t.allows(hint_key(7), 11 * kSecond - 1)) << "the window runs from the first flow";
  EXPECT_TRUE(t.allows(hint_key(8), kSecond)) << "keys are independent";
  EXPECT_TRUE(t.allows(hint_key(7), 11 * kSecond));
  t.charge(hint_key(7), 11 * kSecond);
  t.charge(hint_key(7), 12 * kSecond);
  t.charge(hint_key(7), 13 * kSecond);
  EXPECT_FALSE(t.allows(hint_key(7), 13 * kSecond)) << "the new window counts from 1";
}

TEST(FlowLimitTable, NoLimitKeepsNoState) {
  rtce::FlowLimitTable t(1 << 20, RTCE_FLOW_LIMIT_NONE, kSecond);
  EXPECT_FALSE(t.enabled());
  for (int i = 0; i < 100; i++) t.charge(hint_key(1), 0);
  EXPECT_TRUE(t.allows(hint_key(1), 0));
}

TEST(FlowLimitTable, BoundedMemoryForgetsTheOldestLiveWindowNotAnother) {
  // 8 windows fit (one set). A 9th key replaces the oldest live one, which then starts over
  // (fails open for that key), and the forget is counted; the rest stay bounded.
  rtce::FlowLimitTable t(8, 1, 100 * kSecond);
  for (uint32_t k = 0; k < 8; k++) t.charge(hint_key(k), (k + 1) * kSecond);
  for (uint32_t k = 0; k < 8; k++) EXPECT_FALSE(t.allows(hint_key(k), 10 * kSecond)) << k;
  t.charge(hint_key(100), 10 * kSecond);
  EXPECT_EQ(t.forgotten(), 1u);
  EXPECT_TRUE(t.allows(hint_key(0), 10 * kSecond)) << "the oldest was forgotten";
  for (uint32_t k = 1; k < 8; k++) EXPECT_FALSE(t.allows(hint_key(k), 10 * kSecond)) << k;
  EXPECT_FALSE(t.allows(hint_key(100), 10 * kSecond));
  // A window that is over is reused before any live one is forgotten.
  t.charge(hint_key(200), 102 * kSecond);  // key 1's window (from 2 s) ended at 102 s
  EXPECT_EQ(t.forgotten(), 1u);
}

TEST(FlowLimitTable, PrefixKeysMaskTheHostBits) {
  rtce_flow_key a{}, b{}, c{};
  a.family = b.family = c.family = 6;
  const uint8_t base[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0x12, 0x34, 1, 2, 3, 4, 5, 6, 7, 8};
  std::memcpy(a.client_addr, base, 16);
  std::memcpy(b.client_addr, base, 16);
  std::memcpy(c.client_addr, base, 16);
  b.client_addr[7] = 0xff;  // bits 56..63: inside a /56
  c.client_addr[6] = 0x13;  // bits 48..55: another /56
  rtce_prefix_limit_key ka{}, kb{}, kc{};
  rtce_prefix_limit_key_of(&a, 56, &ka);
  rtce_prefix_limit_key_of(&b, 56, &kb);
  rtce_prefix_limit_key_of(&c, 56, &kc);
  EXPECT_EQ(std::memcmp(&ka, &kb, sizeof ka), 0);
  EXPECT_NE(std::memcmp(&ka, &kc, sizeof ka), 0);
  EXPECT_EQ(ka.prefix_len, 56);
  for (int i = 7; i < 16; i++) EXPECT_EQ(ka.addr[i], 0) << i;
  // IPv4 /20: a nibble of the third byte; a prefix longer than 32 is clamped.
  rtce_flow_key v4{};
  v4.family = 4;
  const uint8_t addr4[4] = {198, 18, 0xab, 7};
  std::memcpy(v4.client_addr, addr4, 4);
  rtce_prefix_limit_key k4{};
  rtce_prefix_limit_key_of(&v4, 20, &k4);
  EXPECT_EQ(k4.addr[2], 0xa0);
  EXPECT_EQ(k4.addr[3], 0);
  rtce_prefix_limit_key_of(&v4, 99, &k4);
  EXPECT_EQ(k4.prefix_len, 32);
  EXPECT_EQ(k4.addr[3], 7);
}

}  // namespace
