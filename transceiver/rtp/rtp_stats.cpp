// rtp_stats.cpp — receive/send statistics; see rtp_stats.h.
#include "rtp_stats.h"

#include <algorithm>

namespace rtce {
namespace {

constexpr uint32_t kSeqMod = 1u << 16;
constexpr int64_t kNanosPerSecond = 1'000'000'000;

uint32_t nanos_to_rtp_units(Nanos t, int clock_rate) {
  return static_cast<uint32_t>(static_cast<__int128>(t) * clock_rate / kNanosPerSecond);
}

}  // namespace

ReceiveStats::ReceiveStats(int clock_rate) : clock_rate_(clock_rate) {}

void ReceiveStats::init_sequence(uint16_t seq) {
  base_seq_ = seq;
  max_seq_ = seq;
  bad_seq_ = kNoBadSeq;
  cycles_ = 0;
  received_ = 0;
  received_prior_ = 0;
  expected_prior_ = 0;
  have_transit_ = false;
}

bool ReceiveStats::update(uint16_t seq, uint32_t rtp_timestamp, Nanos arrival) {
  bool in_order = false;
  if (!started_) {
    started_ = true;
    init_sequence(seq);
    in_order = true;
  } else {
    const uint16_t udelta = static_cast<uint16_t>(seq - max_seq_);
    if (udelta < kMaxDropout) {
      if (udelta != 0) {
        if (seq < max_seq_) cycles_ += kSeqMod;  // wrapped around 65535
        max_seq_ = seq;
        in_order = true;
      }
    } else if (udelta <= kSeqMod - kMaxMisorder) {
      // A big jump: believe it only when the next packet continues from it (the sender
      // restarted), otherwise drop it as garbage.
      if (seq == bad_seq_) {
        ++resyncs_;
        init_sequence(seq);
        in_order = true;
      } else {
        bad_seq_ = (seq + 1u) & (kSeqMod - 1);
        ++bad_jumps_;
        return false;
      }
    }
    // else: a duplicate or a reordered packet, counted as received (A.1 does the same).
  }
  ++received_;

  if (in_order) {
    // A.8: the difference in relative transit time between consecutive packets, in RTP
    // units; only in-order packets, so reordering does not show up as jitter.
    const int32_t transit = static_cast<int32_t>(nanos_to_rtp_units(arrival, clock_rate_) - rtp_timestamp);
    if (have_transit_) {
      int64_t d = static_cast<int64_t>(transit) - last_transit_;
      if (d < 0) d = -d;
      jitter_q4_ += d - ((jitter_q4_ + 8) >> 4);
    }
    last_transit_ = transit;
    have_transit_ = true;
  }
  return true;
}

double ReceiveStats::jitter_ms() const {
  return static_cast<double>(jitter_q4_) / 16.0 * 1000.0 / clock_rate_;
}

void ReceiveStats::on_sender_report(const RtcpSenderInfo& info, Nanos arrival) {
  last_sr_middle32_ = info.ntp.middle32();
  last_sr_arrival_ = arrival;
  have_sr_ = true;
}

RtcpReportBlock ReceiveStats::make_report_block(uint32_t media_ssrc, Nanos now) {
  RtcpReportBlock block;
  block.ssrc = media_ssrc;
  if (started_) {
    const int64_t expected_total = expected();
    block.cumulative_lost = static_cast<int32_t>(std::clamp<int64_t>(lost(), -0x800000, 0x7FFFFF));
    const int64_t expected_interval = expected_total - expected_prior_;
    const int64_t received_interval = static_cast<int64_t>(received_ - received_prior_);
    expected_prior_ = expected_total;
    received_prior_ = received_;
    const int64_t lost_interval = expected_interval - received_interval;
    last_fraction_lost_ =
        (expected_interval <= 0 || lost_interval <= 0)
            ? 0
            : static_cast<uint8_t>(std::min<int64_t>((lost_interval << 8) / expected_interval, 255));
    block.fraction_lost = last_fraction_lost_;
    block.ext_highest_seq = ext_highest_seq();
    block.jitter = jitter_rtp_units();
  }
  if (have_sr_) {
    block.lsr = last_sr_middle32_;
    const Nanos delay = std::max<Nanos>(now - last_sr_arrival_, 0);
    block.dlsr = static_cast<uint32_t>(std::min<int64_t>(delay * 65536 / kNanosPerSecond, UINT32_MAX));
  }
  return block;
}

SendStats::SendStats(uint32_t ssrc, int clock_rate) : ssrc_(ssrc), clock_rate_(clock_rate) {}

void SendStats::on_packet_sent(size_t payload_bytes, uint32_t rtp_timestamp, Nanos now) {
  ++packets_;
  octets_ += payload_bytes;
  have_sent_ = true;
  last_rtp_timestamp_ = rtp_timestamp;
  last_sent_at_ = now;
}

RtcpSenderInfo SendStats::make_sender_info(NtpTime wall, Nanos now) {
  RtcpSenderInfo info;
  info.ssrc = ssrc_;
  info.ntp = wall;
  if (have_sent_) {
    const Nanos since_last = now - last_sent_at_;
    const int64_t advance =
        static_cast<int64_t>(static_cast<__int128>(since_last) * clock_rate_ / kNanosPerSecond);
    info.rtp_timestamp = last_rtp_timestamp_ + static_cast<uint32_t>(advance);
  }
  // RFC 3550: the counts wrap modulo 2^32.
  info.packet_count = static_cast<uint32_t>(packets_);
  info.octet_count = static_cast<uint32_t>(octets_);

  sent_reports_[next_report_slot_] = {wall.middle32(), now, true};
  next_report_slot_ = (next_report_slot_ + 1) % kReportHistory;
  return info;
}

std::optional<Nanos> SendStats::on_report_block(const RtcpReportBlock& block, Nanos now) {
  if (block.ssrc != ssrc_) return std::nullopt;
  ++reports_;
  remote_fraction_lost_ = block.fraction_lost;
  remote_cumulative_lost_ = block.cumulative_lost;
  remote_jitter_ = block.jitter;
  if (block.lsr == 0) return std::nullopt;
  // §6.4.1 computes A - LSR - DLSR from NTP times; matching LSR to the SR we sent and using
  // the monotonic clock gives the same value without trusting the wall clock not to step.
  for (const SentReport& sent : sent_reports_) {
    if (!sent.valid || sent.middle32 != block.lsr) continue;
    const Nanos dlsr = static_cast<Nanos>(block.dlsr) * kNanosPerSecond / 65536;
    const Nanos rtt = now - sent.sent_at - dlsr;
    if (rtt < 0) return std::nullopt;  // the remote's delay claim exceeds the elapsed time
    rtt_ = rtt;
    return rtt;
  }
  return std::nullopt;
}

}  // namespace rtce
