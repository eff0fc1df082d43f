// pacing.h — the benchmarks' paced sends: a sleep to an absolute CLOCK_MONOTONIC deadline
// (rtce::monotonic_now's clock), so that a paced loop does not drift.
#pragma once

#include <cerrno>
#include <ctime>

#include "clock.h"

namespace rtce::bench {

inline void sleep_until(Nanos t) {
  timespec ts{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace rtce::bench
