// jitter_buffer_test.cpp — reordering, loss with and without FEC, the target delay,
// duplicates, late packets, sequence wraparound, window slides and resyncs, and the slots
// growing for a larger packet.
#include "audio/jitter_buffer.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace rtce {
namespace {

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kStart = 5'000 * kMs;
using Kind = JitterBuffer::Output::Kind;

// A payload whose first byte names its sequence number.
std::array<uint8_t, 3> payload(uint16_t seq) { return {static_cast<uint8_t>(seq), 0xAB, 0xCD}; }

bool push(JitterBuffer& jb, uint16_t seq, Nanos at) { return jb.push(seq, seq * 960u, payload(seq), at); }

void expect_frame(const JitterBuffer::Output& out, uint16_t seq) {
  ASSERT_EQ(out.kind, Kind::frame) << "expected frame " << seq;
  EXPECT_EQ(out.seq, seq);
  EXPECT_EQ(out.timestamp, seq * 960u);
  ASSERT_EQ(out.payload.size(), 3u);
  EXPECT_EQ(out.payload[0], static_cast<uint8_t>(seq));
}

TEST(JitterBufferTest, ReordersWithinTheTargetDelay) {
  JitterBuffer jb;
  ASSERT_TRUE(push(jb, 3, kStart));
  ASSERT_TRUE(push(jb, 1, kStart + 1 * kMs));
  ASSERT_TRUE(push(jb, 2, kStart + 2 * kMs));
  EXPECT_EQ(jb.pop(kStart + 39 * kMs).kind, Kind::none);  // still buffering
  expect_frame(jb.pop(kStart + 40 * kMs), 1);
  expect_frame(jb.pop(kStart + 60 * kMs), 2);
  expect_frame(jb.pop(kStart + 80 * kMs), 3);
  EXPECT_EQ(jb.counters().reordered, 2u);
  EXPECT_EQ(jb.counters().received, 3u);
  EXPECT_EQ(jb.counters().lost, 0u);
  EXPECT_EQ(jb.pop(kStart + 100 * kMs).kind, Kind::none);
  EXPECT_EQ(jb.counters().underruns, 1u);
}

TEST(JitterBufferTest, LossWithSuccessorOffersFec) {
  JitterBuffer jb;
  for (uint16_t seq : {1, 2, 4, 5}) push(jb, seq, kStart + (seq - 1) * 20 * kMs);
  expect_frame(jb.pop(kStart + 40 * kMs), 1);
  expect_frame(jb.pop(kStart + 60 * kMs), 2);
  const auto missing = jb.pop(kStart + 80 * kMs);
  ASSERT_EQ(missing.kind, Kind::missing);
  EXPECT_EQ(missing.seq, 3);
  EXPECT_TRUE(missing.fec_available);
  ASSERT_FALSE(missing.payload.empty());
  EXPECT_EQ(missing.payload[0], 4);  // decode_fec from packet 4
  expect_frame(jb.pop(kStart + 100 * kMs), 4);
  expect_frame(jb.pop(kStart + 120 * kMs), 5);
  EXPECT_EQ(jb.counters().lost, 1u);
  EXPECT_EQ(jb.counters().fec_recovered, 1u);
  EXPECT_EQ(jb.counters().plc, 0u);
}

TEST(JitterBufferTest, LossWithoutSuccessorIsConcealedAfterTheTargetDelay) {
  JitterBuffer jb;
  push(jb, 1, kStart);
  push(jb, 2, kStart + 20 * kMs);
  push(jb, 5, kStart + 80 * kMs);  // 3 and 4 never come
  expect_frame(jb.pop(kStart + 40 * kMs), 1);
  expect_frame(jb.pop(kStart + 60 * kMs), 2);
  // Packet 3 was due at +40 ms; it is given up exactly target_delay later.
  EXPECT_EQ(jb.pop(kStart + 79 * kMs).kind, Kind::none);
  const auto plc = jb.pop(kStart + 80 * kMs);
  ASSERT_EQ(plc.kind, Kind::missing);
  EXPECT_EQ(plc.seq, 3);
  EXPECT_FALSE(plc.fec_available);
  EXPECT_TRUE(plc.payload.empty());
  const auto fec = jb.pop(kStart + 100 * kMs);
  ASSERT_EQ(fec.kind, Kind::missing);
  EXPECT_EQ(fec.seq, 4);
  EXPECT_TRUE(fec.fec_available);
  expect_frame(jb.pop(kStart + 120 * kMs), 5);
  EXPECT_EQ(jb.counters().lost, 2u);
  EXPECT_EQ(jb.counters().plc, 1u);
  EXPECT_EQ(jb.counters().fec_recovered, 1u);
}

TEST(JitterBufferTest, ZeroTargetDelayPlaysAndGivesUpAtOnce) {
  JitterBuffer jb(JitterBufferConfig{.target_delay = 0});
  push(jb, 10, kStart);
  expect_frame(jb.pop(kStart), 10);
  push(jb, 12, kStart + 40 * kMs);
  const auto out = jb.pop(kStart + 40 * kMs);
  EXPECT_EQ(out.kind, Kind::missing);
  EXPECT_TRUE(out.fec_available);
  expect_frame(jb.pop(kStart + 40 * kMs), 12);
}

TEST(JitterBufferTest, DuplicatesAndLatePacketsAreCountedAndDropped) {
  JitterBuffer jb;
  push(jb, 1, kStart);
  EXPECT_FALSE(push(jb, 1, kStart + 1 * kMs));
  EXPECT_EQ(jb.counters().duplicates, 1u);
  push(jb, 2, kStart + 20 * kMs);
  expect_frame(jb.pop(kStart + 40 * kMs), 1);
  expect_frame(jb.pop(kStart + 60 * kMs), 2);
  EXPECT_FALSE(push(jb, 1, kStart + 70 * kMs));  // already played
  EXPECT_EQ(jb.counters().late, 1u);
  // A packet given up on (concealed) and arriving afterwards is late too.
  push(jb, 4, kStart + 80 * kMs);
  ASSERT_EQ(jb.pop(kStart + 100 * kMs).kind, Kind::missing);
  EXPECT_FALSE(push(jb, 3, kStart + 101 * kMs));
  EXPECT_EQ(jb.counters().late, 2u);
  expect_frame(jb.pop(kStart + 120 * kMs), 4);
  EXPECT_EQ(jb.counters().received, 3u);
}

TEST(JitterBufferTest, SequenceWraparound) {
  JitterBuffer jb;
  push(jb, 65534, kStart);
  push(jb, 0, kStart + 20 * kMs);
  push(jb, 65535, kStart + 21 * kMs);  // reordered across the wrap
  push(jb, 1, kStart + 40 * kMs);
  expect_frame(jb.pop(kStart + 40 * kMs), 65534);
  expect_frame(jb.pop(kStart + 60 * kMs), 65535);
  expect_frame(jb.pop(kStart + 80 * kMs), 0);
  expect_frame(jb.pop(kStart + 100 * kMs), 1);
  EXPECT_EQ(jb.counters().reordered, 1u);
  EXPECT_EQ(jb.counters().late, 0u);
}

TEST(JitterBufferTest, ForwardGapBeyondTheWindowSlides) {
  JitterBuffer jb;  // 16 slots
  push(jb, 100, kStart);
  expect_frame(jb.pop(kStart + 40 * kMs), 100);
  push(jb, 102, kStart + 41 * kMs);
  ASSERT_TRUE(push(jb, 130, kStart + 50 * kMs));  // 29 ahead of the playout point (101)
  // The window now ends at 130: 101..114 fell out (102 flushed, the rest lost).
  EXPECT_EQ(jb.counters().flushed, 1u);
  EXPECT_EQ(jb.counters().lost, 13u);
  EXPECT_EQ(jb.buffered(), 1u);
}

TEST(JitterBufferTest, BigJumpResyncsToTheNewStream) {
  JitterBuffer jb;
  push(jb, 1, kStart);
  push(jb, 2, kStart + 20 * kMs);
  expect_frame(jb.pop(kStart + 40 * kMs), 1);
  ASSERT_TRUE(push(jb, 30000, kStart + 60 * kMs));  // a restarted sender
  EXPECT_EQ(jb.counters().resyncs, 1u);
  EXPECT_EQ(jb.counters().flushed, 1u);
  EXPECT_EQ(jb.counters().lost, 0u);
  push(jb, 30001, kStart + 80 * kMs);
  EXPECT_EQ(jb.pop(kStart + 80 * kMs).kind, Kind::none);  // buffering again
  expect_frame(jb.pop(kStart + 100 * kMs), 30000);
  expect_frame(jb.pop(kStart + 120 * kMs), 30001);
  // Far behind the playout point is a new stream too.
  ASSERT_TRUE(push(jb, 20000, kStart + 130 * kMs));
  EXPECT_EQ(jb.counters().resyncs, 2u);
}

TEST(JitterBufferTest, OversizedPayloadIsRefused) {
  JitterBuffer jb(JitterBufferConfig{.max_payload = 4});
  const std::vector<uint8_t> big(5, 1);
  EXPECT_FALSE(jb.push(1, 0, big, kStart));
  EXPECT_EQ(jb.counters().oversized, 1u);
  EXPECT_EQ(jb.buffered(), 0u);
}

// Slots start sized for voice; a larger packet re-lays them out (keeping what is buffered)
// up to max_payload, and the storage stays at that size.
TEST(JitterBufferTest, LargerPacketGrowsTheSlotsAndKeepsWhatIsBuffered) {
  JitterBuffer jb;
  EXPECT_EQ(jb.slot_bytes(), 320u);
  const size_t small = jb.reserved_bytes();
  EXPECT_LT(small, 16u * 400);  // not 16 x 1500
  ASSERT_TRUE(push(jb, 1, kStart));
  ASSERT_TRUE(push(jb, 3, kStart + 1 * kMs));
  std::vector<uint8_t> big(1000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(jb.push(2, 2 * 960u, big, kStart + 2 * kMs));
  EXPECT_EQ(jb.slot_bytes(), 1000u);
  EXPECT_GT(jb.reserved_bytes(), small);
  expect_frame(jb.pop(kStart + 40 * kMs), 1);
  auto out = jb.pop(kStart + 60 * kMs);
  ASSERT_EQ(out.kind, Kind::frame);
  EXPECT_EQ(std::vector<uint8_t>(out.payload.begin(), out.payload.end()), big);
  expect_frame(jb.pop(kStart + 80 * kMs), 3);
  const std::vector<uint8_t> largest(1500, 9);
  ASSERT_TRUE(jb.push(4, 4 * 960u, largest, kStart + 81 * kMs));
  EXPECT_EQ(jb.slot_bytes(), 1500u);
  EXPECT_EQ(jb.pop(kStart + 100 * kMs).payload.size(), 1500u);
}

}  // namespace
}  // namespace rtce
