// peer.h — the transport of one WebRTC session: ICE-lite (paths, candidates, restart,
// consent), DTLS, SRTP/SRTCP, RTP/RTCP statistics, SCTP and data channels. Sans-IO in the
// str0m sense: datagrams and `now` go in (handle, tick), transmits go out through the
// caller's DatagramSender (the worker's send batch, or a test's recorder), the next
// deadline is a query, and what happened comes out as PeerObserver events. It never reads
// a clock, never touches a socket and never blocks; it knows nothing of audio codecs or
// backends (that is the Call's side).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datachannel/data_channel_endpoint.h"
#include "dtls/dtls_transport.h"
#include "event_log.h"
#include "ice/ice_lite.h"
#include "media_path.h"
#include "rtp/rtp.h"
#include "rtp/rtp_stats.h"
#include "srtp/srtp_session.h"
#include "token_bucket.h"
#include "vocab.h"
#include "worker_metrics.h"

namespace rtce {

// The data channel (m=application) the answer accepted: SCTP ports and the largest message
// each side receives (the remote one is ours when the offer set no limit).
struct DataChannelPlan {
  uint16_t local_port = 5000, remote_port = 5000;
  size_t local_max_message_size = 0, remote_max_message_size = 0;
};

// What signaling negotiated for the transport.
struct PeerPlan {
  std::string id;  // the session id, for logs
  std::string local_ufrag, local_pwd, remote_ufrag, remote_pwd;
  std::vector<uint8_t> remote_fingerprint;  // SHA-256 of the client's DTLS certificate
  DtlsTransport::Role dtls_role = DtlsTransport::Role::client;
  uint8_t opus_payload_type = 111;
  std::optional<uint8_t> audio_level_ext_id;
  uint32_t ssrc = 0;
  std::string cname;
  Nanos offer_received_at = 0;
  bool has_audio = true;                        // false: a text-only session (data channel only)
  std::optional<DataChannelPlan> data_channel;  // set when the answer accepted m=application
};

struct PeerSettings {
  Nanos connect_timeout = 10'000'000'000;  // offer -> DTLS connected
  Nanos consent_timeout = 30'000'000'000;
  Nanos nomination_wait = 2'000'000'000;
  uint32_t stun_error_replies_per_second = 5;
};

// What a Peer reports. Called synchronously from inside handle/tick/end-free methods, on
// the caller's thread; the Peer is consistent when it calls, so the observer may call back
// (send_audio, send_channel_text). A span is valid only during the call.
class PeerObserver {
 public:
  virtual ~PeerObserver() = default;
  // DTLS completed and SRTP is keyed: media may flow.
  virtual void on_peer_connected(Nanos now) = 0;
  // An authenticated RTP packet of the negotiated Opus payload type.
  virtual void on_peer_audio(const RtpView& rtp, Nanos now) = 0;
  // What the transport tells the application about itself: the link quality report
  // (session.quality, every fifth RTCP report) and a completed ICE restart
  // (session.ice_restarted). Backend-protocol event objects.
  virtual void on_peer_report(const nlohmann::json& event, Nanos now) = 0;
  virtual void on_channel_open(uint16_t stream, std::string_view label, std::string_view protocol,
                               Nanos now) = 0;
  virtual void on_channel_message(uint16_t stream, std::span<const uint8_t> message, bool binary,
                                  Nanos now) = 0;
  virtual void on_channel_closed(uint16_t stream, Nanos now) = 0;
  // The SCTP association failed (or could not start): every channel is gone, audio is not.
  virtual void on_channels_failed(std::string_view reason, Nanos now) = 0;
  // The transport ended by itself (consent, DTLS, BYE, timeout, a text-only session's
  // association). Not called for end().
  virtual void on_peer_closed(SessionEnd reason, Nanos now) = 0;
};

struct PeerEnvironment {
  DatagramSender& out;
  PathRouter& router;
  PeerObserver& observer;
  WorkerMetrics& metrics;
  EventLog& log;
  std::shared_ptr<DtlsContext> dtls;
  PeerSettings settings;
};

// Whether an If-Match header value (RFC 9110 section 13.1.1: "*" or a list of entity tags)
// names `etag`.
bool if_match_names(std::string_view if_match, std::string_view etag);

class Peer {
 public:
  Peer(PeerPlan plan, PeerEnvironment env, Nanos now);
  ~Peer();
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // One datagram on `path` (the framing already stripped): STUN, DTLS, or SRTP/SRTCP by
  // its first byte (RFC 7983), decrypted in place. The worker found this Peer by the STUN
  // USERNAME's server ufrag or by the path an authenticated check routed here. An
  // authenticated fresh check routes `path` to this Peer; it carries media at once when it
  // is the first, nominates, or names the media path's own (client, VIP) through another
  // relay hop. Other new addresses are candidates until they prove themselves with
  // SRTP/SRTCP or a nominating check, so a replayed check (same transaction id, another
  // source) never moves media. Every outcome is counted in the worker's metrics.
  void handle(std::span<uint8_t> datagram, const MediaPath& path, Nanos now);
  // Timers: ICE consent and nomination fallback, the connect deadline, DTLS retransmission,
  // SCTP, RTCP reports.
  void tick(Nanos now);
  // When tick next has something to do (never later than the next RTCP report while
  // connected); the worker may tick sooner.
  Nanos next_deadline(Nanos now) const;

  // One 20 ms Opus frame to the client as the next RTP packet (a no-op before connected or
  // on a text-only session). skip_audio_frame lets a frame's time pass unsent (DTX-like
  // silence): the next frame starts a talkspurt (marker bit).
  void send_audio(std::span<const uint8_t> opus, Nanos now);
  void skip_audio_frame();
  // A text message on an open data channel; false when it could not be queued.
  bool send_channel_text(uint16_t stream, std::string_view text);

  // ICE restart (RFC 8445 §9) asked for by a PATCH (RFC 9725 §4.4). The new server ufrag
  // carries a hint for this same worker, so every relay steers the new path here. DTLS and
  // SRTP go on; the old credentials are refused once a check with the new ones nominates.
  struct IceRestartRequest {
    std::string local_ufrag, local_pwd;    // new, minted by signaling (empty for trickle)
    std::string remote_ufrag, remote_pwd;  // the client's new ones; empty = candidates only
    std::string if_match;                  // the request's If-Match ("" when absent)
  };
#define RTCE_ICE_RESTART_VERDICTS(X) \
  X(started) X(trickle) X(precondition_failed) X(precondition_required) X(rate_limited) X(ended)
  enum class IceRestartVerdict { RTCE_ICE_RESTART_VERDICTS(RTCE_VOCAB_ENUMERATOR) };
  IceRestartVerdict begin_ice_restart(const IceRestartRequest& request, Nanos now);
  // The entity tag for If-Match: "\"<ICE generation>\"", "\"1\"" until a restart.
  std::string etag() const;

  // Closes DTLS (close_notify), SCTP and ICE. The observer is not called.
  void end(Nanos now);
  // Unroutes every path and server ufrag (the worker calls it before destroying the Peer).
  void release_paths();

  bool ended() const { return ended_; }
  bool connected() const { return connected_at_ != 0; }
  bool has_path() const { return has_path_; }
  const MediaPath& path() const { return path_; }
  const std::string& local_ufrag() const { return plan_.local_ufrag; }
  const PeerPlan& plan() const { return plan_; }
  const std::string& dtls_failure() const { return dtls_failure_; }
  // The DTLS SSL object was freed after an audio-only handshake (DtlsTransport::Config::
  // release_after_handshake).
  bool dtls_released() const { return dtls_->ssl_released(); }
  // The transport's part of a session's JSON snapshot.
  void snapshot_into(nlohmann::json& j) const;

 private:
  void transmit(std::span<const uint8_t> payload);
  void close_with(SessionEnd reason, Nanos now);
  void handle_stun(std::span<const uint8_t> request, const MediaPath& path, Nanos now);
  void handle_dtls(std::span<const uint8_t> record, Nanos now);
  void handle_srtp(std::span<uint8_t> packet, const MediaPath& path, Nanos now);
  bool handle_rtp(std::span<uint8_t> packet, Nanos now);
  bool handle_rtcp(std::span<uint8_t> packet, Nanos now);
  void on_dtls_connected(const SrtpKeys& keys, Nanos now);
  void on_ice_progress(Nanos now);
  // The packet on `path` authenticated: consent, relay-hop following, candidate promotion.
  void on_authenticated(const MediaPath& path, Nanos now);
  void switch_media_path(const MediaPath& path);
  void add_candidate_path(const MediaPath& path);
  void complete_ice_restart(Nanos now);
  void start_data_channel(Nanos now);
  void send_rtcp_report(Nanos now);
  void count(DatagramDrop drop) { env_.metrics.drops[static_cast<size_t>(drop)].add(); }

  PeerPlan plan_;
  PeerEnvironment env_;
  Nanos connected_at_ = 0;
  bool ended_ = false;
  Nanos now_ = 0;  // time of the input being handled, for DTLS/SCTP callbacks without one

  IceLiteSession ice_;
  std::unique_ptr<DtlsTransport> dtls_;
  std::optional<SrtpSession> srtp_in_, srtp_out_;
  std::string dtls_failure_;
  bool has_path_ = false;
  MediaPath path_;
  // Addresses that sent a fresh authenticated check but carry no media yet (other candidate
  // pairs, or a client that moved and has not proved the new address). Oldest replaced.
  static constexpr size_t kMaxCandidatePaths = 4;
  std::array<MediaPath, kMaxCandidatePaths> candidates_{};
  size_t candidate_count_ = 0;
  // The DTLS client's first flight, re-sent once when ICE connects (on_ice_progress), then
  // freed.
  std::vector<uint8_t> early_flight_;
  bool ice_was_connected_ = false;
  // ICE restarts: the generation is the ETag; a token bucket bounds restarts per session.
  uint64_t ice_generation_ = 1;
  std::string pending_local_ufrag_;
  // A burst of 3, then one per 10 s: a restart costs a STUN exchange and a ufrag mint, and a
  // client restarting in a loop is broken or hostile.
  TokenBucket restart_budget_{3, 0.1};
  // The media gap of a path switch: from the last authenticated media on the old path to the
  // first on the new one.
  Nanos last_media_at_ = 0;
  Nanos switch_gap_from_ = 0;  // non-zero while a switch waits for its first packet

  // RTP/RTCP
  ReceiveStats receive_stats_;
  SendStats send_stats_;
  uint32_t remote_ssrc_ = 0;
  uint16_t out_seq_;
  uint32_t out_timestamp_;
  bool out_marker_ = true;
  Nanos next_rtcp_at_ = 0;
  Nanos next_channel_pump_ = 0;  // 0: at the first tick after the channel exists
  uint64_t packets_in_ = 0, packets_out_ = 0, bytes_in_ = 0, bytes_out_ = 0;
  uint64_t reports_sent_ = 0;

  // Data channels. A session without audio (text-only) never sends RTP.
  std::unique_ptr<DataChannelEndpoint> data_channel_;
  std::string data_channel_failure_;
  std::vector<std::pair<uint16_t, std::string>> channel_labels_;  // open channels
};

inline const char* ice_restart_verdict_name(Peer::IceRestartVerdict verdict) {
  static constexpr const char* kNames[] = {RTCE_ICE_RESTART_VERDICTS(RTCE_VOCAB_LABEL)};
  return vocab_name(kNames, verdict);
}

}  // namespace rtce
