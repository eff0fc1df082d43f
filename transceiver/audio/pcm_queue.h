// pcm_queue.h — a bounded ring of fixed-size 20 ms PCM frames between the decoder / backend
// and the pacer. Full: drop the oldest (keep latency low) or the newest frame, counted.
// clear() empties it at once for barge-in. All memory is reserved in the constructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rtce {

class PcmQueue {
 public:
  enum class Overflow { drop_oldest, drop_newest };

  PcmQueue(int sample_rate, size_t capacity_frames, Overflow overflow = Overflow::drop_oldest);

  // `frame` must hold exactly samples_per_frame() samples, else it is refused (false).
  // Returns false also when the queue was full and the new frame was the one dropped.
  bool push(std::span<const int16_t> frame);
  // Copies the oldest frame into `out` (samples_per_frame() long); false when empty.
  bool pop(std::span<int16_t> out);
  // Drops every queued frame (barge-in); they are counted in frames_cleared().
  void clear();

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  size_t capacity() const { return capacity_; }
  size_t samples_per_frame() const { return samples_per_frame_; }
  uint64_t frames_dropped() const { return dropped_; }
  uint64_t frames_cleared() const { return cleared_; }
  uint64_t frames_refused() const { return refused_; }

 private:
  std::span<int16_t> frame_at(size_t index) {
    return {samples_.data() + index * samples_per_frame_, samples_per_frame_};
  }

  size_t samples_per_frame_;
  size_t capacity_;
  Overflow overflow_;
  std::vector<int16_t> samples_;
  size_t head_ = 0;  // oldest frame
  size_t count_ = 0;
  uint64_t dropped_ = 0;
  uint64_t cleared_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace rtce
