// sctp_packet_test.cpp — the SCTP pre-check against hand-built packets: each framing error
// by name, padding rules, the CRC32c against RFC 3720's test vector and a fixed packet.
#include "sctp_packet.h"

#include <gtest/gtest.h>

#include <vector>

namespace rtce {
namespace {

// Common header 5000 -> 5000, tag 0x01020304, then the chunks, with a correct checksum.
std::vector<uint8_t> packet(std::vector<uint8_t> chunks) {
  std::vector<uint8_t> p = {0x13, 0x88, 0x13, 0x88, 1, 2, 3, 4, 0, 0, 0, 0};
  p.insert(p.end(), chunks.begin(), chunks.end());
  set_sctp_checksum(p);
  return p;
}

std::optional<SctpPacketError> error_of(const std::vector<uint8_t>& p) { return check_sctp_packet(p).error; }

TEST(SctpPacket, AcceptsWellFormedChunkLists) {
  // A 4-byte COOKIE ACK, then a DATA-like chunk of length 5 padded with three zeros.
  const auto p = packet({11, 0, 0, 4, 0, 0, 0, 5, 0xaa, 0, 0, 0});
  const auto c = check_sctp_packet(p);
  EXPECT_FALSE(c.error) << sctp_packet_error_name(*c.error);
  EXPECT_EQ(c.chunks, 2u);
  EXPECT_EQ(c.first_chunk_type, 11);
  EXPECT_EQ(c.source_port, 5000);
  EXPECT_EQ(c.verification_tag, 0x01020304u);
  // The last chunk's padding may be missing.
  EXPECT_FALSE(error_of(packet({0, 0, 0, 5, 0xaa})));
}

TEST(SctpPacket, NamesEachFramingError) {
  EXPECT_EQ(error_of({0x13, 0x88, 0x13, 0x88, 1, 2, 3}), SctpPacketError::too_short);
  auto zero = packet({11, 0, 0, 4});
  zero[0] = zero[1] = 0;
  set_sctp_checksum(zero);
  EXPECT_EQ(error_of(zero), SctpPacketError::zero_port);
  EXPECT_EQ(error_of(packet({})), SctpPacketError::no_chunks);
  EXPECT_EQ(error_of(packet({11, 0, 0, 4, 1, 2})), SctpPacketError::truncated_chunk_header);
  EXPECT_EQ(error_of(packet({11, 0, 0, 3})), SctpPacketError::chunk_too_short);
  EXPECT_EQ(error_of(packet({0, 0, 0, 9, 1, 2, 3, 4})), SctpPacketError::chunk_overruns_packet);
  EXPECT_EQ(error_of(packet({0, 0, 0, 5, 0xaa, 0, 7, 0})), SctpPacketError::bad_padding);
  EXPECT_EQ(error_of(packet({0, 0, 0, 5, 0xaa, 0})), SctpPacketError::bad_padding);
  auto bad = packet({11, 0, 0, 4});
  bad[8] ^= 1;
  EXPECT_EQ(error_of(bad), SctpPacketError::bad_checksum);
  EXPECT_FALSE(check_sctp_packet(bad, /*verify_checksum=*/false).error);
  EXPECT_EQ(sctp_packet_error_name(SctpPacketError::bad_padding), "bad_padding");
  EXPECT_FALSE(sctp_packet_error_message(SctpPacketError::no_chunks).empty());
}

TEST(SctpPacket, ChecksumIsCrc32cStoredLittleEndian) {
  // RFC 3720 B.4: CRC32c of 32 zero bytes is 0x8a9136aa. With the checksum field (bytes
  // 8..11) zero anyway, a 32-byte all-zero packet has exactly that checksum.
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(sctp_checksum(zeros), 0x8a9136aau);
  set_sctp_checksum(zeros);
  EXPECT_EQ(zeros[8], 0xaa);
  EXPECT_EQ(zeros[11], 0x8a);
}

TEST(SctpPacket, EveryTruncationOfAGoodPacketIsRefusedWithoutReadingPastIt) {
  const auto p = packet({11, 0, 0, 4, 0, 3, 0, 9, 1, 2, 3, 4, 5, 0, 0, 0});
  ASSERT_FALSE(error_of(p));
  for (size_t n = 0; n < p.size(); ++n) {
    std::vector<uint8_t> cut(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(n));
    // Only cuts at a chunk boundary (16) or right after the unpadded last chunk (25) frame.
    EXPECT_EQ(!check_sctp_packet(cut, false).error, n == 16 || n == 25) << n;
  }
}

}  // namespace
}  // namespace rtce
