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

}  // namespace
