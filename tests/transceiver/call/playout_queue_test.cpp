// playout_queue_test.cpp — the Call's one output queue: order across growth and wrap, the
// bound, oversized frames, clear keeping the capacity.
#include "playout_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace rtce {
namespace {

std::vector<uint8_t> frame(uint8_t tag, size_t len = 4) { return std::vector<uint8_t>(len, tag); }

TEST(PlayoutQueueTest, KeepsOrderAcrossWrapAndGrowth) {
  PlayoutQueue q(8, 2, 64);
  uint8_t next_in = 0, next_out = 0;
  // Interleave pushes and pops so the ring wraps before it grows.
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.push(frame(next_in++)));
    for (int i = 0; i < 2; ++i) {
      ASSERT_FALSE(q.empty());
      EXPECT_EQ(q.front()[0], next_out++);
      q.pop();
    }
  }
  EXPECT_EQ(q.size(), 20u);
  EXPECT_EQ(q.capacity_frames(), 32u);
  while (!q.empty()) {
    EXPECT_EQ(q.front()[0], next_out++);
    q.pop();
  }
  EXPECT_EQ(next_in, next_out);
}

TEST(PlayoutQueueTest, HoldsWhatABackendSendsAheadUpToTheBoundThenRefuses) {
  PlayoutQueue q(960, 16, 1500);  // 30 s of 24 kHz PCM
  const size_t initial = q.reserved_bytes();
  for (size_t i = 0; i < 1500; ++i) ASSERT_TRUE(q.push(frame(static_cast<uint8_t>(i), 960))) << i;
  EXPECT_FALSE(q.push(frame(1, 960)));
  EXPECT_EQ(q.size(), 1500u);
  EXPECT_EQ(q.capacity_frames(), 1500u);
  EXPECT_GT(q.reserved_bytes(), initial);
  EXPECT_LE(q.reserved_bytes(), 1500u * (960 + sizeof(uint16_t)));
  EXPECT_EQ(q.front()[0], 0);
}

TEST(PlayoutQueueTest, RefusesAFrameLargerThanASlot) {
  PlayoutQueue q(320, 4, 8);
  EXPECT_FALSE(q.push(frame(1, 321)));
  EXPECT_TRUE(q.push(frame(1, 320)));
  EXPECT_EQ(q.front().size(), 320u);
}

TEST(PlayoutQueueTest, ClearDropsEverythingAndKeepsTheCapacity) {
  PlayoutQueue q(4, 2, 100);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(q.push(frame(static_cast<uint8_t>(i))));
  const size_t reserved = q.reserved_bytes();
  EXPECT_EQ(q.clear(), 40u);
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.front().empty());
  EXPECT_EQ(q.reserved_bytes(), reserved);
  ASSERT_TRUE(q.push(frame(7)));
  EXPECT_EQ(q.front()[0], 7);
}

TEST(PlayoutQueueTest, RejectsAZeroBoundOrSlot) {
  EXPECT_THROW(PlayoutQueue(0, 1, 1), std::invalid_argument);
  EXPECT_THROW(PlayoutQueue(8, 1, 0), std::invalid_argument);
}

}  // namespace
}  // namespace rtce
