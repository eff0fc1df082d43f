// webrtc_client.cpp — see webrtc_client.h.
#include "webrtc_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "random.h"
#include "rtce_stun.h"
#include "rtp/rtp.h"

namespace rtce::loadgen {

namespace {

constexpr uint32_t kSamplesPer20ms = 960;  // at the 48 kHz RTP clock
constexpr size_t kPacketCapacity = 1500;
// usrsctp's own timers are coarse (RTO >= 1 s, delayed SACK 200 ms): the transceiver pumps a
// channel at the frame cadence, and so does the client.
constexpr Nanos kChannelPumpInterval = 20'000'000;
constexpr const char* kEventsLabel = "oai-events";

std::string random_ice_chars(size_t n) {
  static const char* chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> raw(n);
  fill_random(raw.data(), raw.size());
  std::string out;
  for (uint8_t b : raw) out.push_back(chars[b & 63]);
  return out;
}

template <typename T>
T random_value() {
  T v;
  fill_random(&v, sizeof v);
  return v;
}

std::string_view trim_cr(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  return line;
}

// "a=candidate:1 1 udp 2130706431 127.0.0.1 3478 typ host" -> 127.0.0.1:3478 (UDP only).
std::optional<SocketAddress> parse_candidate(std::string_view value) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (pos < value.size() && fields.size() < 8) {
    const size_t space = value.find(' ', pos);
    const size_t end = space == std::string_view::npos ? value.size() : space;
    if (end > pos) fields.push_back(value.substr(pos, end - pos));
    pos = end + 1;
  }
  if (fields.size() < 6) return std::nullopt;
  if (fields[2] != "udp" && fields[2] != "UDP") return std::nullopt;
  const std::string ip(fields[4]);
  const std::string text = ip.find(':') != std::string::npos ? "[" + ip + "]:" + std::string(fields[5])
                                                             : ip + ":" + std::string(fields[5]);
  return SocketAddress::parse(text);
}

}  // namespace

ClientOffer make_client_offer() {
  ClientOffer offer;
  offer.ice_ufrag = random_ice_chars(8);
  offer.ice_pwd = random_ice_chars(24);
  offer.ssrc = random_value<uint32_t>() | 1;
  offer.cname = random_ice_chars(16);
  offer.session_id = random_value<uint64_t>() >> 2;
  return offer;
}

std::string build_offer_sdp(const ClientOffer& o, std::string_view fingerprint_sha256, bool data_channel) {
  std::string s;
  s.reserve(1024);
  auto line = [&s](std::string_view a, std::string_view b = {}, std::string_view c = {}) {
    s.append(a).append(b).append(c).append("\r\n");
  };
  line("v=0");
  line("o=- ", std::to_string(o.session_id), " 2 IN IP4 127.0.0.1");
  line("s=-");
  line("t=0 0");
  line(data_channel ? "a=group:BUNDLE 0 1" : "a=group:BUNDLE 0");
  line("a=extmap-allow-mixed");
  line("a=msid-semantic: WMS loadgen");
  line("m=audio 9 UDP/TLS/RTP/SAVPF 111");
  line("c=IN IP4 0.0.0.0");
  line("a=rtcp:9 IN IP4 0.0.0.0");
  line("a=ice-ufrag:", o.ice_ufrag);
  line("a=ice-pwd:", o.ice_pwd);
  line("a=ice-options:trickle");
  line("a=fingerprint:sha-256 ", fingerprint_sha256);
  line("a=setup:actpass");
  line("a=mid:0");
  line("a=sendrecv");
  line("a=msid:loadgen audio0");
  line("a=rtcp-mux");
  line("a=rtpmap:111 opus/48000/2");
  line("a=rtcp-fb:111 transport-cc");
  line("a=fmtp:111 minptime=10;useinbandfec=1");
  line("a=ssrc:", std::to_string(o.ssrc), " cname:" + o.cname);
  if (data_channel) {
    line("m=application 9 UDP/DTLS/SCTP webrtc-datachannel");
    line("c=IN IP4 0.0.0.0");
    line("a=ice-ufrag:", o.ice_ufrag);
    line("a=ice-pwd:", o.ice_pwd);
    line("a=ice-options:trickle");
    line("a=fingerprint:sha-256 ", fingerprint_sha256);
    line("a=setup:actpass");
    line("a=mid:1");
    line("a=sctp-port:5000");
    line("a=max-message-size:262144");
  }
  return s;
}

std::optional<ParsedAnswer> parse_answer_sdp(std::string_view sdp, std::string& error) {
  ParsedAnswer a;
  bool have_candidate = false;
  std::string fingerprint_text;
  size_t pos = 0;
  while (pos < sdp.size()) {
    const size_t nl = sdp.find('\n', pos);
    const std::string_view line =
        trim_cr(sdp.substr(pos, (nl == std::string_view::npos ? sdp.size() : nl) - pos));
    pos = nl == std::string_view::npos ? sdp.size() : nl + 1;
    auto value_of = [&line](std::string_view prefix) -> std::optional<std::string_view> {
      if (line.substr(0, prefix.size()) != prefix) return std::nullopt;
      return line.substr(prefix.size());
    };
    if (auto v = value_of("a=ice-ufrag:"); v && a.ice_ufrag.empty())
      a.ice_ufrag = *v;
    else if (auto v = value_of("a=ice-pwd:"); v && a.ice_pwd.empty())
      a.ice_pwd = *v;
    else if (auto v = value_of("a=fingerprint:sha-256 "); v && fingerprint_text.empty())
      fingerprint_text = *v;
    else if (auto v = value_of("a=setup:"); v && a.setup.empty())
      a.setup = *v;
    else if (auto v = value_of("a=candidate:"); v && !have_candidate) {
      if (auto c = parse_candidate(*v)) {
        a.candidate = *c;
        have_candidate = true;
      }
    }
  }
  if (a.ice_ufrag.empty() || a.ice_pwd.empty())
    error = "no a=ice-ufrag / a=ice-pwd";
  else if (fingerprint_text.empty())
    error = "no a=fingerprint:sha-256";
  else if ((a.fingerprint = parse_fingerprint(fingerprint_text)).size() != 32)
    error = "bad sha-256 fingerprint";
  else if (!have_candidate)
    error = "no UDP candidate";
  else if (a.setup != "active")
    error = "a=setup:" + a.setup + " (the load generator is the DTLS server: wants active)";
  else
    return a;
  return std::nullopt;
}

WebRtcClient::WebRtcClient(uint32_t index, const ClientConfig& config, ClientOffer offer, ParsedAnswer answer,
                           std::string location, Nanos post_started, Nanos answered_at,
                           const SocketAddress& local_ip)
    : index_(index),
      config_(config),
      offer_(std::move(offer)),
      answer_(std::move(answer)),
      location_(std::move(location)),
      post_started_(post_started),
      answered_at_(answered_at),
      ice_(config.profile, config.consent, config.ice_timing),
      checker_(answer_.ice_ufrag, answer_.ice_pwd, offer_.ice_ufrag),
      responder_(offer_.ice_ufrag, offer_.ice_pwd, answer_.ice_ufrag),
      seq_(random_value<uint16_t>()),
      timestamp_(random_value<uint32_t>()) {
  fd_ = ::socket(answer_.candidate.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  // Kernel receive timestamps: on loopback that is when the sender's sendmmsg delivered
  // the datagram, so the load generator's own scheduling does not blur the intervals.
  setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
  SocketAddress bind_to = local_ip;
  bind_to.set_port(0);
  if (::bind(fd_, bind_to.sa(), bind_to.len()) != 0 ||
      ::connect(fd_, answer_.candidate.sa(), answer_.candidate.len()) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error("UDP socket to " + answer_.candidate.to_string() + ": " + why);
  }
  if (config_.preshared) return;  // floor mode: no DTLS
  DtlsTransport::Callbacks callbacks;
  callbacks.send = [this](std::span<const uint8_t> d) { send_datagram(d); };
  callbacks.on_connected = [this](const SrtpKeys& keys) { on_dtls_connected(keys); };
  callbacks.on_failed = [this](std::string_view reason) { fail("dtls: " + std::string(reason)); };
  callbacks.on_closed = [this] { fail("dtls: peer sent close_notify"); };
  callbacks.on_application_data = [this](std::span<const uint8_t> packet) {
    if (channel_) channel_->handle_packet(packet, now_);
  };
  DtlsTransport::Config dtls_config;
  dtls_config.handshake_timeout = config_.connect_timeout;
  dtls_config.srtp_profiles = config_.srtp_profiles;
  dtls_ = std::make_unique<DtlsTransport>(config_.dtls, DtlsTransport::Role::server, answer_.fingerprint,
                                          std::move(callbacks), dtls_config);
}

WebRtcClient::~WebRtcClient() {
  channel_.reset();  // before the DTLS transport it sends through
  if (dtls_) dtls_->close();
  if (fd_ >= 0) ::close(fd_);
}

const char* WebRtcClient::srtp_profile() const {
  if (state_ != State::connected) return "";
  return srtp_profile_name(dtls_ ? dtls_->negotiated_profile() : config_.preshared->profile);
}

void WebRtcClient::fail(std::string reason) {
  if (state_ == State::failed) return;
  state_ = State::failed;
  failure_ = std::move(reason);
}

void WebRtcClient::send_datagram(std::span<const uint8_t> data) {
  if (::send(fd_, data.data(), data.size(), MSG_DONTWAIT) < 0) ++stats_.send_errors;
}

void WebRtcClient::start(Nanos now) {
  now_ = now;
  if (config_.preshared) return on_dtls_connected(*config_.preshared);
  // A browser's DTLS server is ready at once; Pion starts DTLS only once ICE is connected.
  if (config_.profile == ClientProfile::browser) dtls_->start(now);
  send_check(ice_.start(now), now);
}

void WebRtcClient::send_check(const ClientIceAgent::Check& check, Nanos now) {
  uint8_t buf[512];
  IceClientChecker::RequestOptions options;
  options.use_candidate = check.use_candidate;
  options.controlling = check.controlling;
  const size_t len = checker_.build_request(buf, options);
  if (len == 0) return fail("ice: cannot build a Binding request");
  if (check_outstanding_) ++stats_.stun_failed;  // the previous one got no answer
  check_outstanding_ = true;
  ++stats_.stun_sent;
  stats_.stun_sent_after_ice_connected = ice_.checks_after_connected();
  send_datagram({buf, len});
  now_ = now;
}

Nanos WebRtcClient::on_timer(Nanos now) {
  now_ = now;
  if (state_ == State::failed) return INT64_MAX;
  if (state_ == State::connecting && now - post_started_ > config_.connect_timeout) {
    fail(ice_.connected()        ? "connect timeout (ICE connected, DTLS not connected)"
         : ice_.pair_succeeded() ? "connect timeout (STUN success, never nominated)"
                                 : "connect timeout (no STUN success)");
    return INT64_MAX;
  }
  if (!dtls_) return INT64_MAX;  // floor mode: nothing runs on a timer
  if (auto check = ice_.poll(now)) send_check(*check, now);
  if (auto t = dtls_->next_timeout(now); t && *t <= now) dtls_->on_timer(now);
  if (channel_ && now >= next_channel_pump_) pump_data_channel(now);
  return next_wakeup(now);
}

Nanos WebRtcClient::next_wakeup(Nanos now) const {
  if (state_ == State::failed || !dtls_) return INT64_MAX;
  Nanos next = ice_.next_deadline();
  if (auto t = dtls_->next_timeout(now)) next = std::min(next, *t);
  if (state_ == State::connecting) next = std::min(next, post_started_ + config_.connect_timeout + 1);
  if (channel_) next = std::min(next, next_channel_pump_);
  return next;
}

void WebRtcClient::on_dtls_connected(const SrtpKeys& keys) {
  try {
    srtp_out_.emplace(keys.profile, SrtpSession::Direction::outbound, keys.local_key_salt);
    srtp_in_.emplace(keys.profile, SrtpSession::Direction::inbound, keys.remote_key_salt);
  } catch (const std::exception& e) {
    return fail(std::string("srtp: ") + e.what());
  }
  state_ = State::connected;
  connected_at_ = now_;
  if (config_.data_channel) start_data_channel(now_);
}

void WebRtcClient::start_data_channel(Nanos now) {
  DataChannelEndpoint::Config config;
  config.dtls_client = false;  // the transceiver answers setup:active
  DataChannelEndpoint::Callbacks callbacks;
  callbacks.send = [this](std::span<const uint8_t> packet) { dtls_->send_application_data(packet); };
  callbacks.on_open = [this](uint16_t, std::string_view label, std::string_view) {
    if (label == kEventsLabel) stats_.channel_open = true;
  };
  callbacks.on_message = [this](uint16_t, std::span<const uint8_t>, bool) { ++stats_.channel_messages_in; };
  callbacks.on_closed = [](uint16_t) {};
  callbacks.on_failed = [this](std::string_view reason) { stats_.channel_failure = reason; };
  try {
    channel_ = std::make_unique<DataChannelEndpoint>(config, std::move(callbacks));
    channel_->start(now);
  } catch (const std::exception& e) {
    channel_.reset();
    stats_.channel_failure = e.what();
    return;
  }
  next_channel_pump_ = now;
}

// Runs usrsctp's timers and queued output; opens oai-events once the association is up.
void WebRtcClient::pump_data_channel(Nanos now) {
  channel_->pump(now);
  if (!channel_requested_ && channel_->state() == DataChannelEndpoint::State::open) {
    channel_requested_ = true;
    if (!channel_->open_channel(kEventsLabel, "")) stats_.channel_failure = "open_channel refused";
  }
  next_channel_pump_ = now + kChannelPumpInterval;
}

void WebRtcClient::handle_datagram(std::span<uint8_t> d, Nanos arrival, Nanos now) {
  now_ = now;
  if (d.empty() || state_ == State::failed) return;
  ice_.on_traffic(now);
  const rtce_first_byte kind = rtce_classify_first_byte(d[0]);
  if (!dtls_ && kind != RTCE_FIRST_BYTE_RTP) {  // floor mode: SRTP only
    ++stats_.other_datagrams;
  } else if (kind == RTCE_FIRST_BYTE_STUN) {
    handle_stun(d, now);
  } else if (kind == RTCE_FIRST_BYTE_DTLS) {
    // Pion's DTLS is not listening before ICE is connected: an early flight is lost.
    if (config_.profile == ClientProfile::pion && !ice_.connected()) {
      ++stats_.dtls_dropped_before_ice;
      return;
    }
    dtls_->handle_datagram(d, now);
  } else if (kind == RTCE_FIRST_BYTE_RTP && srtp_in_) {
    if (is_rtcp(d)) {
      size_t len = d.size();
      if (srtp_in_->unprotect_rtcp(d.data(), len) == SrtpError::ok)
        ++stats_.rtcp_received;
      else
        ++stats_.rtp_auth_failed;
    } else {
      handle_rtp(d, arrival);
    }
  } else {
    ++stats_.other_datagrams;
  }
}

void WebRtcClient::handle_stun(std::span<uint8_t> d, Nanos now) {
  if (IceBindingResponder::is_request(d)) {
    uint8_t reply[512];
    bool controlling = ice_.controlling();
    const auto answered = responder_.answer(d, answer_.candidate, controlling, checker_.tie_breaker(), reply);
    if (answered.reply_len > 0) send_datagram({reply, answered.reply_len});
    switch (answered.outcome) {
      case IceBindingResponder::Outcome::role_switched:
        ++stats_.role_conflicts;
        ice_.on_role_switched(controlling);
        [[fallthrough]];
      case IceBindingResponder::Outcome::success:
        ++stats_.stun_requests_answered;
        if (auto check = ice_.on_peer_request(now)) send_check(*check, now);
        break;
      case IceBindingResponder::Outcome::role_conflict:
        ++stats_.role_conflicts;
        ++stats_.stun_requests_refused;
        break;
      default: ++stats_.stun_requests_refused; break;
    }
    return;
  }
  const auto response = checker_.process_response(d);
  switch (response.verdict) {
    case IceClientChecker::Verdict::success: {
      check_outstanding_ = false;
      ++stats_.stun_ok;
      const bool was_connected = ice_.connected();
      ice_.on_check_success(now);
      if (!was_connected && ice_.connected()) on_ice_connected(now);
      break;
    }
    case IceClientChecker::Verdict::error_response:
      check_outstanding_ = false;
      if (response.error_code == 487) {
        ++stats_.role_conflicts;
        if (auto check = ice_.on_role_conflict_response(now)) send_check(*check, now);
      } else {
        ++stats_.stun_failed;
      }
      break;
    case IceClientChecker::Verdict::unmatched: break;  // an answer to a check we gave up on
    default: ++stats_.stun_failed; break;
  }
}

void WebRtcClient::on_ice_connected(Nanos now) {
  if (config_.profile == ClientProfile::pion) dtls_->start(now);
}

void WebRtcClient::handle_rtp(std::span<uint8_t> packet, Nanos arrival) {
  size_t len = packet.size();
  if (srtp_in_->unprotect_rtp(packet.data(), len) != SrtpError::ok) {
    ++stats_.rtp_auth_failed;
    return;
  }
  const auto rtp = parse_rtp({packet.data(), len});
  if (!rtp) {
    ++stats_.other_datagrams;
    return;
  }
  ++stats_.rtp_received;
  if (first_echo_at_ == 0) first_echo_at_ = now_;
  last_echo_at_ = now_;
  if (rtp->payload.size() == config_.opus_frame.size() &&
      std::memcmp(rtp->payload.data(), config_.opus_frame.data(), rtp->payload.size()) == 0)
    ++stats_.payload_identical;
  if (arrival < window_start_ || arrival >= window_end_) return;
  if (stats_.window_frames > 0) {
    stats_.intervals_ms.push_back(static_cast<float>(static_cast<double>(arrival - last_arrival_) * 1e-6));
    const uint16_t step = static_cast<uint16_t>(rtp->seq - last_seq_);
    if (step > 1 && step < 1000) stats_.window_seq_gaps += step - 1u;
  }
  ++stats_.window_frames;
  last_arrival_ = arrival;
  last_seq_ = rtp->seq;
}

void WebRtcClient::send_frame(Nanos now) {
  now_ = now;
  if (state_ != State::connected || !config_.send_audio) return;
  uint8_t buf[kPacketCapacity];
  const size_t header = write_rtp_header(buf, config_.payload_type, marker_, seq_, timestamp_, offer_.ssrc);
  if (header + config_.opus_frame.size() + SrtpSession::max_trailer > sizeof buf) return;
  std::memcpy(buf + header, config_.opus_frame.data(), config_.opus_frame.size());
  size_t len = header + config_.opus_frame.size();
  ++seq_;
  timestamp_ += kSamplesPer20ms;
  marker_ = false;
  if (srtp_out_->protect_rtp(buf, len, sizeof buf) != SrtpError::ok) {
    ++stats_.send_errors;
    return;
  }
  ++stats_.rtp_sent;
  send_datagram({buf, len});
}

void WebRtcClient::set_window(Nanos start, Nanos end) {
  window_start_ = start;
  window_end_ = end;
  stats_.intervals_ms.reserve(static_cast<size_t>((end - start) / 20'000'000) * 5 / 4 + 16);
}

const char* to_string(WebRtcClient::State state) {
  switch (state) {
    case WebRtcClient::State::connecting: return "connecting";
    case WebRtcClient::State::connected: return "connected";
    case WebRtcClient::State::failed: return "failed";
  }
  return "?";
}

}  // namespace rtce::loadgen
