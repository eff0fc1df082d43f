// jitter_buffer.h — a small reorder buffer for one incoming Opus stream, keyed by RTP
// sequence number (with wraparound). It holds packets for a target delay so that late and
// reordered ones can still play in order, and tells the playout side, frame by frame,
// whether to decode a packet, recover a lost one with FEC from its successor, or conceal.
// Slots preallocated in the constructor, sized for a voice packet; a larger packet (up to
// max_payload) re-lays them out once at a larger size, so a call's storage grows at most a few
// times and otherwise push/pop never allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "clock.h"

namespace rtce {

struct JitterBufferConfig {
  Nanos target_delay = 40'000'000;  // how long a gap may wait for its packet; >= 0
  size_t capacity = 16;             // slots; also the reorder window in packets
  size_t max_payload = 1500;
  // Slot size to start with: 320 B is 128 kbit/s at 20 ms; voice sends a third of it.
  size_t initial_slot_bytes = 320;
  // A packet this many sequence numbers behind the playout point is a new stream, not a
  // late packet.
  int resync_behind = 1000;
  // Nominal packet duration: a gap's packet is expected this long before its successor.
  Nanos frame_duration = 20'000'000;
};

struct JitterBufferCounters {
  uint64_t received = 0;   // accepted into the buffer
  uint64_t reordered = 0;  // accepted, but older than the newest packet already received
  uint64_t duplicates = 0;
  uint64_t late = 0;       // arrived after its playout time: dropped
  uint64_t oversized = 0;  // larger than max_payload: dropped
  uint64_t lost = 0;       // never arrived in time (includes the gap of a forward jump)
  uint64_t fec_recovered = 0;
  uint64_t plc = 0;
  uint64_t resyncs = 0;
  uint64_t flushed = 0;  // buffered packets discarded by a resync
  uint64_t played = 0;
  uint64_t underruns = 0;  // pop() while playing found nothing buffered
};

class JitterBuffer {
 public:
  explicit JitterBuffer(const JitterBufferConfig& config = {});

  // Copies the payload into a slot. Returns false when the packet was dropped (counted).
  bool push(uint16_t seq, uint32_t timestamp, std::span<const uint8_t> payload, Nanos now);

  struct Output {
    enum class Kind {
      none,     // nothing to play yet (still buffering, or no packet waiting)
      frame,    // decode `payload`
      missing,  // `seq` was lost: decode_fec(payload) when fec_available, else conceal
    };
    Kind kind = Kind::none;
    uint16_t seq = 0;
    uint32_t timestamp = 0;  // of the frame, or for a missing one of its successor
    bool fec_available = false;
    // frame: the packet; missing with FEC: the successor packet. Valid until the next
    // push() or pop().
    std::span<const uint8_t> payload;
  };
  // The next frame in order, if it may play at `now`.
  Output pop(Nanos now);

  void reset();  // forget every packet and the playout point
  size_t buffered() const { return buffered_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // Bytes reserved for packets and slots now (what a session's RSS pays for the buffer).
  size_t reserved_bytes() const { return storage_.capacity() + slots_.capacity() * sizeof(Slot); }
  const JitterBufferCounters& counters() const { return counters_; }

 private:
  struct Slot {
    bool occupied = false;
    uint16_t seq = 0;
    uint32_t timestamp = 0;
    size_t length = 0;
    Nanos arrival = 0;
  };
  Slot& slot_for(uint16_t seq) { return slots_[seq % slots_.size()]; }
  bool holds(uint16_t seq) const;
  std::span<const uint8_t> payload_of(uint16_t seq) const;
  // The earliest buffered packet at or after the playout point, or nullptr.
  const Slot* earliest_waiting() const;
  void free_slot(Slot& slot);
  void resync(uint16_t seq, Nanos now);
  void grow_slots(size_t needed);  // slots of at least `needed` bytes, the buffered packets kept

  JitterBufferConfig config_;
  std::vector<Slot> slots_;
  size_t slot_bytes_ = 0;         // initial_slot_bytes, doubled as larger packets come
  std::vector<uint8_t> storage_;  // capacity * slot_bytes_ bytes
  bool started_ = false;          // a playout point exists
  bool playing_ = false;          // the first packet has waited its target delay
  Nanos first_arrival_ = 0;       // of the stream (or since the last resync)
  uint16_t next_seq_ = 0;         // the next frame to play
  uint16_t highest_seq_ = 0;      // newest packet received
  size_t buffered_ = 0;
  JitterBufferCounters counters_;
};

}  // namespace rtce
