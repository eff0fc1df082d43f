// sctp_packet.cpp — see sctp_packet.h.
#include "sctp_packet.h"

#include <array>

#include "byte_order.h"

namespace rtce {
namespace {

constexpr const char* kErrorMessages[] = {RTCE_SCTP_PACKET_ERRORS(RTCE_VOCAB_MESSAGE_TEXT)};

// CRC32c (Castagnoli), reflected polynomial 0x82F63B78, one table lookup per byte: the
// data-channel path carries a few packets per event, not line rate, so no SSE4.2 here.
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32c = make_crc32c_table();

uint32_t crc32c_update(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = kCrc32c[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

std::string_view sctp_packet_error_name(SctpPacketError error) {
  return vocab_name(kSctpPacketErrorLabels, error);
}
std::string_view sctp_packet_error_message(SctpPacketError error) {
  return vocab_name(kErrorMessages, error);
}

uint32_t sctp_checksum(std::span<const uint8_t> packet) {
  if (packet.size() < kSctpCommonHeaderBytes) return 0;
  static constexpr uint8_t kZero[4] = {0, 0, 0, 0};
  uint32_t crc = 0xffffffffu;
  crc = crc32c_update(crc, packet.data(), 8);
  crc = crc32c_update(crc, kZero, 4);
  crc = crc32c_update(crc, packet.data() + kSctpCommonHeaderBytes, packet.size() - kSctpCommonHeaderBytes);
  return ~crc;
}

void set_sctp_checksum(std::span<uint8_t> packet) {
  if (packet.size() < kSctpCommonHeaderBytes) return;
  const uint32_t crc = sctp_checksum(packet);
  for (int i = 0; i < 4; ++i) packet[8 + i] = static_cast<uint8_t>(crc >> (8 * i));
}

SctpPacketCheck check_sctp_packet(std::span<const uint8_t> packet, bool verify_checksum) {
  SctpPacketCheck c;
  if (packet.size() < kSctpCommonHeaderBytes) {
    c.error = SctpPacketError::too_short;
    return c;
  }
  const uint8_t* p = packet.data();
  c.source_port = load_be16(p);
  c.destination_port = load_be16(p + 2);
  c.verification_tag = load_be32(p + 4);
  if (c.source_port == 0 || c.destination_port == 0) {
    c.error = SctpPacketError::zero_port;
    return c;
  }
  size_t off = kSctpCommonHeaderBytes;
  if (off == packet.size()) {
    c.error = SctpPacketError::no_chunks;
    return c;
  }
  while (off < packet.size()) {
    if (packet.size() - off < kSctpChunkHeaderBytes) {
      c.error = SctpPacketError::truncated_chunk_header;
      return c;
    }
    const size_t length = load_be16(p + off + 2);
    if (length < kSctpChunkHeaderBytes) {
      c.error = SctpPacketError::chunk_too_short;
      return c;
    }
    if (length > packet.size() - off) {
      c.error = SctpPacketError::chunk_overruns_packet;
      return c;
    }
    if (c.chunks++ == 0) c.first_chunk_type = p[off];
    const size_t padded = (length + 3) & ~size_t{3};
    const size_t end = off + length;
    // RFC 9260 §3.2: padding is at most 3 zero bytes; a last chunk may arrive unpadded.
    if (padded > packet.size() - off) {
      off = packet.size();
      if (end != packet.size()) {
        c.error = SctpPacketError::bad_padding;
        return c;
      }
      break;
    }
    for (size_t i = end; i < off + padded; ++i) {
      if (p[i] != 0) {
        c.error = SctpPacketError::bad_padding;
        return c;
      }
    }
    off += padded;
  }
  if (verify_checksum && sctp_checksum(packet) != load_le32(p + 8)) c.error = SctpPacketError::bad_checksum;
  return c;
}

}  // namespace rtce
