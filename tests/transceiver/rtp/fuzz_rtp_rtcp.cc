// fuzz_rtp_rtcp.cc — libFuzzer target for the RTP parser and the RTCP compound parser
// (transceiver/rtp). Invariants: no out-of-bounds read (ASan), a parsed RTP payload lies
// inside the datagram, counts stay within the fixed capacities, and the statistics
// accept whatever the parsers produce.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "rtp/rtcp.h"
#include "rtp/rtp.h"
#include "rtp/rtp_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  rtce::ReceiveStats receive(48000);
  if (const auto rtp =
          rtce::parse_rtp(bytes, size > 0 ? std::optional<uint8_t>(data[0] & 0x0F) : std::nullopt)) {
    if (rtp->payload.data() < data || rtp->payload.data() + rtp->payload.size() > data + size) abort();
    if (rtp->audio_level && *rtp->audio_level > 127) abort();
    receive.update(rtp->seq, rtp->timestamp, static_cast<rtce::Nanos>(rtp->timestamp) * 20'833);
  }
  rtce::RtcpCompound compound;
  rtce::parse_rtcp_compound(bytes, compound);
  if (compound.report_block_count > rtce::RtcpCompound::kMaxReportBlocks) abort();
  if (compound.cname_length > rtce::RtcpCompound::kMaxCnameLength) abort();
  if (compound.bye_ssrc_count > rtce::RtcpCompound::kMaxByeSsrcs) abort();
  rtce::SendStats send(0x1234, 48000);
  send.make_sender_info(rtce::NtpTime::from_u64(0x0123456789ABCDEFull), 1'000'000'000);
  for (const rtce::RtcpReportBlock& block : compound.blocks()) {
    const auto rtt = send.on_report_block(block, 2'000'000'000);
    if (rtt && *rtt < 0) abort();
  }
  if (compound.sender_info) receive.on_sender_report(*compound.sender_info, 3'000'000'000);
  receive.make_report_block(1, 3'500'000'000);
  return 0;
}
