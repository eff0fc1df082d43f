// pacer.cpp — see pacer.h.
#include "pacer.h"

#include <stdexcept>

namespace rtce {

FramePacer::FramePacer(Nanos start, Nanos period, int max_catch_up)
    : start_(start), period_(period), max_catch_up_(max_catch_up) {
  if (period <= 0) throw std::invalid_argument("pacer period must be positive");
  if (max_catch_up < 1) throw std::invalid_argument("pacer max_catch_up must be >= 1");
}

void FramePacer::restart(Nanos start) {
  start_ = start;
  next_index_ = 0;
}

int FramePacer::due(Nanos now) {
  const Nanos deadline = next_deadline();
  if (now < deadline) return 0;
  const int64_t late_frames = (now - deadline) / period_ + 1;
  if (late_frames <= max_catch_up_) {
    next_index_ += static_cast<uint64_t>(late_frames);
    return static_cast<int>(late_frames);
  }
  // Hopelessly behind (the thread was descheduled): bursting would only add delay, so
  // play one frame and move to the current slot of the grid.
  next_index_ += static_cast<uint64_t>(late_frames);
  frames_skipped_ += static_cast<uint64_t>(late_frames - 1);
  ++skip_events_;
  return 1;
}

}  // namespace rtce
