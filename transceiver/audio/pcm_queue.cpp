// pcm_queue.cpp — see pcm_queue.h.
#include "pcm_queue.h"

#include <algorithm>
#include <stdexcept>

namespace rtce {

PcmQueue::PcmQueue(int sample_rate, size_t capacity_frames, Overflow overflow)
    : samples_per_frame_(sample_rate > 0 ? static_cast<size_t>(sample_rate / 50) : 0),
      capacity_(capacity_frames),
      overflow_(overflow) {
  if (samples_per_frame_ == 0) throw std::invalid_argument("PcmQueue sample rate");
  if (capacity_ == 0) throw std::invalid_argument("PcmQueue capacity");
  samples_.resize(capacity_ * samples_per_frame_);
}

bool PcmQueue::push(std::span<const int16_t> frame) {
  if (frame.size() != samples_per_frame_) {
    ++refused_;
    return false;
  }
  if (count_ == capacity_) {
    ++dropped_;
    if (overflow_ == Overflow::drop_newest) return false;
    head_ = (head_ + 1) % capacity_;
    --count_;
  }
  std::copy(frame.begin(), frame.end(), frame_at((head_ + count_) % capacity_).begin());
  ++count_;
  return true;
}

bool PcmQueue::pop(std::span<int16_t> out) {
  if (count_ == 0 || out.size() < samples_per_frame_) return false;
  const std::span<int16_t> frame = frame_at(head_);
  std::copy(frame.begin(), frame.end(), out.begin());
  head_ = (head_ + 1) % capacity_;
  --count_;
  return true;
}

void PcmQueue::clear() {
  cleared_ += count_;
  head_ = 0;
  count_ = 0;
}

}  // namespace rtce
