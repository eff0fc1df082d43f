// rtp_stats.h — per-stream RTP statistics for RTCP: what we received (RFC 3550 A.1 sequence
// tracking, A.3 loss, A.8 jitter, LSR/DLSR bookkeeping) and what we sent (counts, SR
// timestamps, round-trip time from the peer's report blocks, §6.4.1). Clock-driven, no
// allocation after construction.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "clock.h"
#include "rtcp.h"

namespace rtce {

class ReceiveStats {
 public:
  // clock_rate: the RTP clock of the stream (48000 for Opus).
  explicit ReceiveStats(int clock_rate);

  // One received RTP packet. Returns false when the packet was judged bad (a jump of more
  // than kMaxDropout not yet confirmed by a consecutive packet).
  bool update(uint16_t seq, uint32_t rtp_timestamp, Nanos arrival);

  // The remote's SR arrived: remember its NTP time for LSR and our arrival time for DLSR.
  void on_sender_report(const RtcpSenderInfo& info, Nanos arrival);

  // A report block about `media_ssrc` as of `now`; starts a new fraction-lost interval.
  RtcpReportBlock make_report_block(uint32_t media_ssrc, Nanos now);

  bool started() const { return started_; }
  uint64_t received() const { return received_; }
  uint32_t ext_highest_seq() const { return cycles_ + max_seq_; }
  int64_t expected() const { return started_ ? int64_t{ext_highest_seq()} - base_seq_ + 1 : 0; }
  int64_t lost() const { return expected() - static_cast<int64_t>(received_); }
  uint8_t last_fraction_lost() const { return last_fraction_lost_; }  // of the last report
  uint32_t jitter_rtp_units() const { return static_cast<uint32_t>(jitter_q4_ >> 4); }
  double jitter_ms() const;
  uint64_t bad_sequence_jumps() const { return bad_jumps_; }
  uint64_t resyncs() const { return resyncs_; }

  static constexpr int kMaxDropout = 3000;
  static constexpr int kMaxMisorder = 100;

 private:
  void init_sequence(uint16_t seq);

  int clock_rate_;
  bool started_ = false;
  uint16_t max_seq_ = 0;
  uint32_t cycles_ = 0;  // shifted count of seq wraparounds
  uint32_t base_seq_ = 0;
  uint32_t bad_seq_ = kNoBadSeq;
  uint64_t received_ = 0;
  int64_t expected_prior_ = 0;
  uint64_t received_prior_ = 0;
  uint8_t last_fraction_lost_ = 0;

  bool have_transit_ = false;
  int32_t last_transit_ = 0;
  int64_t jitter_q4_ = 0;  // jitter * 16, as in A.8

  uint32_t last_sr_middle32_ = 0;
  Nanos last_sr_arrival_ = 0;
  bool have_sr_ = false;

  uint64_t bad_jumps_ = 0;
  uint64_t resyncs_ = 0;

  static constexpr uint32_t kNoBadSeq = 0x10001;  // RTP_SEQ_MOD + 1
};

class SendStats {
 public:
  SendStats(uint32_t ssrc, int clock_rate);

  // One RTP packet sent, `payload_bytes` without the header (the SR octet count's unit).
  void on_packet_sent(size_t payload_bytes, uint32_t rtp_timestamp, Nanos now);

  // Sender info for an SR stamped with `wall` (NTP from the wall clock) at monotonic `now`.
  // The RTP timestamp is extrapolated from the last sent packet on the monotonic clock, so
  // NTP and RTP times describe the same instant. Records the SR for RTT.
  RtcpSenderInfo make_sender_info(NtpTime wall, Nanos now);

  // A report block from the remote about our stream. Updates the remote-reported loss and
  // jitter; returns the round-trip time when the block echoes one of our recent SRs.
  std::optional<Nanos> on_report_block(const RtcpReportBlock& block, Nanos now);

  uint32_t ssrc() const { return ssrc_; }
  uint64_t packets_sent() const { return packets_; }
  uint64_t octets_sent() const { return octets_; }
  std::optional<Nanos> last_rtt() const { return rtt_; }
  uint64_t reports_received() const { return reports_; }
  double remote_fraction_lost() const { return remote_fraction_lost_ / 256.0; }
  int32_t remote_cumulative_lost() const { return remote_cumulative_lost_; }
  uint32_t remote_jitter_rtp_units() const { return remote_jitter_; }
  double remote_jitter_ms() const { return remote_jitter_ * 1000.0 / clock_rate_; }

 private:
  struct SentReport {
    uint32_t middle32 = 0;
    Nanos sent_at = 0;
    bool valid = false;
  };
  static constexpr size_t kReportHistory = 8;

  uint32_t ssrc_;
  int clock_rate_;
  uint64_t packets_ = 0;
  uint64_t octets_ = 0;
  bool have_sent_ = false;
  uint32_t last_rtp_timestamp_ = 0;
  Nanos last_sent_at_ = 0;

  std::array<SentReport, kReportHistory> sent_reports_{};
  size_t next_report_slot_ = 0;

  std::optional<Nanos> rtt_;
  uint64_t reports_ = 0;
  uint8_t remote_fraction_lost_ = 0;
  int32_t remote_cumulative_lost_ = 0;
  uint32_t remote_jitter_ = 0;
};

}  // namespace rtce
