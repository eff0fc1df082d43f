// playout_queue.h — the Call's one output queue: 20 ms frames from the backend waiting for
// their turn on the Call's frame clock. It stores what the backend gave, as it gave it: PCM
// frames (transcoding, encoded only when they play, so a barge-in wastes no encoder time)
// or Opus packets (passthrough), each in one slot of a fixed size.
//
// Backends send faster than real time (a Realtime server delivers a whole answer in a
// burst), so the queue holds everything up to a bound, without dropping. Memory follows
// what is queued: it starts at `initial_frames` slots and doubles, up to `max_frames`; a
// frame beyond the bound is refused (and counted by the caller). Growth is the only
// allocation, amortised and never on the packet path; clear() keeps the capacity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rtce {

class PlayoutQueue {
 public:
  PlayoutQueue(size_t slot_bytes, size_t initial_frames, size_t max_frames);

  // False when the frame is larger than a slot or the queue holds max_frames already.
  bool push(std::span<const uint8_t> frame);
  // The oldest frame, valid until the next push/pop/clear; empty when none is queued.
  std::span<const uint8_t> front() const;
  void pop();
  // Barge-in: nothing queued plays. Returns how many frames were dropped.
  size_t clear();

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  size_t slot_bytes() const { return slot_bytes_; }
  size_t max_frames() const { return max_frames_; }
  size_t capacity_frames() const { return lengths_.size(); }
  // Bytes reserved for frames now (what a session's RSS pays for the queue).
  size_t reserved_bytes() const { return storage_.capacity() + lengths_.capacity() * sizeof(uint16_t); }

 private:
  void grow();

  size_t slot_bytes_;
  size_t max_frames_;
  std::vector<uint8_t> storage_;
  std::vector<uint16_t> lengths_;
  size_t head_ = 0, count_ = 0;
};

}  // namespace rtce
