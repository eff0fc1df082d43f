// rtcp.cpp — RTCP compound parse and SR/RR build; see rtcp.h.
#include "rtcp.h"

#include <algorithm>
#include <ctime>

#include "byte_order.h"

namespace rtce {
namespace {

constexpr uint32_t kNtpUnixOffsetSeconds = 2'208'988'800u;  // 1900-01-01 to 1970-01-01
constexpr size_t kHeaderSize = 4;
constexpr size_t kReportBlockSize = 24;
constexpr size_t kSenderInfoSize = 20;  // after the sender SSRC
constexpr uint8_t kSdesCname = 1;

RtcpReportBlock read_report_block(const uint8_t* p) {
  RtcpReportBlock b;
  b.ssrc = load_be32(p);
  b.fraction_lost = p[4];
  uint32_t lost = load_be24(p + 5);
  if (lost & 0x800000) lost |= 0xFF000000u;  // sign-extend the 24-bit field
  b.cumulative_lost = static_cast<int32_t>(lost);
  b.ext_highest_seq = load_be32(p + 8);
  b.jitter = load_be32(p + 12);
  b.lsr = load_be32(p + 16);
  b.dlsr = load_be32(p + 20);
  return b;
}

void write_report_block(uint8_t* p, const RtcpReportBlock& b) {
  store_be32(p, b.ssrc);
  p[4] = b.fraction_lost;
  const int32_t lost = std::clamp<int32_t>(b.cumulative_lost, -0x800000, 0x7FFFFF);
  store_be24(p + 5, static_cast<uint32_t>(lost) & 0xFFFFFF);
  store_be32(p + 8, b.ext_highest_seq);
  store_be32(p + 12, b.jitter);
  store_be32(p + 16, b.lsr);
  store_be32(p + 20, b.dlsr);
}

void add_blocks(const uint8_t* p, size_t count, RtcpCompound& out) {
  for (size_t i = 0; i < count; ++i) {
    if (out.report_block_count == RtcpCompound::kMaxReportBlocks) {
      out.report_blocks_dropped += count - i;
      return;
    }
    out.report_blocks[out.report_block_count++] = read_report_block(p + i * kReportBlockSize);
  }
}

// Body excludes the 4-byte common header.
RtcpParseError parse_sdes(std::span<const uint8_t> body, size_t chunk_count, RtcpCompound& out) {
  size_t pos = 0;
  for (size_t chunk = 0; chunk < chunk_count; ++chunk) {
    if (body.size() - pos < 4) return RtcpParseError::bad_length;
    const uint32_t ssrc = load_be32(&body[pos]);
    pos += 4;
    for (;;) {
      if (pos >= body.size()) return RtcpParseError::bad_length;
      const uint8_t type = body[pos];
      if (type == 0) {  // end of items; the chunk is padded to a 32-bit boundary
        pos = (pos + 4) & ~size_t{3};
        break;
      }
      if (body.size() - pos < 2) return RtcpParseError::bad_length;
      const size_t len = body[pos + 1];
      if (body.size() - pos - 2 < len) return RtcpParseError::bad_length;
      if (type == kSdesCname && out.cname_length == 0 && len > 0) {
        out.cname_ssrc = ssrc;
        out.cname_length = std::min(len, RtcpCompound::kMaxCnameLength);
        std::copy_n(&body[pos + 2], out.cname_length, out.cname_bytes.begin());
      }
      pos += 2 + len;
    }
    if (pos > body.size()) return RtcpParseError::bad_length;
  }
  return RtcpParseError::ok;
}

void parse_payload_feedback(uint8_t fmt, std::span<const uint8_t> body, RtcpCompound& out) {
  switch (fmt) {
    case 1: ++out.pli_count; return;
    case 4: ++out.fir_count; return;
    case 15:
      // REMB (draft-alvestrand-rmcat-remb): sender SSRC, media SSRC 0, "REMB", count,
      // 6-bit exponent and 18-bit mantissa.
      if (body.size() >= 16 && body[8] == 'R' && body[9] == 'E' && body[10] == 'M' && body[11] == 'B') {
        const uint8_t exponent = body[13] >> 2;
        const uint64_t mantissa = (static_cast<uint64_t>(body[13] & 0x03) << 16) | load_be16(&body[14]);
        // A mantissa of 18 bits shifted by up to 63 overflows; such a bitrate is garbage.
        if (exponent <= 46) out.remb_bitrate_bps = mantissa << exponent;
        return;
      }
      [[fallthrough]];
    default: ++out.other_feedback_count; return;
  }
}

size_t write_sdes_cname(std::span<uint8_t> out, uint32_t ssrc, std::string_view cname) {
  cname = cname.substr(0, kMaxBuiltCname);
  const size_t items = 2 + cname.size() + 1;  // CNAME item + END
  const size_t size = kHeaderSize + 4 + (items + 3) / 4 * 4;
  if (out.size() < size) return 0;
  std::fill_n(out.begin(), size, uint8_t{0});
  out[0] = 0x81;  // V=2, one chunk
  out[1] = rtcp_type::kSdes;
  store_be16(&out[2], static_cast<uint16_t>(size / 4 - 1));
  store_be32(&out[4], ssrc);
  out[8] = kSdesCname;
  out[9] = static_cast<uint8_t>(cname.size());
  std::copy(cname.begin(), cname.end(), out.begin() + 10);
  return size;
}

}  // namespace

NtpTime NtpTime::from_unix_nanos(int64_t unix_nanos) {
  unix_nanos = std::max<int64_t>(unix_nanos, 0);
  const int64_t secs = unix_nanos / 1'000'000'000;
  const int64_t rem = unix_nanos % 1'000'000'000;
  NtpTime t;
  // Era 0 wraps in 2036; RTCP only ever compares these modulo 2^32, so wrapping is right.
  t.seconds = static_cast<uint32_t>(static_cast<uint64_t>(secs) + kNtpUnixOffsetSeconds);
  t.fraction = static_cast<uint32_t>((static_cast<uint64_t>(rem) << 32) / 1'000'000'000);
  return t;
}

int64_t wall_now_unix_nanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

RtcpParseError parse_rtcp_compound(std::span<const uint8_t> datagram, RtcpCompound& out) {
  out = RtcpCompound{};
  if (datagram.empty()) return RtcpParseError::empty;
  size_t pos = 0;
  while (pos < datagram.size()) {
    const size_t remaining = datagram.size() - pos;
    if (remaining < kHeaderSize) return RtcpParseError::truncated;
    const uint8_t* h = &datagram[pos];
    if ((h[0] >> 6) != 2) return RtcpParseError::bad_version;
    const bool padded = (h[0] & 0x20) != 0;
    const uint8_t count = h[0] & 0x1F;  // RC, SC or FMT
    const uint8_t type = h[1];
    const size_t length = (static_cast<size_t>(load_be16(h + 2)) + 1) * 4;
    if (length > remaining) return RtcpParseError::truncated;
    size_t body_length = length - kHeaderSize;
    if (padded) {
      // RFC 3550 §6.4.1: only the last packet of a compound may be padded.
      if (length != remaining) return RtcpParseError::bad_padding;
      const size_t pad = h[length - 1];
      if (pad == 0 || pad > body_length) return RtcpParseError::bad_padding;
      body_length -= pad;
    }
    const std::span<const uint8_t> body = datagram.subspan(pos + kHeaderSize, body_length);

    switch (type) {
      case rtcp_type::kSenderReport: {
        if (body.size() < 4 + kSenderInfoSize + count * kReportBlockSize) return RtcpParseError::bad_length;
        ++out.sr_count;
        if (!out.sender_info) {
          RtcpSenderInfo info;
          info.ssrc = load_be32(&body[0]);
          info.ntp = {load_be32(&body[4]), load_be32(&body[8])};
          info.rtp_timestamp = load_be32(&body[12]);
          info.packet_count = load_be32(&body[16]);
          info.octet_count = load_be32(&body[20]);
          out.sender_info = info;
          if (out.sr_count + out.rr_count == 1) out.reporter_ssrc = info.ssrc;
        }
        add_blocks(&body[4 + kSenderInfoSize], count, out);
        break;
      }
      case rtcp_type::kReceiverReport: {
        if (body.size() < 4 + count * kReportBlockSize) return RtcpParseError::bad_length;
        ++out.rr_count;
        if (out.sr_count + out.rr_count == 1) out.reporter_ssrc = load_be32(&body[0]);
        add_blocks(&body[4], count, out);
        break;
      }
      case rtcp_type::kSdes: {
        ++out.sdes_count;
        if (const RtcpParseError e = parse_sdes(body, count, out); e != RtcpParseError::ok) return e;
        break;
      }
      case rtcp_type::kBye: {
        if (body.size() < count * size_t{4}) return RtcpParseError::bad_length;
        ++out.bye_count;
        for (size_t i = 0; i < count && out.bye_ssrc_count < RtcpCompound::kMaxByeSsrcs; ++i)
          out.bye_ssrcs[out.bye_ssrc_count++] = load_be32(&body[i * 4]);
        break;
      }
      case rtcp_type::kTransportFeedback:
        if (body.size() < 8) return RtcpParseError::bad_length;
        if (count == 1) {
          ++out.nack_count;
        } else if (count == 15) {
          ++out.transport_cc_count;
        } else {
          ++out.other_feedback_count;
        }
        break;
      case rtcp_type::kPayloadFeedback:
        if (body.size() < 8) return RtcpParseError::bad_length;
        parse_payload_feedback(count, body, out);
        break;
      case rtcp_type::kExtendedReport: ++out.xr_count; break;
      case rtcp_type::kApp: ++out.app_count; break;
      default: ++out.unknown_count; break;
    }
    pos += length;
  }
  return RtcpParseError::ok;
}

size_t build_sr_sdes(std::span<uint8_t> out, const RtcpSenderInfo& info, const RtcpReportBlock* block,
                     std::string_view cname) {
  const size_t block_count = block != nullptr ? 1 : 0;
  const size_t sr_size = kHeaderSize + 4 + kSenderInfoSize + block_count * kReportBlockSize;
  if (out.size() < sr_size) return 0;
  uint8_t* p = out.data();
  p[0] = static_cast<uint8_t>(0x80 | block_count);
  p[1] = rtcp_type::kSenderReport;
  store_be16(p + 2, static_cast<uint16_t>(sr_size / 4 - 1));
  store_be32(p + 4, info.ssrc);
  store_be32(p + 8, info.ntp.seconds);
  store_be32(p + 12, info.ntp.fraction);
  store_be32(p + 16, info.rtp_timestamp);
  store_be32(p + 20, info.packet_count);
  store_be32(p + 24, info.octet_count);
  if (block != nullptr) write_report_block(p + 28, *block);
  const size_t sdes_size = write_sdes_cname(out.subspan(sr_size), info.ssrc, cname);
  return sdes_size == 0 ? 0 : sr_size + sdes_size;
}

size_t build_rr_sdes(std::span<uint8_t> out, uint32_t sender_ssrc, const RtcpReportBlock* block,
                     std::string_view cname) {
  const size_t block_count = block != nullptr ? 1 : 0;
  const size_t rr_size = kHeaderSize + 4 + block_count * kReportBlockSize;
  if (out.size() < rr_size) return 0;
  uint8_t* p = out.data();
  p[0] = static_cast<uint8_t>(0x80 | block_count);
  p[1] = rtcp_type::kReceiverReport;
  store_be16(p + 2, static_cast<uint16_t>(rr_size / 4 - 1));
  store_be32(p + 4, sender_ssrc);
  if (block != nullptr) write_report_block(p + 8, *block);
  const size_t sdes_size = write_sdes_cname(out.subspan(rr_size), sender_ssrc, cname);
  return sdes_size == 0 ? 0 : rr_size + sdes_size;
}

}  // namespace rtce
