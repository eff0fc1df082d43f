// rtcp_test.cpp — RTCP compound parsing of Chrome-shaped packets (checked against aiortc's
// parser when written), the SR/RR builders, truncation and padding rules, NTP time.
#include "rtp/rtcp.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace rtce {
namespace {

std::vector<uint8_t> hex(const std::string& text) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < text.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

// What Chrome sends for an audio sender: SR without report blocks + SDES CNAME.
const std::vector<uint8_t> kChromeSrSdes =
    hex("80c800061a2b3c4de9b2c4a18f5c28f60003e8400000003200000fa0"
        "81ca00061a2b3c4d01106b35597a33426651397652326d5877310000");
// A receiver's compound: RR with one block + SDES CNAME + REMB (PSFB FMT 15) at 300 kbps.
const std::vector<uint8_t> kChromeRrSdesRemb =
    hex("81c900075e6f7081cafebabe0c0000050001ffff00000060c4a18f5c00010000"
        "81ca00065e6f708101106b35597a33426651397652326d5877310000"
        "8fce00055e6f70810000000052454d42010649f0cafebabe");

TEST(RtcpParse, ChromeSenderReportAndSdes) {
  RtcpCompound c;
  ASSERT_EQ(parse_rtcp_compound(kChromeSrSdes, c), RtcpParseError::ok);
  EXPECT_EQ(c.sr_count, 1u);
  EXPECT_EQ(c.sdes_count, 1u);
  ASSERT_TRUE(c.sender_info);
  EXPECT_EQ(c.sender_info->ssrc, 0x1a2b3c4du);
  EXPECT_EQ(c.sender_info->ntp.seconds, 0xe9b2c4a1u);
  EXPECT_EQ(c.sender_info->ntp.fraction, 0x8f5c28f6u);
  EXPECT_EQ(c.sender_info->rtp_timestamp, 256064u);
  EXPECT_EQ(c.sender_info->packet_count, 50u);
  EXPECT_EQ(c.sender_info->octet_count, 4000u);
  EXPECT_EQ(c.reporter_ssrc, 0x1a2b3c4du);
  EXPECT_EQ(c.report_block_count, 0u);
  EXPECT_EQ(c.cname(), "k5Yz3BfQ9vR2mXw1");
  EXPECT_EQ(c.cname_ssrc, 0x1a2b3c4du);
}

TEST(RtcpParse, ChromeReceiverReportSdesAndRemb) {
  RtcpCompound c;
  ASSERT_EQ(parse_rtcp_compound(kChromeRrSdesRemb, c), RtcpParseError::ok);
  EXPECT_FALSE(c.sender_info);
  EXPECT_EQ(c.rr_count, 1u);
  EXPECT_EQ(c.reporter_ssrc, 0x5e6f7081u);
  ASSERT_EQ(c.report_block_count, 1u);
  const RtcpReportBlock& b = c.blocks()[0];
  EXPECT_EQ(b.ssrc, 0xcafebabeu);
  EXPECT_EQ(b.fraction_lost, 12);
  EXPECT_EQ(b.cumulative_lost, 5);
  EXPECT_EQ(b.ext_highest_seq, 131071u);
  EXPECT_EQ(b.jitter, 96u);
  EXPECT_EQ(b.lsr, 0xc4a18f5cu);
  EXPECT_EQ(b.dlsr, 65536u);
  EXPECT_EQ(c.cname(), "k5Yz3BfQ9vR2mXw1");
  ASSERT_TRUE(c.remb_bitrate_bps);
  EXPECT_EQ(*c.remb_bitrate_bps, 300000u);
}

TEST(RtcpParse, FeedbackAndExtendedReportsAreCountedAndSkipped) {
  // Reduced-size (RFC 5506): transport-cc, NACK, PLI and an XR RRTR block, no SR/RR first,
  // then a BYE with two sources and a reason.
  const auto packet =
      hex("8fcd0004"
          "5e6f7081"
          "cafebabe"
          "0001"
          "0002"
          "000a1b2c"  // RTPFB FMT 15 (transport-cc)
          "81cd0003"
          "5e6f7081"
          "cafebabe"
          "00070003"  // RTPFB FMT 1 (NACK)
          "81ce0002"
          "5e6f7081"
          "cafebabe"  // PSFB FMT 1 (PLI)
          "80cf0004"
          "5e6f7081"
          "04000002"
          "e9b2c4a18f5c28f6"  // XR RRTR
          "82cb0003"
          "5e6f7081"
          "cafebabe"
          "03627965");  // BYE + "bye"
  RtcpCompound c;
  ASSERT_EQ(parse_rtcp_compound(packet, c), RtcpParseError::ok);
  EXPECT_EQ(c.transport_cc_count, 1u);
  EXPECT_EQ(c.nack_count, 1u);
  EXPECT_EQ(c.pli_count, 1u);
  EXPECT_EQ(c.xr_count, 1u);
  EXPECT_EQ(c.bye_count, 1u);
  ASSERT_EQ(c.bye_ssrc_count, 2u);
  EXPECT_EQ(c.bye_ssrcs[1], 0xcafebabeu);
  EXPECT_EQ(c.report_block_count, 0u);
}

TEST(RtcpParse, TruncationOnlyParsesAtPacketBoundaries) {
  const std::vector<size_t> boundaries = {32, 60};  // after the RR, after the SDES
  for (size_t n = 0; n < kChromeRrSdesRemb.size(); ++n) {
    RtcpCompound c;
    const RtcpParseError e = parse_rtcp_compound(std::span(kChromeRrSdesRemb.data(), n), c);
    const bool boundary = std::find(boundaries.begin(), boundaries.end(), n) != boundaries.end();
    EXPECT_EQ(e == RtcpParseError::ok, boundary) << "cut at " << n;
  }
}

TEST(RtcpParse, RejectsBadVersionLengthAndPadding) {
  RtcpCompound c;
  EXPECT_EQ(parse_rtcp_compound({}, c), RtcpParseError::empty);
  auto bad = kChromeSrSdes;
  bad[0] = 0x40;
  EXPECT_EQ(parse_rtcp_compound(bad, c), RtcpParseError::bad_version);
  bad = kChromeSrSdes;
  bad[0] = 0x81;  // SR claims a report block its length does not hold
  EXPECT_EQ(parse_rtcp_compound(bad, c), RtcpParseError::bad_length);
  bad = kChromeSrSdes;
  bad[0] |= 0x20;  // padding on the first of two packets
  EXPECT_EQ(parse_rtcp_compound(bad, c), RtcpParseError::bad_padding);
  bad = kChromeSrSdes;
  bad[3] = 0x07;  // SR length swallows the SDES header: garbage follows
  EXPECT_NE(parse_rtcp_compound(bad, c), RtcpParseError::ok);
}

TEST(RtcpParse, PaddingOnTheLastPacketIsHonoured) {
  // RR without blocks, padded with 4 bytes (count 4 in the last byte).
  const auto packet =
      hex("a0c90002"
          "5e6f7081"
          "00000004");
  RtcpCompound c;
  ASSERT_EQ(parse_rtcp_compound(packet, c), RtcpParseError::ok);
  EXPECT_EQ(c.rr_count, 1u);
  auto over = packet;
  over.back() = 9;  // more padding than the packet body
  EXPECT_EQ(parse_rtcp_compound(over, c), RtcpParseError::bad_padding);
}

TEST(RtcpParse, ReportBlocksBeyondCapacityAreCountedNotStored) {
  std::vector<uint8_t> packet =
      hex("9fc9"
          "00"
          "00"
          "5e6f7081");  // RR, RC=31
  packet[3] = static_cast<uint8_t>(1 + 31 * 6);
  for (int i = 0; i < 31; ++i) {
    const auto block =
        hex("0000000100000000000000000000000000000000"
            "00000000");
    packet.insert(packet.end(), block.begin(), block.end());
  }
  RtcpCompound c;
  ASSERT_EQ(parse_rtcp_compound(packet, c), RtcpParseError::ok);
  EXPECT_EQ(c.report_block_count, RtcpCompound::kMaxReportBlocks);
  EXPECT_EQ(c.report_blocks_dropped, 31 - RtcpCompound::kMaxReportBlocks);
}

TEST(RtcpBuild, SenderReportThenParse) {
  RtcpSenderInfo info;
  info.ssrc = 0x11223344;
  info.ntp = NtpTime{0xe9b2c4a1, 0x8f5c28f6};
  info.rtp_timestamp = 960 * 50;
  info.packet_count = 50;
  info.octet_count = 50 * 80;
  std::array<uint8_t, kMaxBuiltRtcpSize> out{};
  const size_t n = build_sr_sdes(out, info, nullptr, "rtcedge-transceiver");
  ASSERT_GT(n, 0u);
  EXPECT_EQ(n % 4, 0u);
  RtcpCompound c;
  ASSERT_EQ(parse_rtcp_compound(std::span(out.data(), n), c), RtcpParseError::ok);
  ASSERT_TRUE(c.sender_info);
  EXPECT_EQ(c.sender_info->ssrc, info.ssrc);
  EXPECT_EQ(c.sender_info->ntp, info.ntp);
  EXPECT_EQ(c.sender_info->rtp_timestamp, info.rtp_timestamp);
  EXPECT_EQ(c.sender_info->packet_count, 50u);
  EXPECT_EQ(c.sender_info->octet_count, 4000u);
  EXPECT_EQ(c.cname(), "rtcedge-transceiver");
  EXPECT_EQ(c.cname_ssrc, info.ssrc);

  // With a report block, and a too-small buffer fails cleanly.
  RtcpReportBlock block{0xcafebabe, 25, 7, 70000, 123, 0x12345678, 0x9abc};
  const size_t with_block = build_sr_sdes(out, info, &block, "x");
  ASSERT_EQ(parse_rtcp_compound(std::span(out.data(), with_block), c), RtcpParseError::ok);
  ASSERT_EQ(c.report_block_count, 1u);
  EXPECT_EQ(c.blocks()[0].ext_highest_seq, 70000u);
  EXPECT_EQ(build_sr_sdes(std::span(out.data(), 40), info, nullptr, "rtcedge"), 0u);
}

TEST(RtcpBuild, ReceiverReportThenParseKeepsNegativeLoss) {
  RtcpReportBlock block{0xcafebabe, 0, -3, 65536 + 10, 96, 0xc4a18f5c, 6553};
  std::array<uint8_t, kMaxBuiltRtcpSize> out{};
  const size_t n = build_rr_sdes(out, 0x5e6f7081, &block, std::string(100, 'c'));  // cut to 64
  ASSERT_GT(n, 0u);
  RtcpCompound c;
  ASSERT_EQ(parse_rtcp_compound(std::span(out.data(), n), c), RtcpParseError::ok);
  EXPECT_EQ(c.reporter_ssrc, 0x5e6f7081u);
  ASSERT_EQ(c.report_block_count, 1u);
  const RtcpReportBlock& b = c.blocks()[0];
  EXPECT_EQ(b.ssrc, block.ssrc);
  EXPECT_EQ(b.cumulative_lost, -3);
  EXPECT_EQ(b.ext_highest_seq, block.ext_highest_seq);
  EXPECT_EQ(b.jitter, 96u);
  EXPECT_EQ(b.lsr, block.lsr);
  EXPECT_EQ(b.dlsr, 6553u);
  EXPECT_EQ(c.cname().size(), kMaxBuiltCname);

  const size_t empty = build_rr_sdes(out, 0x5e6f7081, nullptr, "c");
  ASSERT_EQ(parse_rtcp_compound(std::span(out.data(), empty), c), RtcpParseError::ok);
  EXPECT_EQ(c.rr_count, 1u);
  EXPECT_EQ(c.report_block_count, 0u);
}

TEST(NtpTimeTest, FromUnixNanos) {
  const NtpTime epoch = NtpTime::from_unix_nanos(0);
  EXPECT_EQ(epoch.seconds, 2'208'988'800u);
  EXPECT_EQ(epoch.fraction, 0u);
  const NtpTime t = NtpTime::from_unix_nanos(1'700'000'000'500'000'000);
  EXPECT_EQ(t.seconds, static_cast<uint32_t>(1'700'000'000ull + 2'208'988'800ull));
  EXPECT_EQ(t.fraction, 0x80000000u);
  EXPECT_EQ(t.middle32(), ((t.seconds & 0xFFFF) << 16) | 0x8000u);
  EXPECT_EQ(NtpTime::from_u64(t.as_u64()), t);
}

}  // namespace
}  // namespace rtce
