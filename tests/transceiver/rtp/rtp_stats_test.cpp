// rtp_stats_test.cpp — receive statistics (loss with wraparound, jitter, LSR/DLSR) and send
// statistics (SR timestamps, RTT from report blocks) with an explicit fake clock.
#include "rtp/rtp_stats.h"

#include <gtest/gtest.h>

#include <array>

#include "rtp/rtcp.h"

namespace rtce {
namespace {

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kStart = 1'000'000 * kMs;  // an arbitrary monotonic origin
constexpr int kOpusRate = 48000;

TEST(ReceiveStatsTest, PerfectStreamHasNoLossNoJitter) {
  ReceiveStats stats(kOpusRate);
  for (int i = 0; i < 100; ++i)
    stats.update(static_cast<uint16_t>(1000 + i), 960u * i, kStart + i * 20 * kMs);
  EXPECT_EQ(stats.received(), 100u);
  EXPECT_EQ(stats.expected(), 100);
  EXPECT_EQ(stats.lost(), 0);
  EXPECT_EQ(stats.jitter_rtp_units(), 0u);
  EXPECT_EQ(stats.ext_highest_seq(), 1099u);
}

TEST(ReceiveStatsTest, LossCountingAcrossSequenceWraparound) {
  ReceiveStats stats(kOpusRate);
  uint32_t ts = 0;
  Nanos t = kStart;
  // 65530..65535 then 0..10 (17 sequence numbers), with 65534 and 3 lost.
  for (uint32_t s = 65530; s <= 65536 + 10; ++s, ts += 960, t += 20 * kMs) {
    const uint16_t seq = static_cast<uint16_t>(s);
    if (seq == 65534 || seq == 3) continue;
    ASSERT_TRUE(stats.update(seq, ts, t));
  }
  EXPECT_EQ(stats.expected(), 17);
  EXPECT_EQ(stats.received(), 15u);
  EXPECT_EQ(stats.lost(), 2);
  EXPECT_EQ(stats.ext_highest_seq(), 65536u + 10);

  const RtcpReportBlock first = stats.make_report_block(0xcafebabe, t);
  EXPECT_EQ(first.ssrc, 0xcafebabeu);
  EXPECT_EQ(first.cumulative_lost, 2);
  EXPECT_EQ(first.fraction_lost, 2 * 256 / 17);
  EXPECT_EQ(first.ext_highest_seq, 65546u);

  // The next interval has no loss: fraction 0, cumulative unchanged.
  for (int i = 0; i < 10; ++i, ts += 960, t += 20 * kMs) stats.update(static_cast<uint16_t>(11 + i), ts, t);
  const RtcpReportBlock second = stats.make_report_block(0xcafebabe, t);
  EXPECT_EQ(second.fraction_lost, 0);
  EXPECT_EQ(second.cumulative_lost, 2);
}

TEST(ReceiveStatsTest, ReorderedPacketFillsTheGap) {
  ReceiveStats stats(kOpusRate);
  stats.update(10, 0, kStart);
  stats.update(12, 1920, kStart + 40 * kMs);
  EXPECT_EQ(stats.lost(), 1);
  stats.update(11, 960, kStart + 45 * kMs);  // late, not a new highest
  EXPECT_EQ(stats.lost(), 0);
  EXPECT_EQ(stats.ext_highest_seq(), 12u);
}

TEST(ReceiveStatsTest, JitterOfKnownArrivalVariance) {
  // Packets every 20 ms of media, arrivals alternately on time and 4 ms late: every
  // transit difference is 4 ms = 192 units, so the A.8 estimate converges to 4 ms.
  ReceiveStats stats(kOpusRate);
  for (int i = 0; i < 500; ++i) {
    const Nanos offset = (i % 2) * 4 * kMs;
    stats.update(static_cast<uint16_t>(i), 960u * i, kStart + i * 20 * kMs + offset);
  }
  EXPECT_NEAR(stats.jitter_rtp_units(), 192, 2);
  EXPECT_NEAR(stats.jitter_ms(), 4.0, 0.05);
  EXPECT_EQ(stats.make_report_block(1, kStart).jitter, stats.jitter_rtp_units());
}

TEST(ReceiveStatsTest, BigJumpIsBadUntilConfirmed) {
  ReceiveStats stats(kOpusRate);
  for (int i = 0; i < 5; ++i) stats.update(static_cast<uint16_t>(100 + i), 960u * i, kStart + i * 20 * kMs);
  EXPECT_FALSE(stats.update(20000, 0, kStart + 200 * kMs));  // a stray packet
  EXPECT_EQ(stats.bad_sequence_jumps(), 1u);
  EXPECT_EQ(stats.ext_highest_seq(), 104u);
  EXPECT_TRUE(stats.update(105, 960u * 5, kStart + 100 * kMs));
  // A restarted sender: two consecutive packets confirm the new sequence.
  EXPECT_FALSE(stats.update(40000, 0, kStart + 300 * kMs));
  EXPECT_TRUE(stats.update(40001, 960, kStart + 320 * kMs));
  EXPECT_EQ(stats.resyncs(), 1u);
  EXPECT_EQ(stats.ext_highest_seq(), 40001u);
  EXPECT_EQ(stats.lost(), 0);
}

TEST(ReceiveStatsTest, LsrAndDlsrFromTheRemoteSenderReport) {
  ReceiveStats stats(kOpusRate);
  stats.update(1, 0, kStart);
  RtcpSenderInfo sr;
  sr.ntp = NtpTime{0xe9b2c4a1, 0x8f5c28f6};
  stats.on_sender_report(sr, kStart + 10 * kMs);
  const RtcpReportBlock block = stats.make_report_block(7, kStart + 10 * kMs + 250 * kMs);
  EXPECT_EQ(block.lsr, 0xc4a18f5cu);
  EXPECT_EQ(block.dlsr, 250 * 65536 / 1000u);  // 0.25 s in 1/65536 s
  EXPECT_EQ(ReceiveStats(kOpusRate).make_report_block(7, kStart).lsr, 0u);
}

TEST(SendStatsTest, SenderInfoCountsAndConsistentRtpTimestamp) {
  SendStats stats(0x11223344, kOpusRate);
  for (int i = 0; i < 50; ++i) stats.on_packet_sent(80, 1000u + 960u * i, kStart + i * 20 * kMs);
  // 10 ms after the last packet: the RTP clock has moved on by 480 ticks.
  const Nanos now = kStart + 49 * 20 * kMs + 10 * kMs;
  const RtcpSenderInfo info =
      stats.make_sender_info(NtpTime::from_unix_nanos(1'700'000'000'000'000'000), now);
  EXPECT_EQ(info.ssrc, 0x11223344u);
  EXPECT_EQ(info.packet_count, 50u);
  EXPECT_EQ(info.octet_count, 4000u);
  EXPECT_EQ(info.rtp_timestamp, 1000u + 960u * 49 + 480);
  EXPECT_EQ(info.ntp, NtpTime::from_unix_nanos(1'700'000'000'000'000'000));
}

TEST(SendStatsTest, RttFromCraftedReceiverReport) {
  SendStats stats(0x11223344, kOpusRate);
  const NtpTime wall = NtpTime::from_unix_nanos(1'700'000'000'123'000'000);
  stats.make_sender_info(wall, kStart);
  // The remote held our SR for exactly 1 s (DLSR 65536) and its report arrives 1.05 s
  // after we sent the SR: 50 ms of round trip.
  RtcpReportBlock block{0x11223344, 64, 12, 5000, 480, wall.middle32(), 65536};
  const auto rtt = stats.on_report_block(block, kStart + 1050 * kMs);
  ASSERT_TRUE(rtt);
  EXPECT_EQ(*rtt, 50 * kMs);
  EXPECT_EQ(stats.last_rtt(), 50 * kMs);
  EXPECT_DOUBLE_EQ(stats.remote_fraction_lost(), 0.25);
  EXPECT_EQ(stats.remote_cumulative_lost(), 12);
  EXPECT_DOUBLE_EQ(stats.remote_jitter_ms(), 10.0);

  // Blocks about another source, without LSR, or echoing an unknown SR give no RTT.
  block.ssrc = 0x99;
  EXPECT_FALSE(stats.on_report_block(block, kStart + 1100 * kMs));
  block.ssrc = 0x11223344;
  block.lsr = 0;
  EXPECT_FALSE(stats.on_report_block(block, kStart + 1100 * kMs));
  block.lsr = wall.middle32() + 1;
  EXPECT_FALSE(stats.on_report_block(block, kStart + 1100 * kMs));
}

TEST(SendStatsTest, RttEndToEndThroughBuiltAndParsedRtcp) {
  // Our SR travels 20 ms, the remote answers after 100 ms, its RR travels 30 ms back.
  SendStats local(0xAAAA0001, kOpusRate);
  ReceiveStats remote(kOpusRate);
  local.on_packet_sent(60, 0, kStart);
  remote.update(1, 0, kStart + 20 * kMs);

  std::array<uint8_t, kMaxBuiltRtcpSize> buffer{};
  const RtcpSenderInfo info =
      local.make_sender_info(NtpTime::from_unix_nanos(1'700'000'000'000'000'000), kStart);
  size_t n = build_sr_sdes(buffer, info, nullptr, "local");
  RtcpCompound parsed;
  ASSERT_EQ(parse_rtcp_compound(std::span(buffer.data(), n), parsed), RtcpParseError::ok);
  remote.on_sender_report(*parsed.sender_info, kStart + 20 * kMs);

  const RtcpReportBlock block = remote.make_report_block(0xAAAA0001, kStart + 120 * kMs);
  n = build_rr_sdes(buffer, 0xBBBB0002, &block, "remote");
  ASSERT_EQ(parse_rtcp_compound(std::span(buffer.data(), n), parsed), RtcpParseError::ok);
  const auto rtt = local.on_report_block(parsed.blocks()[0], kStart + 150 * kMs);
  ASSERT_TRUE(rtt);
  // DLSR is truncated to 1/65536 s, so the RTT may read up to ~15 us long.
  EXPECT_NEAR(static_cast<double>(*rtt), 50.0 * kMs, 20'000);
}

}  // namespace
}  // namespace rtce
