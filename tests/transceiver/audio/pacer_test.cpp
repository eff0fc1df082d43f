// pacer_test.cpp — the frame pacer on a fake clock: no drift over 10,000 jittery wakeups,
// bounded catch-up, skip-ahead on the same grid.
#include "audio/pacer.h"

#include <gtest/gtest.h>

#include <random>

namespace rtce {
namespace {

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kPeriod = 20 * kMs;
constexpr Nanos kStart = 123'456'789;

TEST(FramePacerTest, NoDriftOverTenThousandJitteryWakeups) {
  FramePacer pacer(kStart);
  std::mt19937 rng(7);
  // Wakeups land anywhere from 3 ms early to 17 ms late: never a whole period behind, so
  // every frame is played and none skipped.
  std::uniform_int_distribution<Nanos> jitter(-3 * kMs, 17 * kMs);
  uint64_t frames = 0;
  while (frames < 10'000) {
    const Nanos deadline = pacer.next_deadline();
    ASSERT_EQ(deadline, kStart + static_cast<Nanos>(frames) * kPeriod);
    const Nanos now = deadline + jitter(rng);
    const int due = pacer.due(now);
    if (now < deadline) {
      ASSERT_EQ(due, 0);
      continue;
    }
    ASSERT_GE(due, 1);
    frames += static_cast<uint64_t>(due);
    // After a tick the next deadline is always in the future, on the grid.
    ASSERT_GT(pacer.next_deadline(), now);
    ASSERT_EQ(pacer.next_deadline(), kStart + static_cast<Nanos>(pacer.frame_index()) * kPeriod);
  }
  EXPECT_EQ(frames, 10'000u);
  EXPECT_EQ(pacer.next_deadline(), kStart + 10'000 * kPeriod);
  EXPECT_EQ(pacer.frames_skipped(), 0u);
}

TEST(FramePacerTest, CatchesUpInABurstWhenSlightlyLate) {
  FramePacer pacer(kStart);
  EXPECT_EQ(pacer.due(kStart - 1), 0);
  EXPECT_EQ(pacer.due(kStart), 1);
  EXPECT_EQ(pacer.due(kStart + kPeriod - 1), 0);
  // Woken 3.5 periods after the second deadline: frames 1..4 are due.
  EXPECT_EQ(pacer.due(kStart + kPeriod + 3 * kPeriod + kPeriod / 2), 4);
  EXPECT_EQ(pacer.next_deadline(), kStart + 5 * kPeriod);
  // Exactly max_catch_up late still bursts.
  EXPECT_EQ(pacer.due(kStart + 9 * kPeriod), 5);
  EXPECT_EQ(pacer.frames_skipped(), 0u);
}

TEST(FramePacerTest, SkipsAheadOnTheGridWhenFarBehind) {
  FramePacer pacer(kStart);
  ASSERT_EQ(pacer.due(kStart), 1);
  // Descheduled for 200 ms: 11 deadlines passed (frames 1..11); play one, skip ten.
  EXPECT_EQ(pacer.due(kStart + 11 * kPeriod + 3 * kMs), 1);
  EXPECT_EQ(pacer.frames_skipped(), 10u);
  EXPECT_EQ(pacer.skip_events(), 1u);
  EXPECT_EQ(pacer.frame_index(), 12u);
  EXPECT_EQ(pacer.next_deadline(), kStart + 12 * kPeriod);  // still on the original grid
  EXPECT_EQ(pacer.due(kStart + 12 * kPeriod), 1);
}

TEST(FramePacerTest, RestartMovesTheGrid) {
  FramePacer pacer(kStart, 10 * kMs, 2);
  ASSERT_EQ(pacer.due(kStart), 1);
  pacer.restart(kStart + 1000 * kMs);
  EXPECT_EQ(pacer.next_deadline(), kStart + 1000 * kMs);
  EXPECT_EQ(pacer.due(kStart + 1025 * kMs), 1);  // 3 late > 2: one played, two skipped
  EXPECT_EQ(pacer.frames_skipped(), 2u);
}

}  // namespace
}  // namespace rtce
