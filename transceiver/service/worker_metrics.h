// worker_metrics.h — the counters one media worker writes (single writer, relaxed) and the
// /metrics scrape reads. Arrays are indexed by the enums below so that every drop and every
// session end has exactly one named reason.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "backend/backend.h"
#include "relaxed_counter.h"

namespace rtce {

enum class DatagramDrop : uint8_t {
  untrusted_relay,  // framed datagram from outside relay.sources
  direct_disabled,  // unframed datagram while direct mode is off
  bad_framing,      // PROXY v2 header malformed
  unknown_ufrag,    // STUN for a server ufrag no session owns
  unknown_tuple,    // DTLS/RTP/RTCP from an address no authenticated check registered
  not_webrtc,       // first byte outside the RFC 7983 ranges
  stun_rejected,    // STUN answered with an error or discarded
  srtp_failed,      // SRTP/SRTCP authentication, replay or format failure
  not_ready,        // RTP before DTLS completed
  send_failed,      // sendmmsg error
  dtls_rejected,    // DTLS-range datagram on a session's path that its DTLS refused
  truncated,        // longer than the receive buffer (MSG_TRUNC): never parsed
  stun_replayed,    // authenticated check whose transaction id the session already saw
                    // from another address: answered, but it moves no path
  count
};
inline constexpr const char* kDatagramDropNames[] = {
    "untrusted_relay", "direct_disabled", "bad_framing",  "unknown_ufrag", "unknown_tuple",
    "not_webrtc",      "stun_rejected",   "srtp_failed",  "not_ready",     "send_failed",
    "dtls_rejected",   "truncated",       "stun_replayed"};
static_assert(std::size(kDatagramDropNames) == static_cast<size_t>(DatagramDrop::count));

enum class SessionEnd : uint8_t {
  deleted,          // DELETE /v1/sessions/{id}
  connect_timeout,  // ICE or DTLS did not complete in time
  dtls_failed,      // handshake failure, fingerprint mismatch, alert
  consent_expired,  // RFC 7675: checks stopped
  peer_closed,      // DTLS close_notify or RTCP BYE
  backend_failed,   // backend unreachable or closed
  backend_ended,    // backend asked to end the session
  drained,          // drain timeout at shutdown
  count
};
inline constexpr const char* kSessionEndNames[] = {"deleted",         "connect_timeout", "dtls_failed",
                                                   "consent_expired", "peer_closed",     "backend_failed",
                                                   "backend_ended",   "drained"};
static_assert(std::size(kSessionEndNames) == static_cast<size_t>(SessionEnd::count));

// Setup time (offer received -> DTLS connected), seconds.
inline constexpr std::array<double, 10> kSetupBuckets = {0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10};

struct WorkerMetrics {
  std::atomic<uint32_t> sessions_active{
      0};  // incremented by signaling on placement, decremented by the worker
  RelaxedCounter sessions_created, sessions_connected;
  std::array<RelaxedCounter, static_cast<size_t>(SessionEnd::count)> sessions_ended;
  std::array<RelaxedCounter, static_cast<size_t>(DatagramDrop::count)> drops;
  std::array<RelaxedCounter, kSetupBuckets.size() + 1> setup_buckets;  // last = +Inf
  RelaxedCounter setup_sum_us, setup_count;
  RelaxedCounter datagrams_in, datagrams_out, bytes_in, bytes_out;
  RelaxedCounter rtp_in, rtp_out, rtcp_in, rtcp_out, stun_ok, dtls_datagrams_in;
  RelaxedCounter jitter_lost, jitter_fec, jitter_plc, jitter_late, jitter_reordered;
  RelaxedCounter opus_decode_errors, output_frames_dropped, output_underruns;
  // ICE: error replies left unsent by the per-session limit, triggered checks sent to
  // clients, media path switches (client address moved) and relay-hop moves (a restarted
  // or re-hashed relay now forwards the same client/VIP pair).
  RelaxedCounter stun_error_replies_suppressed, ice_triggered_checks, path_switches, relay_hop_moves;
  BackendCounters backend;

  void observe_setup(double seconds) {
    size_t i = 0;
    while (i < kSetupBuckets.size() && seconds > kSetupBuckets[i]) ++i;
    setup_buckets[i].add();
    setup_sum_us.add(static_cast<uint64_t>(seconds * 1e6));
    setup_count.add();
  }
};

}  // namespace rtce
