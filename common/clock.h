// clock.h — the one clock of the data path: CLOCK_MONOTONIC in nanoseconds (a vDSO call,
// no syscall), read once per batch by workers and by benchmarks for in-payload stamps.
#pragma once

#include <cstdint>
#include <ctime>

namespace rtce {

using Nanos = int64_t;

inline Nanos monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace rtce
