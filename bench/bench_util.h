// bench_util.h — what the load generators share: a sleep to an absolute CLOCK_MONOTONIC
// deadline (rtce::monotonic_now's clock, so that a paced loop does not drift), and the STUN
// Binding request whose USERNAME carries a routing hint (a flow's first packet).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string_view>

#include "byte_order.h"
#include "clock.h"
#include "random.h"
#include "rtce_stun.h"

namespace rtce::bench {

inline void sleep_until(Nanos t) {
  timespec ts{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// A STUN Binding request with USERNAME `username` ("<server ufrag>:<client ufrag>") and a
// random transaction id at `out` (room for 20 + 4 + username rounded up to 4 bytes); its length.
inline size_t write_binding_request(uint8_t* out, std::string_view username) {
  const size_t padded = (username.size() + 3) & ~size_t{3};
  const size_t len = RTCE_STUN_HEADER_LEN + 4 + padded;
  std::memset(out, 0, len);
  store_be16(out, RTCE_STUN_BINDING_REQUEST);
  store_be16(out + 2, static_cast<uint16_t>(len - RTCE_STUN_HEADER_LEN));
  store_be32(out + 4, RTCE_STUN_MAGIC_COOKIE);
  fill_random(out + 8, 12);
  store_be16(out + 20, RTCE_STUN_ATTR_USERNAME);
  store_be16(out + 22, static_cast<uint16_t>(username.size()));
  std::memcpy(out + 24, username.data(), username.size());
  return len;
}

}  // namespace rtce::bench
