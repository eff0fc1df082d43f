// worker_metrics.h — the counters one media worker writes (single writer, relaxed) and the
// /metrics scrape reads, and the vocabularies they count by (datagram drops, session ends).
// Arrays are indexed by those enums so that every drop and every session end has exactly
// one named reason.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "backend/backend.h"
#include "datachannel/data_channel_endpoint.h"
#include "realtime/realtime_events.h"
#include "relaxed_counter.h"
#include "telephony/media_stream.h"
#include "telephony/phone_provider.h"
#include "vocab.h"

namespace rtce {

// Each vocabulary is one X-macro list (common/vocab.h): X(name) expands to the enumerator
// and to its metric label ({reason="name"}). Append only: the labels are exported.
#define RTCE_DATAGRAM_DROPS(X)                                                                  \
  X(untrusted_relay) /* framed datagram from outside relay.sources */                           \
  X(direct_disabled) /* unframed datagram while direct mode is off */                           \
  X(bad_framing)     /* PROXY v2 header malformed */                                            \
  X(unknown_ufrag)   /* STUN for a server ufrag no session owns */                              \
  X(unknown_tuple)   /* DTLS/RTP/RTCP from an address no authenticated check registered */      \
  X(not_webrtc)      /* first byte outside the RFC 7983 ranges */                               \
  X(stun_rejected)   /* STUN answered with an error or discarded */                             \
  X(srtp_failed)     /* SRTP/SRTCP authentication, replay or format failure */                  \
  X(not_ready)       /* RTP before DTLS completed */                                            \
  X(send_failed)     /* sendmmsg error */                                                       \
  X(dtls_rejected)   /* DTLS-range datagram on a session's path that its DTLS refused */        \
  X(truncated)       /* longer than the receive buffer (MSG_TRUNC): never parsed */             \
  /* authenticated check whose transaction id the session already saw from another              \
   * address: answered, but it moves no path */                                                 \
  X(stun_replayed)                                                                              \
  X(no_data_channel)      /* SCTP (DTLS application data) on a session without m=application */ \
  X(data_channel_refused) /* data-channel message that is not a JSON object, or no backend */

#define RTCE_SESSION_ENDS(X)                                                  \
  X(deleted)             /* DELETE /v1/sessions/{id} */                       \
  X(connect_timeout)     /* ICE or DTLS did not complete in time */           \
  X(dtls_failed)         /* handshake failure, fingerprint mismatch, alert */ \
  X(consent_expired)     /* RFC 7675: checks stopped */                       \
  X(peer_closed)         /* DTLS close_notify or RTCP BYE */                  \
  X(backend_failed)      /* backend unreachable or closed */                  \
  X(backend_ended)       /* backend asked to end the session */               \
  X(drained)             /* drain timeout at shutdown */                      \
  X(data_channel_failed) /* a text-only session's SCTP association failed */  \
  X(provider_stopped)    /* a phone provider's stream said stop */            \
  X(stream_closed)       /* a phone provider's stream closed without a stop */

// ICE restarts (PATCH with a new ufrag/pwd), by what became of them.
#define RTCE_ICE_RESTART_RESULTS(X)                                                      \
  X(started)               /* accepted: the new credentials are live beside the old */   \
  X(completed)             /* a check with the new credentials nominated: old refused */ \
  X(replaced)              /* a newer restart replaced one still pending */              \
  X(bad_fragment)          /* the sdpfrag did not parse (400) */                         \
  X(precondition_failed)   /* If-Match named another ETag (412) */                       \
  X(precondition_required) /* a restart without If-Match (428) */                        \
  X(rate_limited)          /* more restarts than the per-session limit (429) */

enum class DatagramDrop : uint8_t { RTCE_DATAGRAM_DROPS(RTCE_VOCAB_ENUMERATOR) count };
inline constexpr const char* kDatagramDropNames[] = {RTCE_DATAGRAM_DROPS(RTCE_VOCAB_LABEL)};
enum class SessionEnd : uint8_t { RTCE_SESSION_ENDS(RTCE_VOCAB_ENUMERATOR) count };
inline constexpr const char* kSessionEndNames[] = {RTCE_SESSION_ENDS(RTCE_VOCAB_LABEL)};
enum class IceRestartResult : uint8_t { RTCE_ICE_RESTART_RESULTS(RTCE_VOCAB_ENUMERATOR) count };
inline constexpr const char* kIceRestartResultNames[] = {RTCE_ICE_RESTART_RESULTS(RTCE_VOCAB_LABEL)};
#define RTCE_VOCAB_VALUE_(name) DatagramDrop::name,
inline constexpr DatagramDrop kDatagramDrops[] = {RTCE_DATAGRAM_DROPS(RTCE_VOCAB_VALUE_)};
#undef RTCE_VOCAB_VALUE_
#define RTCE_VOCAB_VALUE_(name) SessionEnd::name,
inline constexpr SessionEnd kSessionEnds[] = {RTCE_SESSION_ENDS(RTCE_VOCAB_VALUE_)};
#undef RTCE_VOCAB_VALUE_

inline const char* datagram_drop_name(DatagramDrop d) { return vocab_name(kDatagramDropNames, d); }
inline const char* session_end_name(SessionEnd e) { return vocab_name(kSessionEndNames, e); }

// The media gap of a path switch: last authenticated packet on the old path to the first on
// the new one, seconds (handover, ICE restart, NAT rebinding).
inline constexpr std::array<double, 10> kPathGapBuckets = {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10};

// Setup time (offer received -> DTLS connected), seconds.
inline constexpr std::array<double, 10> kSetupBuckets = {0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10};

#define RTCE_VOCAB_ONE_(name, ...) +1
inline constexpr size_t kMediaStreamRefusalCount = 0 RTCE_MEDIA_STREAM_REFUSALS(RTCE_VOCAB_ONE_);
#undef RTCE_VOCAB_ONE_

struct WorkerMetrics {
  std::atomic<uint32_t> sessions_active{
      0};  // incremented by signaling on placement, decremented by the worker
  RelaxedCounter sessions_created, sessions_connected;
  std::array<RelaxedCounter, static_cast<size_t>(SessionEnd::count)> sessions_ended;
  std::array<RelaxedCounter, static_cast<size_t>(DatagramDrop::count)> drops;
  std::array<RelaxedCounter, kSetupBuckets.size() + 1> setup_buckets;  // last = +Inf
  RelaxedCounter setup_sum_us, setup_count;
  RelaxedCounter datagrams_in, datagrams_out, bytes_in, bytes_out;
  // The loop's own cost: wake-ups (timer or socket), sessions visited because a deadline was
  // due, and microseconds spent awake (its CPU, less what the kernel does for it asleep).
  RelaxedCounter wakeups, session_visits, busy_us;
  RelaxedCounter rtp_in, rtp_out, rtcp_in, rtcp_out, stun_ok, dtls_datagrams_in;
  RelaxedCounter jitter_lost, jitter_fec, jitter_plc, jitter_late, jitter_reordered;
  RelaxedCounter opus_decode_errors, output_frames_dropped, output_underruns;
  // ICE: error replies left unsent by the per-session limit, triggered checks sent to
  // clients, media path switches (client address moved) and relay-hop moves (a restarted
  // or re-hashed relay now forwards the same client/VIP pair).
  RelaxedCounter stun_error_replies_suppressed, ice_triggered_checks, path_switches, relay_hop_moves;
  // Data channels (SCTP over DTLS): channels opened by clients, messages each way, and
  // associations that failed while the session's audio went on.
  RelaxedCounter data_channels_opened, data_channel_messages_in, data_channel_messages_out,
      data_channel_failures;
  // What the sessions' data-channel endpoints dropped, refused to send, and found malformed,
  // by reason (RTCE_DATA_CHANNEL_DROPS, RTCE_DATA_CHANNEL_SEND_REFUSALS,
  // RTCE_SCTP_PACKET_ERRORS): DataChannelEndpoint::Config::counters points here.
  DataChannelCounters data_channel;
  // What the oai-events layer did not handle, by reason (RTCE_REALTIME_DROPS).
  std::array<RelaxedCounter, kRealtimeDropCount> realtime_drops;
  // The app servers' sidebands on Realtime calls: attached, refused (at the per-call cap, or
  // the call was not a Realtime one), messages each way, events that no sideband heard while
  // one was gone, tool calls the edge answered because their sideband did not come back.
  RelaxedCounter sidebands_attached, sidebands_refused, sideband_messages_in, sideband_messages_out,
      sideband_missed_events, tool_calls_timed_out;
  std::array<RelaxedCounter, static_cast<size_t>(IceRestartResult::count)> ice_restarts;
  std::array<RelaxedCounter, kPathGapBuckets.size() + 1> path_gap_buckets;  // last = +Inf
  RelaxedCounter path_gap_sum_us, path_gap_count;
  BackendCounters backend;
  // Phone calls (Twilio Media Streams): provider messages refused by reason
  // (RTCE_MEDIA_STREAM_REFUSALS), media each way, marks sent and played back, clears, DTMF.
  std::array<std::array<RelaxedCounter, kMediaStreamRefusalCount>, kPhoneProviderCount> telephony_refusals;
  std::atomic<uint32_t> phone_calls_active{0};  // phone sessions on the worker (in sessions_active too)
  RelaxedCounter phone_media_in, phone_media_out, phone_marks_sent, phone_marks_played, phone_clears,
      phone_dtmf;

  void observe_path_gap(double seconds) {
    size_t i = 0;
    while (i < kPathGapBuckets.size() && seconds > kPathGapBuckets[i]) ++i;
    path_gap_buckets[i].add();
    path_gap_sum_us.add(static_cast<uint64_t>(seconds * 1e6));
    path_gap_count.add();
  }

  void observe_setup(double seconds) {
    size_t i = 0;
    while (i < kSetupBuckets.size() && seconds > kSetupBuckets[i]) ++i;
    setup_buckets[i].add();
    setup_sum_us.add(static_cast<uint64_t>(seconds * 1e6));
    setup_count.add();
  }
};

}  // namespace rtce
