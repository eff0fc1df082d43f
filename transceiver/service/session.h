// session.h — one WebRTC audio session, owned by one media worker: ICE-lite checks, the
// DTLS handshake, SRTP, RTP/RTCP with quality stats, the audio pipeline (jitter buffer,
// Opus, pacer) and its backend connection. It never touches a socket (the worker's
// DatagramSender does) and never blocks; time comes in as `now`.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "audio/jitter_buffer.h"
#include "audio/opus_codec.h"
#include "audio/pacer.h"
#include "audio/pcm_queue.h"
#include "backend/backend.h"
#include "datachannel/data_channel_endpoint.h"
#include "dtls/dtls_transport.h"
#include "ice/ice_lite.h"
#include "media_path.h"
#include "opus_packet_ring.h"
#include "realtime/realtime_events.h"
#include "rtp/rtp_stats.h"
#include "srtp/srtp_session.h"
#include "transceiver_config.h"
#include "worker_metrics.h"

namespace rtce {

// The data channel (m=application) the answer accepted: SCTP ports and the largest message
// each side receives (the remote one is ours when the offer set no limit).
struct DataChannelPlan {
  uint16_t local_port = 5000, remote_port = 5000;
  size_t local_max_message_size = 0, remote_max_message_size = 0;
};

// What signaling decided for a new session; handed to the worker that will own it.
struct SessionPlan {
  std::string id;
  std::string local_ufrag, local_pwd, remote_ufrag, remote_pwd;
  std::vector<uint8_t> remote_fingerprint;  // SHA-256 of the client's DTLS certificate
  DtlsTransport::Role dtls_role = DtlsTransport::Role::client;
  uint8_t opus_payload_type = 111;
  std::optional<uint8_t> audio_level_ext_id;
  uint32_t ssrc = 0;
  std::string cname;
  std::string user_agent;
  Nanos offer_received_at = 0;
  bool has_audio = true;                        // false: a text-only session (data channel only)
  std::optional<DataChannelPlan> data_channel;  // set when the answer accepted m=application
  // The session config of a Realtime call (multipart `session` part over the ephemeral key's
  // claims); null unless the call came in on /v1/realtime/calls.
  nlohmann::json realtime_session;
  bool realtime = false;  // a /v1/realtime call: run the oai-events layer on the channel of that label
};

struct SessionEnvironment {
  DatagramSender& sender;
  PathRouter& router;
  WorkerMetrics& metrics;
  const TransceiverConfig& config;
  std::shared_ptr<DtlsContext> dtls;
  boost::asio::io_context& io;
  std::string path_kind;  // "relay" | "direct" for the backend's session info
};

class Session final : public BackendListener {
 public:
  Session(SessionPlan plan, SessionEnvironment env, Nanos now);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Which check answers the worker counts.
  enum class StunVerdict { accepted, rejected, replayed };
  // A STUN Binding request on `path`. An authenticated fresh check routes `path` to this
  // session; it carries media at once when it is the first, nominates, or names the media
  // path's own (client, VIP) through another relay hop. Other new addresses are candidates
  // until they prove themselves with SRTP/SRTCP or a nominating check, so a replayed check
  // (same transaction id, another source) never moves media.
  StunVerdict handle_stun(std::span<const uint8_t> request, const MediaPath& path, Nanos now);
  // A STUN response on a routed path: true when it answers our triggered check.
  bool handle_stun_response(std::span<const uint8_t> response);
  // False when the session's DTLS refused the datagram (not DTLS records, or too late).
  bool handle_dtls(std::span<const uint8_t> record, Nanos now);
  // SRTP or SRTCP (RFC 5761 demux inside) on a routed `path`; decrypted in place. One that
  // authenticates keeps the session alive (consent), follows a relay hop that moved, and
  // moves media to a candidate path it came from.
  void handle_srtp(std::span<uint8_t> packet, const MediaPath& path, Nanos now);
  // Unroutes every path and server ufrag (the worker calls it before destroying the session).
  void release_paths();

  // ICE restart (RFC 8445 §9) asked for by a PATCH (RFC 9725 §4.4). The new server ufrag
  // carries a hint for this same worker, so every relay steers the new path here. DTLS and
  // SRTP go on; the old credentials are refused once a check with the new ones nominates.
  struct IceRestartRequest {
    std::string local_ufrag, local_pwd;    // new, minted by signaling (empty for trickle)
    std::string remote_ufrag, remote_pwd;  // the client's new ones; empty = candidates only
    std::string if_match;                  // the request's If-Match ("" when absent)
  };
  enum class IceRestartVerdict {
    started,
    trickle,
    precondition_failed,
    precondition_required,
    rate_limited,
    ended
  };
  IceRestartVerdict begin_ice_restart(const IceRestartRequest& request, Nanos now);
  // The session's entity tag for If-Match: "\"<ICE generation>\"", "\"1\"" until a restart.
  std::string etag() const;
  // Timers: pacing, jitter buffer, RTCP, DTLS retransmission, deadlines.
  void tick(Nanos now);
  void end(SessionEnd reason, Nanos now);

  bool ended() const { return ended_; }
  SessionEnd end_reason() const { return end_reason_; }
  const std::string& id() const { return plan_.id; }
  const std::string& local_ufrag() const { return plan_.local_ufrag; }
  bool has_path() const { return has_path_; }
  const MediaPath& path() const { return path_; }
  nlohmann::json snapshot(Nanos now) const;

  // BackendListener
  void on_backend_audio(std::span<const int16_t> pcm_20ms) override;
  void on_backend_opus(std::span<const uint8_t> opus_packet) override;
  void on_backend_clear() override;
  void on_backend_event(const nlohmann::json& event) override;
  void on_backend_closed(std::string_view reason) override;

 private:
  void send(std::span<const uint8_t> payload);
  void on_dtls_connected(const SrtpKeys& keys, Nanos now);
  void on_ice_progress(Nanos now);
  // The packet on `path` authenticated: consent, relay-hop following, candidate promotion.
  void on_authenticated(const MediaPath& path, Nanos now);
  void switch_media_path(const MediaPath& path);
  void complete_ice_restart(Nanos now);
  void add_candidate_path(const MediaPath& path);
  bool handle_rtp(std::span<uint8_t> packet, Nanos now);
  bool handle_rtcp(std::span<uint8_t> packet, Nanos now);
  void pump_inbound_audio(Nanos now);
  void pump_outbound_audio(Nanos now);
  void send_opus_frame(std::span<const uint8_t> opus, Nanos now);
  void send_rtcp_report(Nanos now);
  void start_backend();
  // Data channels: the association starts once DTLS is connected; oai-events on a Realtime
  // call runs the event layer, any other channel's text goes to the backend as an event.
  void start_data_channel(Nanos now);
  void on_channel_open(uint16_t stream, std::string_view label, std::string_view protocol);
  void on_channel_message(uint16_t stream, std::span<const uint8_t> message, bool binary);
  void clear_output();
  void mirror_realtime_drops();  // the event layer's drop counts into the worker's
  void note_output_playing(bool playing, Nanos now);
  void add_event(nlohmann::json event);
  const char* state_name() const;

  SessionPlan plan_;
  SessionEnvironment env_;
  Nanos created_at_;
  Nanos connected_at_ = 0;
  bool ended_ = false;
  SessionEnd end_reason_ = SessionEnd::deleted;
  Nanos ended_at_ = 0;

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
  // The DTLS client's first flight, re-sent once when ICE connects (on_ice_progress).
  std::array<uint8_t, 1500> early_flight_{};
  size_t early_flight_len_ = 0;
  bool ice_was_connected_ = false;
  // ICE restarts: the generation is the ETag; a token bucket bounds restarts per session.
  uint64_t ice_generation_ = 1;
  std::string pending_local_ufrag_;
  double restart_tokens_ = 3;
  Nanos restart_tokens_at_ = 0;
  // The media gap of a path switch: from the last authenticated media on the old path to the
  // first on the new one.
  Nanos last_media_at_ = 0;
  Nanos switch_gap_from_ = 0;  // non-zero while a switch waits for its first packet
  Nanos now_ = 0;              // time of the event being handled, for callbacks without a `now`

  // RTP/RTCP
  ReceiveStats receive_stats_;
  SendStats send_stats_;
  uint32_t remote_ssrc_ = 0;
  uint16_t out_seq_;
  uint32_t out_timestamp_;
  bool out_marker_ = true;
  Nanos next_rtcp_at_ = 0;
  uint64_t packets_in_ = 0, packets_out_ = 0, bytes_in_ = 0, bytes_out_ = 0;
  uint64_t reports_sent_ = 0;
  uint64_t seen_lost_ = 0, seen_late_ = 0, seen_reordered_ = 0;

  // Audio
  std::optional<JitterBuffer> jitter_;  // transcoding only, as are the codecs and queues below
  std::optional<OpusDecoderHandle> decoder_;
  std::optional<OpusEncoderHandle> encoder_;
  FramePacer pacer_;
  std::optional<PcmQueue> output_;
  std::optional<OpusPacketRing> opus_output_;  // passthrough only
  std::vector<int16_t> pcm_scratch_;
  std::vector<uint8_t> packet_scratch_;

  // Data channels. A session without audio (text-only) never sends RTP.
  std::unique_ptr<DataChannelEndpoint> data_channel_;
  std::string data_channel_failure_;
  std::unique_ptr<RealtimeEventChannel> realtime_;
  std::optional<uint16_t> events_stream_;
  std::array<uint64_t, kRealtimeDropCount> seen_realtime_drops_{};
  std::vector<std::pair<uint16_t, std::string>> channel_labels_;  // open channels
  // Output playout as the event layer reports it: started on the first frame played,
  // stopped after kOutputStopAfter of nothing to play (backends deliver in bursts).
  bool output_playing_ = false;
  int trailing_silence_ = 0;  // Opus silence frames still to send after the last played frame
  Nanos output_idle_since_ = 0;

  std::unique_ptr<BackendConnection> backend_;
  std::string backend_state_ = "idle";
  std::deque<nlohmann::json> events_;  // the last few, for GET and the demo page
};

}  // namespace rtce
