// deadline_wheel_test.cpp — the worker's timing wheel against a plain model: every entry is
// served in the window that holds its deadline (never early, at most one window late), once,
// and what the wheel visits follows what is due, not how many entries it holds.
#include "deadline_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace rtce {
namespace {

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kWindow = 4 * kMs;

struct Item : DeadlineWheel::Entry {
  int id = 0;
};

std::vector<int> pop_all(DeadlineWheel& wheel, Nanos now) {
  std::vector<int> out;
  while (auto* e = wheel.pop_due(now)) out.push_back(static_cast<Item*>(e)->id);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(DeadlineWheelTest, ServesADeadlineAtTheEndOfItsWindowNeverBefore) {
  DeadlineWheel wheel(kWindow, 64, 1000 * kMs);
  Item a;
  a.id = 1;
  wheel.schedule(a, 1001 * kMs);  // window (1000, 1004]
  EXPECT_EQ(wheel.next_wake(), 1004 * kMs);
  EXPECT_TRUE(pop_all(wheel, 1003 * kMs).empty()) << "served before its window ended";
  EXPECT_EQ(pop_all(wheel, 1004 * kMs), std::vector<int>{1});
  EXPECT_FALSE(a.scheduled());
  EXPECT_EQ(wheel.next_wake(), DeadlineWheel::kNever);
  EXPECT_EQ(wheel.size(), 0u);
}

TEST(DeadlineWheelTest, ADeadlineOnABoundaryIsServedAtThatBoundary) {
  DeadlineWheel wheel(kWindow, 64, 0);
  Item a;
  wheel.schedule(a, 8 * kMs);
  EXPECT_EQ(wheel.next_wake(), 8 * kMs);
}

TEST(DeadlineWheelTest, APastDeadlineIsDueAtOnce) {
  DeadlineWheel wheel(kWindow, 64, 100 * kMs);
  Item a;
  a.id = 7;
  wheel.schedule(a, 50 * kMs);
  EXPECT_LE(wheel.next_wake(), 100 * kMs);
  EXPECT_EQ(pop_all(wheel, 100 * kMs), std::vector<int>{7});
}

TEST(DeadlineWheelTest, MovingAndCancellingTakeEffect) {
  DeadlineWheel wheel(kWindow, 64, 0);
  Item a, b;
  a.id = 1;
  b.id = 2;
  wheel.schedule(a, 10 * kMs);
  wheel.schedule(b, 30 * kMs);
  wheel.schedule(a, 50 * kMs);  // moved later
  wheel.cancel(b);
  EXPECT_EQ(wheel.size(), 1u);
  EXPECT_EQ(wheel.next_wake(), 52 * kMs);
  EXPECT_TRUE(pop_all(wheel, 48 * kMs).empty());
  EXPECT_EQ(pop_all(wheel, 52 * kMs), std::vector<int>{1});
  wheel.schedule(a, DeadlineWheel::kNever);
  EXPECT_FALSE(a.scheduled());
}

TEST(DeadlineWheelTest, ADeadlineBeyondOneRevolutionWaitsForItsOwnRevolution) {
  DeadlineWheel wheel(kWindow, 64, 0);  // one revolution: 256 ms
  Item far;
  far.id = 3;
  wheel.schedule(far, 1000 * kMs);
  // Visiting its slot a revolution early finds nothing due.
  for (Nanos t = 0; t < 1000 * kMs; t += 7 * kMs) ASSERT_TRUE(pop_all(wheel, t).empty()) << t;
  EXPECT_EQ(pop_all(wheel, 1000 * kMs), std::vector<int>{3});
}

TEST(DeadlineWheelTest, AfterASleepLongerThanARevolutionEverythingDueIsServed) {
  DeadlineWheel wheel(kWindow, 64, 0);
  std::vector<Item> items(20);
  for (int i = 0; i < 20; ++i) {
    items[i].id = i;
    wheel.schedule(items[i], (i + 1) * 100 * kMs);  // 100 ms .. 2 s
  }
  const auto due = pop_all(wheel, 1000 * kMs);
  EXPECT_EQ(due.size(), 10u);
  EXPECT_EQ(wheel.size(), 10u);
  // The rest are up to three revolutions away: a wake-up may come early, finding nothing.
  EXPECT_LE(wheel.next_wake(), 1100 * kMs);
  for (Nanos t = wheel.next_wake(); t < 1100 * kMs; t = std::max(t + kWindow, wheel.next_wake()))
    ASSERT_TRUE(pop_all(wheel, t).empty()) << t;
  EXPECT_EQ(pop_all(wheel, 1100 * kMs), std::vector<int>{10});
}

// A random schedule against a model: each entry comes out once, in the first pop whose `now`
// is at or past the end of its window.
TEST(DeadlineWheelTest, MatchesAModelOverRandomSchedules) {
  std::mt19937_64 rng(42);
  DeadlineWheel wheel(kWindow, 256, 0);
  std::vector<Item> items(500);
  std::map<int, Nanos> model;  // id -> deadline
  for (size_t i = 0; i < items.size(); ++i) items[i].id = static_cast<int>(i);
  Nanos now = 0;
  for (int step = 0; step < 4000; ++step) {
    const int id = static_cast<int>(rng() % items.size());
    const auto action = rng() % 10;
    if (action < 7) {
      const Nanos deadline = now + static_cast<Nanos>(rng() % (3000 * kMs)) - 5 * kMs;
      wheel.schedule(items[id], deadline);
      model[id] = deadline;
    } else if (action < 8) {
      wheel.cancel(items[id]);
      model.erase(id);
    } else {
      now += static_cast<Nanos>(rng() % (50 * kMs));
      const auto got = pop_all(wheel, now);
      std::vector<int> want;
      for (auto it = model.begin(); it != model.end();) {
        const Nanos window_end = (it->second <= 0 ? 0 : (it->second + kWindow - 1) / kWindow) * kWindow;
        if (window_end <= now) {
          want.push_back(it->first);
          it = model.erase(it);
        } else {
          ++it;
        }
      }
      ASSERT_EQ(got, want) << "step " << step << " now " << now;
    }
    ASSERT_EQ(wheel.size(), model.size());
  }
}

// Idle cost: a thousand entries due in a second cost no visits while nothing is due.
TEST(DeadlineWheelTest, NextWakeFollowsTheEarliestEntryNotTheCount) {
  DeadlineWheel wheel(kWindow, 1024, 0);
  std::vector<Item> items(1000);
  for (auto& item : items) wheel.schedule(item, 1000 * kMs);
  Item soon;
  wheel.schedule(soon, 10 * kMs);
  EXPECT_EQ(wheel.next_wake(), 12 * kMs);
  EXPECT_EQ(pop_all(wheel, 12 * kMs).size(), 1u);
  EXPECT_EQ(wheel.next_wake(), 1000 * kMs);
  EXPECT_TRUE(pop_all(wheel, 999 * kMs).empty());
  EXPECT_EQ(pop_all(wheel, 1000 * kMs).size(), 1000u);
}

}  // namespace
}  // namespace rtce
