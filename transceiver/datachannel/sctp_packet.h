// sctp_packet.h — a socket-free pre-check of an SCTP packet (RFC 9260 §3) before it reaches
// usrsctp: the common header, the CRC32c checksum and a walk of the chunk list (lengths,
// padding, at least one chunk). usrsctp parses again; this check exists so that malformed
// input is a counted drop with a reason, and so that a fuzzer can target the framing alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>

#include "vocab.h"

namespace rtce {

inline constexpr size_t kSctpCommonHeaderBytes = 12;
inline constexpr size_t kSctpChunkHeaderBytes = 4;

#define RTCE_SCTP_PACKET_ERRORS(X)                                                    \
  X(too_short, "the packet is shorter than the 12-byte SCTP common header")           \
  X(zero_port, "a source or destination port is 0")                                   \
  X(no_chunks, "the packet has a common header and no chunk")                         \
  X(truncated_chunk_header, "fewer than 4 bytes remain where a chunk header must be") \
  X(chunk_too_short, "a chunk's length is below its own 4-byte header")               \
  X(chunk_overruns_packet, "a chunk's length runs past the end of the packet")        \
  X(bad_padding, "bytes follow a chunk that are neither its padding nor a new chunk") \
  X(bad_checksum, "the CRC32c checksum does not match the packet")

RTCE_DECLARE_MESSAGE_VOCAB(SctpPacketError, RTCE_SCTP_PACKET_ERRORS, sctp_packet_error_name,
                           sctp_packet_error_message);
inline constexpr const char* kSctpPacketErrorLabels[] = {RTCE_SCTP_PACKET_ERRORS(RTCE_VOCAB_MESSAGE_LABEL)};
inline constexpr size_t kSctpPacketErrorCount = std::size(kSctpPacketErrorLabels);

struct SctpPacketCheck {
  std::optional<SctpPacketError> error;
  uint16_t source_port = 0, destination_port = 0;
  uint32_t verification_tag = 0;
  size_t chunks = 0;
  uint8_t first_chunk_type = 0;
};

// verify_checksum=false checks the framing only (the fuzzer's mode; usrsctp checks again).
SctpPacketCheck check_sctp_packet(std::span<const uint8_t> packet, bool verify_checksum = true);

// The RFC 9260 Appendix A checksum of `packet` with its checksum field taken as zero, in the
// byte order it is stored in (bytes 8..11 little-endian as usrsctp writes them).
uint32_t sctp_checksum(std::span<const uint8_t> packet);
// Writes sctp_checksum into bytes 8..11 (tests and fuzzers craft packets with it).
void set_sctp_checksum(std::span<uint8_t> packet);

}  // namespace rtce
