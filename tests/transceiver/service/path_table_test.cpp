// path_table_test.cpp — the media worker's flat path table against std::unordered_map over
// random inserts, reassignments and conditional erases (the backward shift must keep every
// remaining key findable), across growth.
#include "path_table.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

namespace rtce {
namespace {

struct Owner {
  int id = 0;
};

rtce_flow_key key_of(uint32_t n) {
  rtce_flow_key k{};
  k.family = RTCE_FAMILY_V4;
  k.client_addr[0] = 198;
  k.client_addr[1] = 18;
  k.client_addr[2] = static_cast<uint8_t>(n >> 8);
  k.client_addr[3] = static_cast<uint8_t>(n);
  k.client_port_be = static_cast<uint16_t>(n >> 16);
  return k;
}

TEST(PathTableTest, FindsWhatWasInsertedAndNothingElse) {
  PathTable<Owner> table(16);
  Owner a{1}, b{2};
  table.insert_or_assign(key_of(1), &a);
  table.insert_or_assign(key_of(2), &b);
  EXPECT_EQ(table.find(key_of(1)), &a);
  EXPECT_EQ(table.find(key_of(2)), &b);
  EXPECT_EQ(table.find(key_of(3)), nullptr);
  table.insert_or_assign(key_of(1), &b);  // another owner takes the path over
  EXPECT_EQ(table.find(key_of(1)), &b);
  EXPECT_FALSE(table.erase_if(key_of(1), &a)) << "the old owner's unroute must not drop it";
  EXPECT_EQ(table.find(key_of(1)), &b);
  EXPECT_TRUE(table.erase_if(key_of(1), &b));
  EXPECT_EQ(table.find(key_of(1)), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST(PathTableTest, MatchesAMapOverRandomOperationsAndGrowth) {
  std::mt19937 rng(7);
  PathTable<Owner> table(16);
  std::unordered_map<uint32_t, Owner*> model;
  std::vector<Owner> owners(8);
  for (int step = 0; step < 200000; ++step) {
    const uint32_t n = rng() % 3000;  // few enough keys that runs collide and wrap
    Owner* owner = &owners[rng() % owners.size()];
    if (rng() % 3 != 0) {
      table.insert_or_assign(key_of(n), owner);
      model[n] = owner;
    } else {
      auto it = model.find(n);
      const bool expect = it != model.end() && it->second == owner;
      ASSERT_EQ(table.erase_if(key_of(n), owner), expect) << step;
      if (expect) model.erase(it);
    }
    if (step % 997 == 0) {
      for (uint32_t k = 0; k < 3000; ++k) {
        auto it = model.find(k);
        ASSERT_EQ(table.find(key_of(k)), it == model.end() ? nullptr : it->second)
            << "key " << k << " step " << step;
      }
    }
  }
  EXPECT_EQ(table.size(), model.size());
  EXPECT_LE(table.size() * 2, table.capacity()) << "load above one half";
}

}  // namespace
}  // namespace rtce
