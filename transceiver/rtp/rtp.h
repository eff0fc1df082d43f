// rtp.h — RTP packet parsing and header writing (RFC 3550 §5.1, header extensions RFC 8285,
// audio level RFC 6464) and the RTP/RTCP demux of RFC 5761. Pure functions over spans:
// every read is bounds-checked, nothing allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rtce {

inline constexpr size_t kRtpHeaderSize = 12;

struct RtpView {
  uint8_t payload_type = 0;
  bool marker = false;
  uint16_t seq = 0;
  uint32_t timestamp = 0;
  uint32_t ssrc = 0;
  std::span<const uint8_t> payload;  // points into the parsed packet, padding removed
  // RFC 6464 level in -dBov (0 = loudest, 127 = silence), when the extension id was given
  // and the packet carries it; voice_activity is its V bit.
  std::optional<uint8_t> audio_level;
  bool voice_activity = false;
};

// nullopt for anything that is not a well-formed RTP v2 packet: truncated header, CSRC
// list or extension block, a padding count larger than the payload, or a zero padding count.
std::optional<RtpView> parse_rtp(std::span<const uint8_t> packet,
                                 std::optional<uint8_t> audio_level_ext_id = std::nullopt);

// Writes a 12-byte header (no CSRC, no extension, no padding); returns 12, or 0 when `out`
// is shorter than that.
size_t write_rtp_header(std::span<uint8_t> out, uint8_t payload_type, bool marker, uint16_t seq,
                        uint32_t timestamp, uint32_t ssrc);

// RFC 5761 §4: on a muxed port, a second byte of 192..223 (RTCP packet types 64..95 with
// the marker bit) is RTCP; everything else with version 2 is RTP.
bool is_rtcp(std::span<const uint8_t> packet);

}  // namespace rtce
