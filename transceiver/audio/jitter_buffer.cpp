// jitter_buffer.cpp — see jitter_buffer.h.
#include "jitter_buffer.h"

#include <algorithm>
#include <stdexcept>

namespace rtce {
namespace {

// Signed distance from a to b in sequence space: positive when b is newer.
int seq_distance(uint16_t a, uint16_t b) { return static_cast<int16_t>(static_cast<uint16_t>(b - a)); }

}  // namespace

JitterBuffer::JitterBuffer(const JitterBufferConfig& config) : config_(config) {
  if (config_.capacity == 0 || config_.capacity > 1024) throw std::invalid_argument("jitter buffer capacity");
  if (config_.target_delay < 0) config_.target_delay = 0;
  slots_.resize(config_.capacity);
  slot_bytes_ = std::clamp<size_t>(config_.initial_slot_bytes, 1, std::max<size_t>(config_.max_payload, 1));
  storage_.resize(config_.capacity * slot_bytes_);
}

void JitterBuffer::grow_slots(size_t needed) {
  const size_t bytes = std::min(std::max(needed, slot_bytes_ * 2), config_.max_payload);
  std::vector<uint8_t> storage(slots_.size() * bytes);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].occupied) continue;
    std::copy_n(storage_.begin() + static_cast<ptrdiff_t>(i * slot_bytes_), slots_[i].length,
                storage.begin() + static_cast<ptrdiff_t>(i * bytes));
  }
  storage_ = std::move(storage);
  slot_bytes_ = bytes;
}

void JitterBuffer::reset() {
  for (Slot& slot : slots_) slot.occupied = false;
  buffered_ = 0;
  started_ = false;
  playing_ = false;
}

bool JitterBuffer::holds(uint16_t seq) const {
  const Slot& slot = slots_[seq % slots_.size()];
  return slot.occupied && slot.seq == seq;
}

std::span<const uint8_t> JitterBuffer::payload_of(uint16_t seq) const {
  const size_t index = seq % slots_.size();
  return {storage_.data() + index * slot_bytes_, slots_[index].length};
}

const JitterBuffer::Slot* JitterBuffer::earliest_waiting() const {
  if (buffered_ == 0) return nullptr;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const uint16_t seq = static_cast<uint16_t>(next_seq_ + i);
    if (holds(seq)) return &slots_[seq % slots_.size()];
  }
  return nullptr;
}

void JitterBuffer::free_slot(Slot& slot) {
  slot.occupied = false;
  --buffered_;
}

void JitterBuffer::resync(uint16_t seq, Nanos now) {
  counters_.flushed += buffered_;
  for (Slot& slot : slots_) slot.occupied = false;
  buffered_ = 0;
  ++counters_.resyncs;
  next_seq_ = seq;
  highest_seq_ = seq;
  playing_ = false;
  first_arrival_ = now;
}

bool JitterBuffer::push(uint16_t seq, uint32_t timestamp, std::span<const uint8_t> payload, Nanos now) {
  if (payload.size() > config_.max_payload) {
    ++counters_.oversized;
    return false;
  }
  const int capacity = static_cast<int>(slots_.size());
  if (!started_) {
    started_ = true;
    next_seq_ = seq;
    highest_seq_ = seq;
    first_arrival_ = now;
  }
  int ahead = seq_distance(next_seq_, seq);
  if (ahead < 0) {
    if (-ahead >= config_.resync_behind) {
      resync(seq, now);
    } else if (!playing_ && seq_distance(seq, highest_seq_) < capacity) {
      next_seq_ = seq;  // still buffering: an earlier packet moves the start back
    } else {
      ++counters_.late;
      return false;
    }
  } else if (ahead >= capacity) {
    if (ahead > config_.resync_behind) {
      resync(seq, now);  // a new stream, not a gap
    } else {
      // Slide the window so that `seq` fits: what falls out was either lost or is
      // abandoned to keep the delay bounded.
      const uint16_t new_next = static_cast<uint16_t>(seq - (capacity - 1));
      for (uint16_t s = next_seq_; s != new_next; ++s) {
        if (holds(s)) {
          free_slot(slot_for(s));
          ++counters_.flushed;
        } else {
          ++counters_.lost;
        }
      }
      next_seq_ = new_next;
    }
  }

  Slot& slot = slot_for(seq);
  if (slot.occupied && slot.seq == seq) {
    ++counters_.duplicates;
    return false;
  }
  if (payload.size() > slot_bytes_) grow_slots(payload.size());
  if (seq_distance(highest_seq_, seq) < 0) {
    ++counters_.reordered;
  } else {
    highest_seq_ = seq;
  }
  slot.occupied = true;
  slot.seq = seq;
  slot.timestamp = timestamp;
  slot.length = payload.size();
  slot.arrival = now;
  std::copy(payload.begin(), payload.end(),
            storage_.begin() + static_cast<ptrdiff_t>((seq % slots_.size()) * slot_bytes_));
  ++buffered_;
  ++counters_.received;
  return true;
}

JitterBuffer::Output JitterBuffer::pop(Nanos now) {
  Output out;
  const Slot* earliest = earliest_waiting();
  if (earliest == nullptr) {
    if (playing_) ++counters_.underruns;
    return out;
  }
  if (!playing_) {
    // Playout starts once the stream's first packet has waited the target delay, whatever
    // reordering has put in front of it since.
    if (now - first_arrival_ < config_.target_delay) return out;
    playing_ = true;
  }
  if (holds(next_seq_)) {
    Slot& slot = slot_for(next_seq_);
    out.kind = Output::Kind::frame;
    out.seq = next_seq_;
    out.timestamp = slot.timestamp;
    out.payload = payload_of(next_seq_);
    free_slot(slot);
    ++counters_.played;
    ++next_seq_;
    return out;
  }
  // The next packet is missing. Its expected arrival is its first buffered successor's
  // arrival less one frame per sequence step; give up on it once that is target_delay ago.
  const int steps = seq_distance(next_seq_, earliest->seq);
  const Nanos expected_arrival = earliest->arrival - steps * config_.frame_duration;
  if (now - expected_arrival < config_.target_delay) return out;

  out.kind = Output::Kind::missing;
  out.seq = next_seq_;
  const uint16_t successor = static_cast<uint16_t>(next_seq_ + 1);
  ++counters_.lost;
  if (holds(successor)) {
    out.fec_available = true;
    out.timestamp = slot_for(successor).timestamp;
    out.payload = payload_of(successor);
    ++counters_.fec_recovered;
  } else {
    ++counters_.plc;
  }
  ++next_seq_;
  return out;
}

}  // namespace rtce
