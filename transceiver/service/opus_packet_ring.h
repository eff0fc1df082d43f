// opus_packet_ring.h — the passthrough mode's playout queue: a bounded ring of Opus packets
// from the backend, allocated once per session, so queuing a packet never allocates. The
// slot size bounds the packet (320 bytes is 128 kbit/s at 20 ms; voice uses far less).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace rtce {

class OpusPacketRing {
 public:
  static constexpr size_t kSlotBytes = 320;

  explicit OpusPacketRing(size_t capacity) : storage_(capacity * kSlotBytes), lengths_(capacity) {}

  // False when the packet is too large for a slot (refused). A full ring drops its oldest.
  bool push(std::span<const uint8_t> packet) {
    if (packet.size() > kSlotBytes || lengths_.empty()) return false;
    if (count_ == lengths_.size()) {
      head_ = (head_ + 1) % lengths_.size();
      --count_;
      ++dropped_;
    }
    const size_t slot = (head_ + count_) % lengths_.size();
    std::memcpy(storage_.data() + slot * kSlotBytes, packet.data(), packet.size());
    lengths_[slot] = static_cast<uint16_t>(packet.size());
    ++count_;
    return true;
  }
  bool empty() const { return count_ == 0; }
  std::span<const uint8_t> front() const { return {storage_.data() + head_ * kSlotBytes, lengths_[head_]}; }
  void pop() {
    if (count_ == 0) return;
    head_ = (head_ + 1) % lengths_.size();
    --count_;
  }
  void clear() { head_ = count_ = 0; }
  uint64_t dropped() const { return dropped_; }

 private:
  std::vector<uint8_t> storage_;
  std::vector<uint16_t> lengths_;
  size_t head_ = 0, count_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace rtce
