// rtp_test.cpp — RTP header parse/write, RFC 8285 header extensions, padding, truncation,
// and the RFC 5761 RTP/RTCP demux.
#include "rtp/rtp.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace rtce {
namespace {

std::vector<uint8_t> bytes(std::initializer_list<int> values) {
  std::vector<uint8_t> out;
  for (int v : values) out.push_back(static_cast<uint8_t>(v));
  return out;
}

// A Chrome-style Opus packet: CC=2, one-byte extensions (ssrc-audio-level id 1 with V set
// and level 30, a padding byte, transport-wide-cc id 3 with 2 bytes), then the payload and
// 3 bytes of RTP padding.
std::vector<uint8_t> chrome_like_packet() {
  return bytes({0xB2, 0xEF,      0xFF, 0xFE, 0x00, 0x01, 0xE2, 0x40, 0xCA, 0xFE, 0xBA, 0xBE,  // header
                0x11, 0x11,      0x11, 0x11, 0x22, 0x22, 0x22, 0x22,                          // 2 CSRC
                0xBE, 0xDE,      0x00, 0x02,                                                  // 2 words
                0x10, 0x80 | 30, 0x00, 0x31, 0x12, 0x34, 0x00, 0x00,                          // elements
                0xF8, 0xFF,      0xFE,                                                        // Opus
                0x00, 0x00,      0x03});                                                      // padding
}

TEST(RtpParse, WriteThenParseRoundTrip) {
  std::array<uint8_t, 16> packet{};
  ASSERT_EQ(write_rtp_header(packet, 111, true, 65535, 0xDEADBEEF, 0x01020304), kRtpHeaderSize);
  packet[12] = 0xF8;
  const auto view = parse_rtp(packet);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->payload_type, 111);
  EXPECT_TRUE(view->marker);
  EXPECT_EQ(view->seq, 65535);
  EXPECT_EQ(view->timestamp, 0xDEADBEEFu);
  EXPECT_EQ(view->ssrc, 0x01020304u);
  ASSERT_EQ(view->payload.size(), 4u);
  EXPECT_EQ(view->payload.data(), packet.data() + 12);
  EXPECT_FALSE(view->audio_level);
}

TEST(RtpParse, WriteRefusesShortBuffer) {
  std::array<uint8_t, 11> small{};
  EXPECT_EQ(write_rtp_header(small, 111, false, 1, 2, 3), 0u);
}

TEST(RtpParse, CsrcOneByteExtensionsAndPadding) {
  const auto packet = chrome_like_packet();
  const auto view = parse_rtp(packet, 1);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->payload_type, 111);
  EXPECT_TRUE(view->marker);
  EXPECT_EQ(view->seq, 0xFFFE);
  EXPECT_EQ(view->timestamp, 0x0001E240u);
  EXPECT_EQ(view->ssrc, 0xCAFEBABEu);
  ASSERT_TRUE(view->audio_level);
  EXPECT_EQ(*view->audio_level, 30);
  EXPECT_TRUE(view->voice_activity);
  ASSERT_EQ(view->payload.size(), 3u);
  EXPECT_EQ(view->payload[0], 0xF8);
  EXPECT_EQ(view->payload[2], 0xFE);
}

TEST(RtpParse, AudioLevelOnlyWithItsId) {
  const auto packet = chrome_like_packet();
  EXPECT_FALSE(parse_rtp(packet)->audio_level);
  EXPECT_FALSE(parse_rtp(packet, 2)->audio_level);
  // Id 3 is the 2-byte transport-cc element: its first byte is taken as the level.
  EXPECT_EQ(parse_rtp(packet, 3)->audio_level, 0x12);
}

TEST(RtpParse, TwoByteExtensions) {
  const auto packet = bytes({0x90, 0x6F, 0x00, 0x07, 0, 0, 0, 160, 0, 0, 0, 9,  //
                             0x10, 0x00, 0x00, 0x02,                            // profile 0x100, 2 words
                             0x05, 0x02, 0xAA, 0xBB,                            // id 5, len 2
                             0x01, 0x01, 0x7F, 0x00,                            // id 1, len 1, pad
                             0x01, 0x02});
  const auto view = parse_rtp(packet, 1);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->audio_level, 0x7F);
  EXPECT_FALSE(view->voice_activity);
  EXPECT_FALSE(view->marker);
  ASSERT_EQ(view->payload.size(), 2u);
  EXPECT_EQ(view->payload[1], 0x02);
}

TEST(RtpParse, OneByteStopIdEndsTheWalk) {
  // Id 15 stops processing: a later element with the wanted id is not read.
  const auto packet = bytes({0x90, 0x6F, 0,    1,    0,    0,    0,    0,    0,   0, 0, 1,  //
                             0xBE, 0xDE, 0x00, 0x01, 0xF0, 0x10, 0x55, 0x00, 0xAB});
  const auto view = parse_rtp(packet, 1);
  ASSERT_TRUE(view);
  EXPECT_FALSE(view->audio_level);
  EXPECT_EQ(view->payload.size(), 1u);
}

TEST(RtpParse, ExtensionElementOverrunIsRejected) {
  // Element id 1 claims 4 bytes but only 3 remain in the one-word block.
  const auto packet = bytes({0x90, 0x6F, 0,    1,    0,    0,    0,    0,    0,   0, 0, 1,  //
                             0xBE, 0xDE, 0x00, 0x01, 0x13, 0x01, 0x02, 0x03, 0xAB});
  EXPECT_FALSE(parse_rtp(packet, 1));
}

TEST(RtpParse, UnknownExtensionProfileIsSkipped) {
  const auto packet = bytes({0x90, 0x6F, 0,    1,    0,    0,    0,    0,    0,   0, 0, 1,  //
                             0xAB, 0xCD, 0x00, 0x01, 0x13, 0x01, 0x02, 0x03, 0xAB});
  const auto view = parse_rtp(packet, 1);
  ASSERT_TRUE(view);
  EXPECT_FALSE(view->audio_level);
  EXPECT_EQ(view->payload.size(), 1u);
}

TEST(RtpParse, BadPaddingAndVersionAreRejected) {
  auto packet = bytes({0xA0, 0x6F, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xAB, 0x00, 0x02});
  ASSERT_TRUE(parse_rtp(packet));
  EXPECT_EQ(parse_rtp(packet)->payload.size(), 1u);
  packet.back() = 0;  // a zero padding count
  EXPECT_FALSE(parse_rtp(packet));
  packet.back() = 4;  // more padding than payload
  EXPECT_FALSE(parse_rtp(packet));
  packet.back() = 3;  // exactly the payload: empty payload is legal
  ASSERT_TRUE(parse_rtp(packet));
  EXPECT_TRUE(parse_rtp(packet)->payload.empty());
  packet[0] = 0x60;  // version 1
  EXPECT_FALSE(parse_rtp(packet));
}

TEST(RtpParse, TruncationAtEveryOffset) {
  const auto packet = chrome_like_packet();
  constexpr size_t kHeaderEnd = 12 + 8 + 4 + 8;
  for (size_t n = 0; n < packet.size(); ++n) {
    const std::span<const uint8_t> cut(packet.data(), n);
    const auto view = parse_rtp(cut, 1);
    if (n < kHeaderEnd) {
      EXPECT_FALSE(view) << "cut at " << n;
      continue;
    }
    // Past the header the cut lands in payload or padding: the padding count (the last
    // byte) decides, and the payload must stay inside the cut.
    if (view) {
      EXPECT_LE(view->payload.data() + view->payload.size(), cut.data() + n) << n;
      EXPECT_GE(view->payload.data(), cut.data() + kHeaderEnd) << n;
    }
  }
  // Without padding, every cut after the header is a shorter valid payload.
  auto plain = packet;
  plain[0] &= ~0x20;
  for (size_t n = kHeaderEnd; n <= plain.size(); ++n) {
    const auto view = parse_rtp(std::span<const uint8_t>(plain.data(), n), 1);
    ASSERT_TRUE(view) << n;
    EXPECT_EQ(view->payload.size(), n - kHeaderEnd);
  }
}

TEST(RtpDemux, Rfc5761PayloadTypeRanges) {
  EXPECT_TRUE(is_rtcp(bytes({0x80, 200, 0, 6})));  // SR
  EXPECT_TRUE(is_rtcp(bytes({0x81, 201, 0, 7})));  // RR
  EXPECT_TRUE(is_rtcp(bytes({0x8F, 206, 0, 5})));  // PSFB
  EXPECT_TRUE(is_rtcp(bytes({0x80, 223})));
  EXPECT_FALSE(is_rtcp(bytes({0x80, 111})));         // Opus
  EXPECT_FALSE(is_rtcp(bytes({0x80, 0x80 | 111})));  // Opus with marker (239)
  EXPECT_FALSE(is_rtcp(bytes({0x80, 191})));         // PT 63 with marker
  EXPECT_FALSE(is_rtcp(bytes({0x80, 224})));
  EXPECT_FALSE(is_rtcp(bytes({0x40, 200})));  // not version 2
  EXPECT_FALSE(is_rtcp(bytes({0x80})));
}

}  // namespace
}  // namespace rtce
