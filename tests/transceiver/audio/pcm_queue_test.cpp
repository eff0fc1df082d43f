// pcm_queue_test.cpp — the bounded PCM frame ring: order, both overflow policies,
// barge-in clear, refusing wrong frame sizes.
#include "audio/pcm_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace rtce {
namespace {

std::vector<int16_t> frame(size_t samples, int16_t value) { return std::vector<int16_t>(samples, value); }

TEST(PcmQueueTest, FifoOrderAndFrameSizeByRate) {
  PcmQueue q(16000, 4);
  EXPECT_EQ(q.samples_per_frame(), 320u);
  EXPECT_EQ(PcmQueue(48000, 1).samples_per_frame(), 960u);
  for (int16_t v = 1; v <= 3; ++v) ASSERT_TRUE(q.push(frame(320, v)));
  std::vector<int16_t> out(320);
  for (int16_t v = 1; v <= 3; ++v) {
    ASSERT_TRUE(q.pop(out));
    EXPECT_EQ(out.front(), v);
    EXPECT_EQ(out.back(), v);
  }
  EXPECT_FALSE(q.pop(out));
}

TEST(PcmQueueTest, FullDropsOldestByDefault) {
  PcmQueue q(16000, 3);
  for (int16_t v = 1; v <= 5; ++v) ASSERT_TRUE(q.push(frame(320, v)));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.frames_dropped(), 2u);
  std::vector<int16_t> out(320);
  ASSERT_TRUE(q.pop(out));
  EXPECT_EQ(out[0], 3);
}

TEST(PcmQueueTest, FullCanDropNewest) {
  PcmQueue q(16000, 2, PcmQueue::Overflow::drop_newest);
  ASSERT_TRUE(q.push(frame(320, 1)));
  ASSERT_TRUE(q.push(frame(320, 2)));
  EXPECT_FALSE(q.push(frame(320, 3)));
  EXPECT_EQ(q.frames_dropped(), 1u);
  std::vector<int16_t> out(320);
  ASSERT_TRUE(q.pop(out));
  EXPECT_EQ(out[0], 1);
  ASSERT_TRUE(q.pop(out));
  EXPECT_EQ(out[0], 2);
}

TEST(PcmQueueTest, ClearIsBargeIn) {
  PcmQueue q(24000, 50);
  for (int i = 0; i < 30; ++i) q.push(frame(480, static_cast<int16_t>(i)));
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.frames_cleared(), 30u);
  std::vector<int16_t> out(480);
  EXPECT_FALSE(q.pop(out));
  // The ring keeps working after a clear.
  ASSERT_TRUE(q.push(frame(480, 42)));
  ASSERT_TRUE(q.pop(out));
  EXPECT_EQ(out[0], 42);
}

TEST(PcmQueueTest, WrongFrameSizeIsRefused) {
  PcmQueue q(48000, 2);
  EXPECT_FALSE(q.push(frame(959, 1)));
  EXPECT_FALSE(q.push(frame(961, 1)));
  EXPECT_EQ(q.frames_refused(), 2u);
  EXPECT_TRUE(q.empty());
  std::vector<int16_t> small(100);
  q.push(frame(960, 1));
  EXPECT_FALSE(q.pop(small));
  EXPECT_EQ(q.size(), 1u);
}

}  // namespace
}  // namespace rtce
