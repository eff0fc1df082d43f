// fake_wall_clock.cpp — interposes gettimeofday for the whole test binary (the executable's
// definition wins over glibc's for libssl's calls). Only OpenSSL's DTLS timer reads it here.
#include "fake_wall_clock.h"

#include <sys/time.h>

#include <atomic>

namespace rtce::testing {
namespace {
// A plausible wall-clock second (2024); OpenSSL treats a zero timeval as "no timer".
constexpr Nanos kEpoch = 1'700'000'000LL * 1'000'000'000;
std::atomic<Nanos> g_now{0};
}  // namespace

void set_fake_now(Nanos now) { g_now.store(now); }
Nanos fake_now() { return g_now.load(); }

}  // namespace rtce::testing

extern "C" int gettimeofday(struct timeval* __restrict tv, void* __restrict) noexcept {
  const rtce::Nanos wall = rtce::testing::kEpoch + rtce::testing::fake_now();
  tv->tv_sec = static_cast<time_t>(wall / 1'000'000'000);
  tv->tv_usec = static_cast<suseconds_t>((wall % 1'000'000'000) / 1000);
  return 0;
}
