// playout_queue.cpp — see playout_queue.h.
#include "playout_queue.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace rtce {

PlayoutQueue::PlayoutQueue(size_t slot_bytes, size_t initial_frames, size_t max_frames)
    : slot_bytes_(slot_bytes), max_frames_(max_frames) {
  if (slot_bytes == 0 || slot_bytes > UINT16_MAX || max_frames == 0)
    throw std::invalid_argument("playout queue: bad slot size or bound");
  const size_t initial = std::clamp<size_t>(initial_frames, 1, max_frames);
  storage_.resize(initial * slot_bytes_);
  lengths_.resize(initial);
}

void PlayoutQueue::grow() {
  const size_t old_capacity = lengths_.size();
  const size_t capacity = std::min(max_frames_, old_capacity * 2);
  // Unwrap the ring into the new storage, oldest first.
  std::vector<uint8_t> storage(capacity * slot_bytes_);
  std::vector<uint16_t> lengths(capacity);
  for (size_t i = 0; i < count_; ++i) {
    const size_t from = (head_ + i) % old_capacity;
    std::memcpy(storage.data() + i * slot_bytes_, storage_.data() + from * slot_bytes_, lengths_[from]);
    lengths[i] = lengths_[from];
  }
  storage_ = std::move(storage);
  lengths_ = std::move(lengths);
  head_ = 0;
}

bool PlayoutQueue::push(std::span<const uint8_t> frame) {
  if (frame.size() > slot_bytes_ || count_ >= max_frames_) return false;
  if (count_ == lengths_.size()) grow();
  const size_t slot = (head_ + count_) % lengths_.size();
  std::memcpy(storage_.data() + slot * slot_bytes_, frame.data(), frame.size());
  lengths_[slot] = static_cast<uint16_t>(frame.size());
  ++count_;
  return true;
}

std::span<const uint8_t> PlayoutQueue::front() const {
  if (count_ == 0) return {};
  return {storage_.data() + head_ * slot_bytes_, lengths_[head_]};
}

void PlayoutQueue::pop() {
  if (count_ == 0) return;
  head_ = (head_ + 1) % lengths_.size();
  --count_;
}

size_t PlayoutQueue::clear() {
  const size_t dropped = count_;
  head_ = count_ = 0;
  return dropped;
}

}  // namespace rtce
