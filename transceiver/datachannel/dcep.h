// dcep.h — the Data Channel Establishment Protocol (RFC 8832): the DATA_CHANNEL_OPEN a
// browser sends in-band on a new SCTP stream, and the DATA_CHANNEL_ACK the answerer returns.
// Socket-free codec over bytes; SCTP (PPID 50 carries these) is the caller's business.
//
//   OPEN: type 0x03 | channel type (1) | priority (2) | reliability parameter (4)
//         | label length (2) | protocol length (2) | label | protocol      (big-endian)
//   ACK:  type 0x02
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "vocab.h"

namespace rtce {

// SCTP payload protocol identifiers of WebRTC data channels (RFC 8831 §8).
inline constexpr uint32_t kPpidDcep = 50;
inline constexpr uint32_t kPpidString = 51;
inline constexpr uint32_t kPpidBinary = 53;
inline constexpr uint32_t kPpidStringEmpty = 56;
inline constexpr uint32_t kPpidBinaryEmpty = 57;

inline constexpr uint8_t kDcepOpen = 0x03;
inline constexpr uint8_t kDcepAck = 0x02;
inline constexpr size_t kDcepOpenHeaderBytes = 12;
// Labels and protocols longer than this are refused: browsers cap them at 65535, but no
// voice-agent channel needs more than a short name, and the session keeps a copy.
inline constexpr size_t kDcepMaxLabelBytes = 1024;

// RFC 8832 §5.1 channel types. The high bit set means unordered.
enum class DcepChannelType : uint8_t {
  reliable = 0x00,
  partial_reliable_rexmit = 0x01,
  partial_reliable_timed = 0x02,
  reliable_unordered = 0x80,
  partial_reliable_rexmit_unordered = 0x81,
  partial_reliable_timed_unordered = 0x82,
};

#define RTCE_DCEP_ERRORS(X)                                                         \
  X(empty, "the DCEP message is empty")                                             \
  X(unknown_message_type, "the DCEP message type is neither OPEN nor ACK")          \
  X(truncated, "the OPEN is shorter than its header and lengths say")               \
  X(trailing_bytes, "the OPEN is longer than its header and lengths say")           \
  X(unknown_channel_type, "the OPEN names a channel type RFC 8832 does not define") \
  X(label_too_long, "the OPEN's label or protocol is longer than 1024 bytes")

RTCE_DECLARE_NAMED_VOCAB(DcepError, RTCE_DCEP_ERRORS, dcep_error_name);

struct DcepOpen {
  DcepChannelType channel_type = DcepChannelType::reliable;
  uint16_t priority = 0;
  uint32_t reliability = 0;  // retransmissions or lifetime in ms, per the channel type
  std::string_view label;    // views into the parsed bytes
  std::string_view protocol;
  bool ordered() const { return (static_cast<uint8_t>(channel_type) & 0x80) == 0; }
};

struct DcepMessage {
  std::optional<DcepError> error;
  uint8_t type = 0;  // kDcepOpen or kDcepAck when no error
  DcepOpen open;     // when type == kDcepOpen
};

DcepMessage parse_dcep(std::span<const uint8_t> bytes);

// Writes an OPEN into `out`; returns the bytes written, or 0 if `out` is too small or a
// label/protocol is longer than kDcepMaxLabelBytes.
size_t write_dcep_open(const DcepOpen& open, std::span<uint8_t> out);

}  // namespace rtce
