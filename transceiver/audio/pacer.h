// pacer.h — a drift-free 20 ms frame clock for playout and sending. Deadline n is always
// start + n * period on the monotonic clock, so jittery wakeups never accumulate into
// drift; when the caller falls far behind it skips ahead on the same grid and counts it.
#pragma once

#include <cstdint>

#include "clock.h"

namespace rtce {

class FramePacer {
 public:
  static constexpr Nanos kDefaultPeriod = 20'000'000;

  // The first frame is due at `start`. After `max_catch_up` frames of lateness the pacer
  // stops bursting: it plays one frame and skips the rest.
  explicit FramePacer(Nanos start, Nanos period = kDefaultPeriod, int max_catch_up = 5);

  // Frames due at `now` (0 when the next deadline is still ahead); advances past them.
  int due(Nanos now);

  Nanos next_deadline() const { return start_ + static_cast<Nanos>(next_index_) * period_; }
  // Deadlines consumed so far, including skipped ones: the frame index to stamp next.
  uint64_t frame_index() const { return next_index_; }
  uint64_t frames_skipped() const { return frames_skipped_; }
  uint64_t skip_events() const { return skip_events_; }
  Nanos period() const { return period_; }
  // Restarts the grid (e.g. after a long pause) without touching the counters.
  void restart(Nanos start);

 private:
  Nanos start_;
  Nanos period_;
  int max_catch_up_;
  uint64_t next_index_ = 0;
  uint64_t frames_skipped_ = 0;
  uint64_t skip_events_ = 0;
};

}  // namespace rtce
