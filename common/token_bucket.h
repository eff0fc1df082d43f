// token_bucket.h — a token bucket on the caller's clock: `burst` tokens at the most, refilled
// at `per_second`, one taken per event. Socket- and clock-free: the caller passes `now`.
#pragma once

#include <algorithm>

#include "clock.h"

namespace rtce {

class TokenBucket {
 public:
  // Starts full; the refill clock starts at the first take().
  TokenBucket(double burst, double per_second) : burst_(burst), per_second_(per_second), tokens_(burst) {}

  // Takes one token at `now`: false (nothing taken) when less than one is left. A clock that
  // steps back refills nothing.
  bool take(Nanos now) {
    if (!started_) {
      started_ = true;
      at_ = now;
    } else if (now > at_) {
      tokens_ = std::min(burst_, tokens_ + static_cast<double>(now - at_) * per_second_ / 1e9);
      at_ = now;
    }
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  double burst_;
  double per_second_;
  double tokens_;
  Nanos at_ = 0;
  bool started_ = false;
};

}  // namespace rtce
