// rtp.cpp — RTP header parse/write; see rtp.h.
#include "rtp.h"

#include "byte_order.h"

namespace rtce {
namespace {

constexpr uint16_t kOneByteProfile = 0xBEDE;
constexpr uint16_t kTwoByteProfileMask = 0xFFF0;
constexpr uint16_t kTwoByteProfile = 0x1000;

void take_audio_level(std::span<const uint8_t> data, RtpView& view) {
  if (data.empty()) return;
  view.audio_level = static_cast<uint8_t>(data[0] & 0x7F);
  view.voice_activity = (data[0] & 0x80) != 0;
}

// Walks an RFC 8285 extension block; returns false when an element overruns the block.
bool walk_extensions(uint16_t profile, std::span<const uint8_t> block, uint8_t wanted_id, RtpView& view) {
  const bool one_byte = profile == kOneByteProfile;
  if (!one_byte && (profile & kTwoByteProfileMask) != kTwoByteProfile) return true;  // unknown: skip
  size_t pos = 0;
  while (pos < block.size()) {
    const uint8_t first = block[pos];
    if (first == 0) {  // padding byte between elements
      ++pos;
      continue;
    }
    uint8_t id = 0;
    size_t len = 0;
    if (one_byte) {
      id = first >> 4;
      if (id == 15) return true;  // RFC 8285 §4.2: stop processing
      len = static_cast<size_t>(first & 0x0F) + 1;
      pos += 1;
    } else {
      if (pos + 2 > block.size()) return false;
      id = first;
      len = block[pos + 1];
      pos += 2;
    }
    if (len > block.size() - pos) return false;
    if (id == wanted_id) take_audio_level(block.subspan(pos, len), view);
    pos += len;
  }
  return true;
}

}  // namespace

std::optional<RtpView> parse_rtp(std::span<const uint8_t> packet, std::optional<uint8_t> audio_level_ext_id) {
  if (packet.size() < kRtpHeaderSize) return std::nullopt;
  const uint8_t b0 = packet[0];
  if ((b0 >> 6) != 2) return std::nullopt;
  const bool has_padding = (b0 & 0x20) != 0;
  const bool has_extension = (b0 & 0x10) != 0;
  const size_t csrc_count = b0 & 0x0F;

  RtpView view;
  view.marker = (packet[1] & 0x80) != 0;
  view.payload_type = packet[1] & 0x7F;
  view.seq = load_be16(&packet[2]);
  view.timestamp = load_be32(&packet[4]);
  view.ssrc = load_be32(&packet[8]);

  size_t pos = kRtpHeaderSize + 4 * csrc_count;
  if (pos > packet.size()) return std::nullopt;
  if (has_extension) {
    if (packet.size() - pos < 4) return std::nullopt;
    const uint16_t profile = load_be16(&packet[pos]);
    const size_t ext_len = static_cast<size_t>(load_be16(&packet[pos + 2])) * 4;
    pos += 4;
    if (ext_len > packet.size() - pos) return std::nullopt;
    // An id of 0 is reserved for padding, so "no id wanted" can never match an element.
    const uint8_t wanted = audio_level_ext_id.value_or(0);
    if (!walk_extensions(profile, packet.subspan(pos, ext_len), wanted, view)) return std::nullopt;
    pos += ext_len;
  }
  size_t end = packet.size();
  if (has_padding) {
    const size_t pad = packet.back();
    if (pad == 0 || pad > end - pos) return std::nullopt;
    end -= pad;
  }
  view.payload = packet.subspan(pos, end - pos);
  return view;
}

size_t write_rtp_header(std::span<uint8_t> out, uint8_t payload_type, bool marker, uint16_t seq,
                        uint32_t timestamp, uint32_t ssrc) {
  if (out.size() < kRtpHeaderSize) return 0;
  out[0] = 0x80;
  out[1] = static_cast<uint8_t>((marker ? 0x80 : 0) | (payload_type & 0x7F));
  store_be16(&out[2], seq);
  store_be32(&out[4], timestamp);
  store_be32(&out[8], ssrc);
  return kRtpHeaderSize;
}

bool is_rtcp(std::span<const uint8_t> packet) {
  return packet.size() >= 2 && (packet[0] >> 6) == 2 && packet[1] >= 192 && packet[1] <= 223;
}

}  // namespace rtce
