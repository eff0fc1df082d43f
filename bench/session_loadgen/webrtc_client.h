// webrtc_client.h — one load-generator WebRTC audio client, built from the transceiver's own
// components: a Chrome-like audio offer, the answer's few facts, ICE checks
// (IceClientChecker; when to check and nominate per client profile: ClientIceAgent; answers
// to the server's own checks: IceBindingResponder), DTLS-SRTP as the DTLS server (the
// transceiver answers setup:active), and Opus RTP at 50 packets/s that resends one
// pre-encoded frame with fresh sequence numbers and timestamps. It owns one connected UDP
// socket (the transceiver and the relay key a flow by the client's address:port) and is
// driven by the load generator's single event-loop thread; it records when the
// transceiver's frames arrive and whether they authenticate. With ClientConfig::preshared it
// skips ICE and DTLS and sends the same SRTP to a floor echo (bench/floor_echo.cpp). With
// ClientConfig::data_channel the offer adds m=application and, once DTLS connects, the client
// runs an SCTP association (the transceiver's DataChannelEndpoint) and opens `oai-events`,
// the Realtime event channel of a /v1/realtime/calls session.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client_ice_agent.h"
#include "clock.h"
#include "datachannel/data_channel_endpoint.h"
#include "dtls/dtls_transport.h"
#include "ice/ice_client.h"
#include "ice_responder.h"
#include "net_address.h"
#include "srtp/srtp_session.h"

namespace rtce::loadgen {

// What the client puts in its offer.
struct ClientOffer {
  std::string ice_ufrag, ice_pwd;
  uint32_t ssrc = 0;
  std::string cname;
  uint64_t session_id = 0;
};

// Fresh random credentials, SSRC and CNAME.
ClientOffer make_client_offer();
// A minimal Chrome-like audio offer: one sendrecv audio section, BUNDLE, rtcp-mux, Opus/111,
// ice-options:trickle without candidates, sha-256 fingerprint, setup:actpass; with
// `data_channel`, Chrome's m=application section after it (SCTP port 5000).
std::string build_offer_sdp(const ClientOffer& offer, std::string_view fingerprint_sha256,
                            bool data_channel = false);

// What the client needs from the answer.
struct ParsedAnswer {
  std::string ice_ufrag, ice_pwd;
  std::vector<uint8_t> fingerprint;  // sha-256
  std::string setup;                 // active | passive | actpass
  SocketAddress candidate;           // the first UDP candidate
};
// nullopt with `error` set when a needed line is missing or malformed.
std::optional<ParsedAnswer> parse_answer_sdp(std::string_view sdp, std::string& error);

// Shared by every client of one run.
struct ClientConfig {
  std::shared_ptr<DtlsContext> dtls;
  std::vector<uint8_t> opus_frame;  // the one 20 ms Opus payload every packet carries
  uint8_t payload_type = 111;
  bool send_audio = true;
  ClientProfile profile = ClientProfile::browser;
  ConsentChecks consent = ConsentChecks::periodic;
  ClientIceTiming ice_timing;
  Nanos connect_timeout = 10'000'000'000;  // POST start -> DTLS connected
  std::vector<SrtpProfile> srtp_profiles = {SrtpProfile::aead_aes_128_gcm, SrtpProfile::aes128_cm_sha1_80};
  // Floor mode (bench/floor_echo.cpp): no ICE and no DTLS; the client is connected from
  // start() with these SRTP keys, as if a handshake had exported them.
  std::optional<SrtpKeys> preshared;
  // An SCTP association and the `oai-events` channel over DTLS (see above).
  bool data_channel = false;
};

// Media counters and the arrival record of one client.
struct ClientStats {
  uint64_t stun_sent = 0, stun_ok = 0, stun_failed = 0;
  uint64_t stun_sent_after_ice_connected = 0;  // consent checks (pion + none: must stay 0)
  uint64_t stun_requests_answered = 0;         // the server's checks, answered 200
  uint64_t stun_requests_refused = 0;          // answered with an error or dropped
  uint64_t role_conflicts = 0;                 // 487 sent or received, or our role switched
  uint64_t dtls_dropped_before_ice = 0;        // pion: DTLS before ICE connected is dropped
  uint64_t rtp_sent = 0, send_errors = 0;
  uint64_t rtp_received = 0;       // authenticated SRTP (whole run)
  uint64_t rtp_auth_failed = 0;    // did not unprotect
  uint64_t rtcp_received = 0;      // authenticated SRTCP
  uint64_t payload_identical = 0;  // echoed payload byte-identical to ours (passthrough)
  uint64_t other_datagrams = 0;
  bool channel_open = false;         // oai-events acknowledged by the transceiver
  uint64_t channel_messages_in = 0;  // events the transceiver sent on it (session.created, ...)
  std::string channel_failure;
  // Within the measurement window.
  uint64_t window_frames = 0;
  uint64_t window_seq_gaps = 0;     // frames missing between consecutive arrivals
  std::vector<float> intervals_ms;  // consecutive arrival intervals
};

class WebRtcClient {
 public:
  enum class State { connecting, connected, failed };

  // Opens and connects the UDP socket (bound to local_ip, ephemeral port); throws
  // std::runtime_error when it cannot.
  WebRtcClient(uint32_t index, const ClientConfig& config, ClientOffer offer, ParsedAnswer answer,
               std::string location, Nanos post_started, Nanos answered_at, const SocketAddress& local_ip);
  ~WebRtcClient();
  WebRtcClient(const WebRtcClient&) = delete;
  WebRtcClient& operator=(const WebRtcClient&) = delete;

  int fd() const { return fd_; }
  uint32_t index() const { return index_; }
  State state() const { return state_; }
  const std::string& failure() const { return failure_; }
  const std::string& location() const { return location_; }
  Nanos post_started() const { return post_started_; }
  Nanos connected_at() const { return connected_at_; }
  Nanos answered_at() const { return answered_at_; }
  Nanos ice_ok_at() const { return ice_.succeeded_at(); }         // first STUN success
  Nanos ice_connected_at() const { return ice_.connected_at(); }  // nominated and succeeded
  Nanos first_echo_at() const { return first_echo_at_; }          // first authenticated RTP
  Nanos last_echo_at() const { return last_echo_at_; }
  const ClientStats& stats() const { return stats_; }
  const char* srtp_profile() const;

  // Sends the first connectivity check and arms the DTLS server.
  void start(Nanos now);
  // One datagram from the socket. arrival: the kernel's receive time (monotonic clock).
  void handle_datagram(std::span<uint8_t> datagram, Nanos arrival, Nanos now);
  // Check retransmission and consent, DTLS timers, the connect deadline. Returns when it
  // next needs to run.
  Nanos on_timer(Nanos now);
  // When on_timer next needs to run, without running anything (after a datagram moved a
  // deadline: a DTLS flight sent, ICE connected).
  Nanos next_wakeup(Nanos now) const;
  // One RTP packet with the shared Opus frame.
  void send_frame(Nanos now);
  // Frames arriving in [start, end) are measured; reserves the interval record up front.
  void set_window(Nanos start, Nanos end);
  void fail(std::string reason);

 private:
  void send_check(const ClientIceAgent::Check& check, Nanos now);
  void handle_stun(std::span<uint8_t> datagram, Nanos now);
  void on_ice_connected(Nanos now);
  void send_datagram(std::span<const uint8_t> data);
  void on_dtls_connected(const SrtpKeys& keys);
  void start_data_channel(Nanos now);
  void pump_data_channel(Nanos now);
  void handle_rtp(std::span<uint8_t> packet, Nanos arrival);

  const uint32_t index_;
  const ClientConfig& config_;
  ClientOffer offer_;
  ParsedAnswer answer_;
  std::string location_;
  Nanos post_started_;
  Nanos answered_at_;
  int fd_ = -1;

  State state_ = State::connecting;
  std::string failure_;
  Nanos connected_at_ = 0;
  Nanos first_echo_at_ = 0, last_echo_at_ = 0;
  Nanos now_ = 0;

  ClientIceAgent ice_;
  IceClientChecker checker_;
  IceBindingResponder responder_;
  bool controlling_ = true;
  bool check_outstanding_ = false;
  std::unique_ptr<DtlsTransport> dtls_;
  std::optional<SrtpSession> srtp_out_, srtp_in_;
  std::unique_ptr<DataChannelEndpoint> channel_;
  bool channel_requested_ = false;
  Nanos next_channel_pump_ = INT64_MAX;

  uint16_t seq_;
  uint32_t timestamp_;
  bool marker_ = true;

  Nanos window_start_ = INT64_MAX, window_end_ = INT64_MAX;
  Nanos last_arrival_ = 0;
  uint16_t last_seq_ = 0;
  ClientStats stats_;
};

const char* to_string(WebRtcClient::State state);

}  // namespace rtce::loadgen
