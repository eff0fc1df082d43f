// deadline_wheel.cpp — see deadline_wheel.h.
#include "deadline_wheel.h"

#include <bit>

namespace rtce {

DeadlineWheel::DeadlineWheel(Nanos window, size_t slots, Nanos now)
    : window_(window),
      mask_(std::bit_ceil(std::max<size_t>(slots, 64)) - 1),
      heads_(mask_ + 1, nullptr),
      occupied_((mask_ + 1) / 64, 0),
      served_(now / window) {}

int64_t DeadlineWheel::window_of(Nanos deadline) const {
  // Window k holds ((k-1)W, kW]: a deadline on a boundary is served at that boundary.
  return deadline <= 0 ? 0 : (deadline + window_ - 1) / window_;
}

void DeadlineWheel::link(Entry& e, size_t slot) {
  e.prev_ = nullptr;
  e.next_ = heads_[slot];
  if (e.next_) e.next_->prev_ = &e;
  heads_[slot] = &e;
  occupied_[slot / 64] |= uint64_t{1} << (slot % 64);
}

void DeadlineWheel::unlink(Entry& e) {
  Entry** head = e.in_due_ ? &due_ : &heads_[static_cast<size_t>(e.window_) & mask_];
  if (e.prev_)
    e.prev_->next_ = e.next_;
  else
    *head = e.next_;
  if (e.next_) e.next_->prev_ = e.prev_;
  if (!e.in_due_ && *head == nullptr) {
    const size_t slot = static_cast<size_t>(e.window_) & mask_;
    occupied_[slot / 64] &= ~(uint64_t{1} << (slot % 64));
  }
  e.prev_ = e.next_ = nullptr;
  e.in_due_ = false;
  e.window_ = -1;
  e.deadline_ = kNever;
  --size_;
}

void DeadlineWheel::schedule(Entry& e, Nanos deadline) {
  if (deadline == kNever) return cancel(e);
  const int64_t window = window_of(deadline);
  if (e.scheduled()) {
    if (window == e.window_ && !e.in_due_) {
      e.deadline_ = deadline;  // same window: nothing moves
      return;
    }
    unlink(e);
  }
  ++size_;
  e.deadline_ = deadline;
  if (window <= served_) {
    e.window_ = served_;
    e.in_due_ = true;
    e.prev_ = nullptr;
    e.next_ = due_;
    if (due_) due_->prev_ = &e;
    due_ = &e;
    return;
  }
  e.window_ = window;
  e.in_due_ = false;
  link(e, static_cast<size_t>(window) & mask_);
}

void DeadlineWheel::cancel(Entry& e) {
  if (e.scheduled()) unlink(e);
}

size_t DeadlineWheel::next_occupied(size_t from) const {
  const size_t words = occupied_.size();
  size_t word = from / 64;
  uint64_t bits = occupied_[word] & (~uint64_t{0} << (from % 64));
  for (size_t i = 0; i <= words; ++i) {
    if (bits) return word * 64 + static_cast<size_t>(std::countr_zero(bits));
    word = (word + 1) % words;
    bits = occupied_[word];
  }
  return npos;
}

Nanos DeadlineWheel::next_wake() const {
  if (due_) return served_ * window_;
  const size_t from = static_cast<size_t>(served_ + 1) & mask_;
  const size_t slot = next_occupied(from);
  if (slot == npos) return kNever;
  const int64_t ahead = static_cast<int64_t>((slot - from) & mask_);
  return (served_ + 1 + ahead) * window_;
}

void DeadlineWheel::collect(size_t slot, int64_t upto) {
  for (Entry* e = heads_[slot]; e != nullptr;) {
    Entry* next = e->next_;
    if (e->window_ <= upto) {
      const Nanos deadline = e->deadline_;
      unlink(*e);
      ++size_;
      e->deadline_ = deadline;
      e->window_ = upto;
      e->in_due_ = true;
      e->next_ = due_;
      if (due_) due_->prev_ = e;
      due_ = e;
    }
    e = next;
  }
}

DeadlineWheel::Entry* DeadlineWheel::pop_due(Nanos now) {
  const int64_t target = now / window_;  // windows whose end is at or before now
  if (!due_ && target > served_) {
    const int64_t slots = static_cast<int64_t>(mask_) + 1;
    if (target - served_ >= slots) {
      // Slept for a revolution or more: every slot may hold due entries.
      for (size_t slot = 0; slot <= mask_; ++slot)
        if (heads_[slot]) collect(slot, target);
      served_ = target;
    } else {
      // Visit the occupied slots of the windows served_+1 .. target in order, stopping at the
      // first that yields something: later windows are collected by later calls.
      while (!due_ && served_ < target) {
        const size_t from = static_cast<size_t>(served_ + 1) & mask_;
        const size_t slot = next_occupied(from);
        const int64_t ahead = slot == npos ? slots : static_cast<int64_t>((slot - from) & mask_);
        if (served_ + 1 + ahead > target) {
          served_ = target;
          break;
        }
        served_ += 1 + ahead;
        collect(slot, served_);
      }
    }
  }
  Entry* e = due_;
  if (e) unlink(*e);
  return e;
}

}  // namespace rtce
