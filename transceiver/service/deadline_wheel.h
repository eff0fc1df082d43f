// deadline_wheel.h — when each of a worker's sessions next has something to do: a hashed
// timing wheel of fixed windows on the monotonic clock (Varghese & Lauck's scheme 6).
//
// The worker sleeps until the end of the earliest window that holds an entry and then visits
// only the entries of the windows that have ended, so its cost follows the work that is due,
// not the number of sessions. A window is the coalescing unit: every deadline in
// ((k-1)·W, k·W] is served at k·W, never early, at most W late. With W a divisor of the 20 ms
// frame period, a session's frame deadlines land in windows exactly 20 ms apart, so
// coalescing keeps each session's frame interval whole.
//
// Entries are intrusive (the scheduled object derives from Entry): scheduling, moving and
// cancelling are O(1) and never allocate. A deadline beyond one revolution (slots · W) stays
// in its slot and is passed over until its own revolution comes round.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "clock.h"

namespace rtce {

class DeadlineWheel {
 public:
  static constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

  class Entry {
   public:
    Entry() = default;
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    bool scheduled() const { return window_ >= 0; }
    Nanos deadline() const { return deadline_; }

   private:
    friend class DeadlineWheel;
    Entry* prev_ = nullptr;
    Entry* next_ = nullptr;
    Nanos deadline_ = kNever;
    int64_t window_ = -1;  // absolute window index; -1: not scheduled
    bool in_due_ = false;  // on the due list rather than in a slot
  };

  // `slots` is rounded up to a power of two; windows before the one holding `now` count
  // as served.
  DeadlineWheel(Nanos window, size_t slots, Nanos now);
  DeadlineWheel(const DeadlineWheel&) = delete;
  DeadlineWheel& operator=(const DeadlineWheel&) = delete;

  // Schedules `entry` at `deadline`, moving it if it was scheduled; kNever cancels. A
  // deadline in a window already served is due at once (pop_due returns it next).
  void schedule(Entry& entry, Nanos deadline);
  void cancel(Entry& entry);

  // When the owner should next call pop_due: the end of the earliest non-empty window (in
  // the past when entries are due now); kNever when nothing is scheduled. An entry more than
  // a revolution away may make this one revolution early (a visit that finds nothing due).
  Nanos next_wake() const;
  // One entry whose window ended at or before `now`, unscheduled; nullptr when none is left.
  Entry* pop_due(Nanos now);

  size_t size() const { return size_; }
  Nanos window() const { return window_; }

 private:
  int64_t window_of(Nanos deadline) const;
  void link(Entry& entry, size_t slot);
  void unlink(Entry& entry);
  // The first slot at or after `from` (cyclically) that holds an entry, or npos.
  size_t next_occupied(size_t from) const;
  // Moves the entries of `slot` whose window is at or before `upto` to the due list.
  void collect(size_t slot, int64_t upto);

  static constexpr size_t npos = static_cast<size_t>(-1);
  const Nanos window_;
  const size_t mask_;
  std::vector<Entry*> heads_;
  std::vector<uint64_t> occupied_;  // one bit per slot
  int64_t served_;                  // every window up to this one has been collected
  Entry* due_ = nullptr;            // collected, not yet popped
  size_t size_ = 0;
};

}  // namespace rtce
