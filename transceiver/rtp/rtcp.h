// rtcp.h — RTCP compound packets (RFC 3550 §6, reduced size RFC 5506): a bounded parser
// into a fixed-capacity struct (SR, RR, SDES CNAME, BYE; feedback and XR are counted and
// skipped, REMB is read) and builders for SR+SDES and RR+SDES. No allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace rtce {

// NTP timestamp (RFC 5905): seconds since 1900 and a 2^-32 fraction.
struct NtpTime {
  uint32_t seconds = 0;
  uint32_t fraction = 0;

  static NtpTime from_unix_nanos(int64_t unix_nanos);
  static NtpTime from_u64(uint64_t v) { return {static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)}; }
  uint64_t as_u64() const { return (static_cast<uint64_t>(seconds) << 32) | fraction; }
  // The "middle 32 bits" that RTCP report blocks echo as LSR (units of 1/65536 s).
  uint32_t middle32() const { return (seconds << 16) | (fraction >> 16); }
  bool operator==(const NtpTime&) const = default;
};

// CLOCK_REALTIME in nanoseconds since the Unix epoch: the wall clock an SR is stamped
// with. Components take it as an input; only the session reads it.
int64_t wall_now_unix_nanos();

namespace rtcp_type {
inline constexpr uint8_t kSenderReport = 200;
inline constexpr uint8_t kReceiverReport = 201;
inline constexpr uint8_t kSdes = 202;
inline constexpr uint8_t kBye = 203;
inline constexpr uint8_t kApp = 204;
inline constexpr uint8_t kTransportFeedback = 205;  // RTPFB: NACK, transport-cc
inline constexpr uint8_t kPayloadFeedback = 206;    // PSFB: PLI, FIR, REMB
inline constexpr uint8_t kExtendedReport = 207;     // XR
}  // namespace rtcp_type

struct RtcpReportBlock {
  uint32_t ssrc = 0;            // the source this block reports on
  uint8_t fraction_lost = 0;    // 8-bit fixed point: lost/expected * 256
  int32_t cumulative_lost = 0;  // 24-bit signed on the wire
  uint32_t ext_highest_seq = 0;
  uint32_t jitter = 0;  // RTP timestamp units
  uint32_t lsr = 0;     // middle 32 bits of the last SR's NTP time, 0 if none
  uint32_t dlsr = 0;    // delay since that SR, 1/65536 s
};

struct RtcpSenderInfo {
  uint32_t ssrc = 0;
  NtpTime ntp;
  uint32_t rtp_timestamp = 0;
  uint32_t packet_count = 0;
  uint32_t octet_count = 0;
};

struct RtcpCompound {
  static constexpr size_t kMaxReportBlocks = 16;
  static constexpr size_t kMaxByeSsrcs = 4;
  static constexpr size_t kMaxCnameLength = 255;

  std::optional<RtcpSenderInfo> sender_info;  // the first SR's
  uint32_t reporter_ssrc = 0;                 // sender of the first SR or RR
  std::array<RtcpReportBlock, kMaxReportBlocks> report_blocks{};
  size_t report_block_count = 0;
  size_t report_blocks_dropped = 0;  // beyond capacity

  uint32_t cname_ssrc = 0;
  std::array<char, kMaxCnameLength> cname_bytes{};
  size_t cname_length = 0;
  std::string_view cname() const { return {cname_bytes.data(), cname_length}; }

  std::array<uint32_t, kMaxByeSsrcs> bye_ssrcs{};
  size_t bye_ssrc_count = 0;

  std::optional<uint64_t> remb_bitrate_bps;

  uint32_t sr_count = 0, rr_count = 0, sdes_count = 0, bye_count = 0;
  uint32_t nack_count = 0, transport_cc_count = 0, pli_count = 0, fir_count = 0;
  uint32_t other_feedback_count = 0, xr_count = 0, app_count = 0, unknown_count = 0;

  std::span<const RtcpReportBlock> blocks() const { return {report_blocks.data(), report_block_count}; }
};

enum class RtcpParseError {
  ok,
  truncated,    // header or packet body shorter than it says
  bad_version,  // not RTCP version 2
  bad_length,   // a length that does not fit its packet type's fixed part
  bad_padding,  // padding on a packet that is not the last one, or a bad count
  empty,
};

// Parses every packet of a compound datagram (already decrypted). On an error the output
// holds what was read before it; callers should drop the whole datagram.
RtcpParseError parse_rtcp_compound(std::span<const uint8_t> datagram, RtcpCompound& out);

// Largest SDES CNAME the builders write; longer names are cut.
inline constexpr size_t kMaxBuiltCname = 64;
// Worst-case size of what the builders below produce.
inline constexpr size_t kMaxBuiltRtcpSize = 28 + 24 + 8 + (2 + kMaxBuiltCname + 1 + 3) / 4 * 4;

// SR (no report blocks, or one when `block` is given) followed by SDES CNAME. Returns the
// bytes written, or 0 when `out` is too small.
size_t build_sr_sdes(std::span<uint8_t> out, const RtcpSenderInfo& info, const RtcpReportBlock* block,
                     std::string_view cname);

// RR with zero or one report block followed by SDES CNAME. Returns bytes written or 0.
size_t build_rr_sdes(std::span<uint8_t> out, uint32_t sender_ssrc, const RtcpReportBlock* block,
                     std::string_view cname);

}  // namespace rtce
