// fake_wall_clock.h — the DTLS tests' one clock. OpenSSL times DTLS retransmissions with
// gettimeofday; fake_wall_clock.cpp replaces it in the test binary so that OpenSSL and the
// transport's `now` advance together and retransmission tests need no real waiting.
#pragma once

#include "common/clock.h"

namespace rtce::testing {

// Nanoseconds since an arbitrary start; gettimeofday reports a fixed epoch plus this.
void set_fake_now(Nanos now);
Nanos fake_now();

}  // namespace rtce::testing
