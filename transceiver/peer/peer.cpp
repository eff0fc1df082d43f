// peer.cpp — see peer.h.
#include "peer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "random.h"
#include "rtce_stun.h"
#include "rtp/rtcp.h"
#include "rtp/rtp.h"

namespace rtce {

namespace {

constexpr int kRtpClock = 48000;
constexpr uint32_t kSamplesPer20ms = 960;  // at the RTP clock
constexpr Nanos kRtcpInterval = 1'000'000'000;
// How often a data channel is pumped when nothing else is due: SCTP's own timers are far
// coarser (RTO >= 1 s, delayed SACK 200 ms), so 20 ms adds no protocol delay.
constexpr Nanos kChannelPumpInterval = 20'000'000;

// Where a datagram is built before it is handed on (the sender copies it into its batch):
// one per thread, since every use fills it and hands it on before returning, instead of
// 1.5 KB in every session.
std::span<uint8_t> packet_scratch() {
  thread_local std::array<uint8_t, 1500> buffer;
  return buffer;
}

template <typename T>
T random_value() {
  T v;
  fill_random(&v, sizeof v);
  return v;
}

}  // namespace

Peer::Peer(PeerPlan plan, PeerEnvironment env, Nanos now)
    : plan_(std::move(plan)),
      env_(std::move(env)),
      now_(now),
      ice_({plan_.local_ufrag, plan_.local_pwd, plan_.remote_ufrag, plan_.remote_pwd},
           {env_.settings.consent_timeout, env_.settings.nomination_wait,
            env_.settings.stun_error_replies_per_second}),
      receive_stats_(kRtpClock),
      send_stats_(plan_.ssrc, kRtpClock),
      out_seq_(random_value<uint16_t>()),
      out_timestamp_(random_value<uint32_t>()),
      next_rtcp_at_(now + kRtcpInterval) {
  DtlsTransport::Callbacks callbacks;
  callbacks.send = [this](std::span<const uint8_t> d) {
    // The first flight, while the client's ICE may not be connected yet: kept to re-send
    // the moment it nominates (see on_ice_progress).
    if (!ice_was_connected_ && early_flight_.empty()) early_flight_.assign(d.begin(), d.end());
    transmit(d);
  };
  callbacks.on_connected = [this](const SrtpKeys& keys) { on_dtls_connected(keys, now_); };
  callbacks.on_failed = [this](std::string_view reason) {
    dtls_failure_ = reason;
    close_with(SessionEnd::dtls_failed, now_);
  };
  callbacks.on_closed = [this] { close_with(SessionEnd::peer_closed, now_); };
  callbacks.on_application_data = [this](std::span<const uint8_t> packet) {
    if (data_channel_)
      data_channel_->handle_packet(packet, now_);
    else
      count(DatagramDrop::no_data_channel);
  };
  DtlsTransport::Config dtls_config;
  dtls_config.handshake_timeout = env_.settings.connect_timeout;
  // Without m=application nothing but SRTP follows the handshake: the SSL object (~60 KiB)
  // goes once the keys are exported (DtlsTransport keeps what a retransmitted final flight
  // and close_notify still need).
  dtls_config.release_after_handshake = !plan_.data_channel;
  dtls_ = std::make_unique<DtlsTransport>(env_.dtls, plan_.dtls_role, plan_.remote_fingerprint,
                                          std::move(callbacks), dtls_config);
}

Peer::~Peer() = default;

void Peer::transmit(std::span<const uint8_t> payload) {
  if (!has_path_) return;
  env_.out.send(path_, payload);
  ++packets_out_;
  bytes_out_ += payload.size();
}

void Peer::close_with(SessionEnd reason, Nanos now) {
  if (ended_) return;
  end(now);
  env_.observer.on_peer_closed(reason, now);
}

void Peer::handle(std::span<uint8_t> datagram, const MediaPath& path, Nanos now) {
  now_ = now;
  if (datagram.empty()) return count(DatagramDrop::not_webrtc);
  switch (rtce_classify_first_byte(datagram[0])) {
    case RTCE_FIRST_BYTE_STUN:
      // A Binding request names its server ufrag (that is how the worker found this Peer);
      // anything else can only be a response to one of our triggered checks.
      if (stun_request_server_ufrag(datagram)) return handle_stun(datagram, path, now);
      // Not a request: a response to a triggered check.
      if (!ended_ && ice_.handle_response(datagram)) {
        env_.metrics.stun_ok.add();
        return;
      }
      return count(DatagramDrop::stun_rejected);
    case RTCE_FIRST_BYTE_DTLS: env_.metrics.dtls_datagrams_in.add(); return handle_dtls(datagram, now);
    case RTCE_FIRST_BYTE_RTP: return handle_srtp(datagram, path, now);
    default: return count(DatagramDrop::not_webrtc);  // ZRTP, TURN, unassigned
  }
}

void Peer::handle_stun(std::span<const uint8_t> request, const MediaPath& path, Nanos now) {
  if (ended_) return count(DatagramDrop::stun_rejected);
  const std::span<uint8_t> scratch = packet_scratch();
  auto result = ice_.handle_request(request, path.client, scratch, now);
  if (result.reply_len > 0) env_.out.send(path, scratch.first(result.reply_len));
  if (result.reply_suppressed) env_.metrics.stun_error_replies_suppressed.add();
  if (!result.authenticated || result.outcome != IceLiteSession::Outcome::success)
    return count(DatagramDrop::stun_rejected);
  if (result.replayed) return count(DatagramDrop::stun_replayed);
  env_.metrics.stun_ok.add();
  const PathKey key = path.key;
  if (!has_path_) {
    switch_media_path(path);
  } else if (key == path_.key) {
    on_authenticated(path, now);  // the same pair, maybe through another relay hop
  } else if (result.nominated) {
    env_.log.add({{"type", "path.changed"}, {"client", path.client.to_string()}, {"by", "nomination"}}, now);
    env_.metrics.path_switches.add();
    switch_media_path(path);
  } else {
    add_candidate_path(path);
  }
  // After the path moved: the report names where the client is now.
  if (result.completed_restart) complete_ice_restart(now);
  // One triggered check on a pair's first valid check: a controlling client that nominates
  // on a timer (or only on a peer's check, as Pion does) nominates now instead of 200 ms on.
  if (size_t n = ice_.build_triggered_check(path.client, scratch); n > 0) {
    env_.out.send(path, scratch.first(n));
    env_.metrics.ice_triggered_checks.add();
  }
  on_ice_progress(now);
}

void Peer::on_ice_progress(Nanos now) {
  // As DTLS client, the ClientHello goes out on the first authenticated check: browsers
  // accept it before they nominate, and that saves them a round trip. Full-ICE clients
  // such as Pion drop DTLS that arrives before their own ICE is connected, so when the
  // session becomes connected (nomination, or the fallback) and the client has sent no DTLS
  // yet, the same first flight goes out again at once instead of after the 100 ms
  // retransmission timer. A duplicate is harmless: DTLS discards a repeated record.
  if (!connected_at_ && plan_.dtls_role == DtlsTransport::Role::client &&
      dtls_->state() == DtlsTransport::State::idle && has_path_)
    dtls_->start(now);
  if (ice_was_connected_ || ice_.state() != IceLiteSession::State::connected) return;
  ice_was_connected_ = true;
  if (!early_flight_.empty() && dtls_->state() == DtlsTransport::State::connecting &&
      dtls_->stats().datagrams_received == 0)
    transmit(early_flight_);
  std::vector<uint8_t>().swap(early_flight_);  // needed no more
}

void Peer::switch_media_path(const MediaPath& path) {
  const PathKey key = path.key;
  if (has_path_ && !(path_.key == key)) {
    env_.router.unroute(path_.key, *this);
    // The gap is measured when the first authenticated media arrives on the new path.
    if (last_media_at_ != 0) switch_gap_from_ = last_media_at_;
  }
  // A candidate that becomes the media path is no longer a candidate.
  for (size_t i = 0; i < candidate_count_; ++i) {
    if (candidates_[i].key == key) {
      candidates_[i] = candidates_[--candidate_count_];
      break;
    }
  }
  path_ = path;
  has_path_ = true;
  env_.router.route(key, *this);
}

void Peer::add_candidate_path(const MediaPath& path) {
  const PathKey key = path.key;
  for (size_t i = 0; i < candidate_count_; ++i) {
    if (candidates_[i].key == key) {
      candidates_[i] = path;  // the latest relay hop
      return;
    }
  }
  if (candidate_count_ == kMaxCandidatePaths) {  // forget the oldest
    env_.router.unroute(candidates_[0].key, *this);
    for (size_t i = 1; i < kMaxCandidatePaths; ++i) candidates_[i - 1] = candidates_[i];
    --candidate_count_;
  }
  candidates_[candidate_count_++] = path;
  env_.router.route(key, *this);
}

void Peer::on_authenticated(const MediaPath& path, Nanos now) {
  ice_.refresh_consent(now);
  if (!has_path_) return;
  if (path.key == path_.key) {
    last_media_at_ = now;
    if (switch_gap_from_ != 0) {
      const Nanos gap = now - switch_gap_from_;
      switch_gap_from_ = 0;
      env_.metrics.observe_path_gap(static_cast<double>(gap) * 1e-9);
      env_.log.add({{"type", "path.gap"}, {"gap_ms", static_cast<double>(gap) / 1e6}}, now);
    }
    if (!path.same_route(path_)) {
      // The relay hop changed (a restarted relay forwards from a new port, or another relay
      // of the VIP took the flow): replies follow it. The client saw nothing change.
      env_.metrics.relay_hop_moves.add();
      env_.log.add({{"type", "relay.moved"}, {"relay", path.send_to.to_string()}}, now);
      path_ = path;
    }
    return;
  }
  // Authenticated media from a candidate: the client is there now (SRTP replay protection
  // makes a copied packet fail before this point).
  env_.log.add({{"type", "path.changed"}, {"client", path.client.to_string()}, {"by", "media"}}, now);
  env_.metrics.path_switches.add();
  switch_media_path(path);
}

void Peer::release_paths() {
  env_.router.unroute_ufrag(plan_.local_ufrag, *this);
  if (!pending_local_ufrag_.empty()) env_.router.unroute_ufrag(pending_local_ufrag_, *this);
  if (has_path_) env_.router.unroute(path_.key, *this);
  for (size_t i = 0; i < candidate_count_; ++i) env_.router.unroute(candidates_[i].key, *this);
  candidate_count_ = 0;
}

std::string Peer::etag() const { return "\"" + std::to_string(ice_generation_) + "\""; }

bool if_match_names(std::string_view if_match, std::string_view etag) {
  // RFC 9110 section 13.1.1: "*", or a comma-separated list of entity tags compared strongly
  // (a weak tag, W/"...", never matches).
  size_t at = 0;
  while (at <= if_match.size()) {
    size_t comma = if_match.find(',', at);
    if (comma == std::string_view::npos) comma = if_match.size();
    std::string_view tag = if_match.substr(at, comma - at);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag == "*" || tag == etag) return true;
    at = comma + 1;
  }
  return false;
}

Peer::IceRestartVerdict Peer::begin_ice_restart(const IceRestartRequest& request, Nanos now) {
  if (ended_) return IceRestartVerdict::ended;
  auto count_result = [this](IceRestartResult r) { env_.metrics.ice_restarts[static_cast<size_t>(r)].add(); };
  if (!request.if_match.empty() && !if_match_names(request.if_match, etag())) {
    count_result(IceRestartResult::precondition_failed);
    return IceRestartVerdict::precondition_failed;
  }
  // Candidates only, or the credentials in force (or pending): trickle, which an ICE-lite
  // server does not need (it learns the client's addresses from its checks).
  const auto* pending = ice_.pending_credentials();
  if (request.remote_ufrag.empty() || request.remote_ufrag == ice_.credentials().remote_ufrag ||
      (pending && request.remote_ufrag == pending->remote_ufrag))
    return IceRestartVerdict::trickle;
  if (request.if_match.empty()) {
    count_result(IceRestartResult::precondition_required);
    return IceRestartVerdict::precondition_required;
  }
  if (!restart_budget_.take(now)) {
    count_result(IceRestartResult::rate_limited);
    return IceRestartVerdict::rate_limited;
  }
  if (!pending_local_ufrag_.empty()) {
    env_.router.unroute_ufrag(pending_local_ufrag_, *this);
    count_result(IceRestartResult::replaced);
  }
  if (!ice_.begin_restart({request.local_ufrag, request.local_pwd, request.remote_ufrag, request.remote_pwd}))
    return IceRestartVerdict::ended;  // consent already lapsed: the client must call again
  pending_local_ufrag_ = request.local_ufrag;
  env_.router.route_ufrag(pending_local_ufrag_, *this);
  ++ice_generation_;
  count_result(IceRestartResult::started);
  env_.log.add({{"type", "ice.restart_started"}, {"generation", ice_generation_}}, now);
  spdlog::info("session {}: ICE restart {} (server ufrag {})", plan_.id, ice_generation_,
               pending_local_ufrag_);
  return IceRestartVerdict::started;
}

void Peer::complete_ice_restart(Nanos now) {
  // The new credentials nominated: the old server ufrag no longer reaches this Peer.
  env_.router.unroute_ufrag(plan_.local_ufrag, *this);
  const auto& credentials = ice_.credentials();
  plan_.local_ufrag = credentials.local_ufrag;
  plan_.local_pwd = credentials.local_pwd;
  plan_.remote_ufrag = credentials.remote_ufrag;
  plan_.remote_pwd = credentials.remote_pwd;
  pending_local_ufrag_.clear();
  env_.metrics.ice_restarts[static_cast<size_t>(IceRestartResult::completed)].add();
  const std::string client = has_path_ ? path_.client.to_string() : "";
  env_.log.add({{"type", "ice.restarted"}, {"generation", ice_generation_}, {"at_path", client}}, now);
  // The backend sees the same session id go on; the client may be somewhere else now.
  env_.observer.on_peer_report(
      {{"type", "session.ice_restarted"}, {"generation", ice_generation_}, {"client_address", client}}, now);
}

void Peer::handle_dtls(std::span<const uint8_t> record, Nanos now) {
  const auto state = dtls_->state();
  if (ended_ || (state != DtlsTransport::State::connecting && state != DtlsTransport::State::connected &&
                 !(state == DtlsTransport::State::idle && plan_.dtls_role == DtlsTransport::Role::server)))
    return count(DatagramDrop::dtls_rejected);
  const uint64_t bad_before = dtls_->stats().bad_datagrams;
  dtls_->handle_datagram(record, now);
  if (dtls_->stats().bad_datagrams != bad_before) count(DatagramDrop::dtls_rejected);
}

void Peer::on_dtls_connected(const SrtpKeys& keys, Nanos now) {
  try {
    srtp_in_.emplace(keys.profile, SrtpSession::Direction::inbound, keys.remote_key_salt);
    srtp_out_.emplace(keys.profile, SrtpSession::Direction::outbound, keys.local_key_salt);
  } catch (const std::exception& e) {
    dtls_failure_ = std::string("SRTP setup: ") + e.what();
    close_with(SessionEnd::dtls_failed, now);
    return;
  }
  connected_at_ = now;
  env_.metrics.sessions_connected.add();
  env_.metrics.observe_setup(static_cast<double>(now - plan_.offer_received_at) * 1e-9);
  env_.log.add({{"type", "connected"},
                {"srtp_profile", srtp_profile_name(keys.profile)},
                {"time_to_connected_ms", (now - plan_.offer_received_at) / 1'000'000}},
               now);
  spdlog::info("session {} connected in {} ms ({}, client {})", plan_.id,
               (now - plan_.offer_received_at) / 1'000'000, srtp_profile_name(keys.profile),
               path_.client.to_string());
  env_.observer.on_peer_connected(now);
  start_data_channel(now);
}

void Peer::start_data_channel(Nanos now) {
  if (!plan_.data_channel || ended_) return;
  DataChannelEndpoint::Config config;
  config.local_port = plan_.data_channel->local_port;
  config.remote_port = plan_.data_channel->remote_port;
  config.max_message_size = plan_.data_channel->local_max_message_size;
  config.remote_max_message_size = plan_.data_channel->remote_max_message_size;
  config.dtls_client = plan_.dtls_role == DtlsTransport::Role::client;
  config.counters = &env_.metrics.data_channel;  // the worker's, exported per reason
  DataChannelEndpoint::Callbacks callbacks;
  callbacks.send = [this](std::span<const uint8_t> packet) { dtls_->send_application_data(packet); };
  callbacks.on_open = [this](uint16_t stream, std::string_view label, std::string_view protocol) {
    env_.metrics.data_channels_opened.add();
    channel_labels_.emplace_back(stream, std::string(label));
    env_.log.add({{"type", "datachannel.open"},
                  {"stream", stream},
                  {"label", std::string(label)},
                  {"protocol", std::string(protocol)}},
                 now_);
    env_.observer.on_channel_open(stream, label, protocol, now_);
  };
  callbacks.on_message = [this](uint16_t stream, std::span<const uint8_t> message, bool binary) {
    env_.metrics.data_channel_messages_in.add();
    env_.observer.on_channel_message(stream, message, binary, now_);
  };
  callbacks.on_closed = [this](uint16_t stream) {
    env_.log.add({{"type", "datachannel.closed"}, {"stream", stream}}, now_);
    std::erase_if(channel_labels_, [stream](const auto& c) { return c.first == stream; });
    env_.observer.on_channel_closed(stream, now_);
  };
  callbacks.on_failed = [this](std::string_view reason) {
    // The association is gone; the audio is not. A text-only session has nothing left.
    data_channel_failure_ = reason;
    env_.metrics.data_channel_failures.add();
    env_.log.add({{"type", "datachannel.failed"}, {"reason", std::string(reason)}}, now_);
    spdlog::warn("session {}: data channel failed: {}", plan_.id, reason);
    channel_labels_.clear();
    env_.observer.on_channels_failed(reason, now_);
    if (!plan_.has_audio) close_with(SessionEnd::data_channel_failed, now_);
  };
  try {
    data_channel_ = std::make_unique<DataChannelEndpoint>(config, std::move(callbacks));
    data_channel_->start(now);
  } catch (const std::exception& e) {
    data_channel_.reset();
    data_channel_failure_ = e.what();
    env_.metrics.data_channel_failures.add();
    spdlog::warn("session {}: no data channel: {}", plan_.id, e.what());
    env_.observer.on_channels_failed(e.what(), now);
    if (!plan_.has_audio) close_with(SessionEnd::data_channel_failed, now);
  }
}

bool Peer::send_channel_text(uint16_t stream, std::string_view text) {
  if (ended_ || !data_channel_ || !data_channel_->send_text(stream, text)) return false;
  env_.metrics.data_channel_messages_out.add();
  return true;
}

void Peer::handle_srtp(std::span<uint8_t> packet, const MediaPath& path, Nanos now) {
  if (ended_) return;
  if (!srtp_in_) return count(DatagramDrop::not_ready);
  const bool authenticated = is_rtcp(packet) ? handle_rtcp(packet, now) : handle_rtp(packet, now);
  if (authenticated && !ended_) on_authenticated(path, now);
}

bool Peer::handle_rtp(std::span<uint8_t> packet, Nanos now) {
  size_t len = packet.size();
  if (srtp_in_->unprotect_rtp(packet.data(), len) != SrtpError::ok) {
    count(DatagramDrop::srtp_failed);
    return false;
  }
  auto rtp = parse_rtp({packet.data(), len}, plan_.audio_level_ext_id);
  if (!rtp || rtp->payload_type != plan_.opus_payload_type) {
    // Authenticated all the same: the client is alive and on this path.
    count(DatagramDrop::not_webrtc);
    return true;
  }
  env_.metrics.rtp_in.add();
  ++packets_in_;
  bytes_in_ += len;
  remote_ssrc_ = rtp->ssrc;
  receive_stats_.update(rtp->seq, rtp->timestamp, now);
  env_.observer.on_peer_audio(*rtp, now);
  return true;
}

bool Peer::handle_rtcp(std::span<uint8_t> packet, Nanos now) {
  size_t len = packet.size();
  if (srtp_in_->unprotect_rtcp(packet.data(), len) != SrtpError::ok) {
    count(DatagramDrop::srtp_failed);
    return false;
  }
  env_.metrics.rtcp_in.add();
  RtcpCompound compound;
  if (parse_rtcp_compound({packet.data(), len}, compound) != RtcpParseError::ok) return true;
  if (compound.sender_info) receive_stats_.on_sender_report(*compound.sender_info, now);
  for (const auto& block : compound.blocks())
    if (block.ssrc == plan_.ssrc) send_stats_.on_report_block(block, now);
  for (size_t i = 0; i < compound.bye_ssrc_count; ++i)
    if (remote_ssrc_ != 0 && compound.bye_ssrcs[i] == remote_ssrc_) close_with(SessionEnd::peer_closed, now);
  return true;
}

void Peer::tick(Nanos now) {
  now_ = now;
  if (ended_) return;
  ice_.on_timer(now);
  // A restart that completed on the nomination fallback (a client that never nominates).
  if (!pending_local_ufrag_.empty() && !ice_.restart_pending()) complete_ice_restart(now);
  if (ice_.state() == IceLiteSession::State::disconnected)
    return close_with(SessionEnd::consent_expired, now);
  on_ice_progress(now);  // after the nomination fallback
  if (!connected_at_ && now - plan_.offer_received_at > env_.settings.connect_timeout)
    return close_with(SessionEnd::connect_timeout, now);
  // Once connected DTLS has no timer left (the last flight is answered, not retransmitted):
  // a connected call's visits do not touch the DTLS object.
  if (!connected_at_)
    if (auto t = dtls_->next_timeout(now); t && *t <= now) dtls_->on_timer(now);
  if (ended_ || !connected_at_) return;
  if (data_channel_) {
    data_channel_->pump(now);
    next_channel_pump_ = now + kChannelPumpInterval;
  }
  if (ended_ || !plan_.has_audio) return;
  if (now >= next_rtcp_at_) send_rtcp_report(now);
}

Nanos Peer::next_deadline(Nanos now) const {
  if (ended_) return std::numeric_limits<Nanos>::max();
  Nanos next = ice_.next_deadline();
  if (!connected_at_) {
    if (auto t = dtls_->next_timeout(now)) next = std::min(next, *t);
    return std::min(next, plan_.offer_received_at + env_.settings.connect_timeout + 1);
  }
  // SCTP keeps its own timers inside usrsctp (SctpStack::tick, run by any pump) and another
  // worker's timer run may queue output for this association: pumped at the frame cadence.
  if (data_channel_) next = std::min(next, next_channel_pump_);
  if (plan_.has_audio) next = std::min(next, next_rtcp_at_);
  return next;
}

void Peer::send_audio(std::span<const uint8_t> opus, Nanos now) {
  if (!srtp_out_ || ended_ || !plan_.has_audio) return;
  const std::span<uint8_t> scratch = packet_scratch();
  uint8_t* buf = scratch.data();
  const size_t header =
      write_rtp_header(scratch, plan_.opus_payload_type, out_marker_, out_seq_, out_timestamp_, plan_.ssrc);
  if (header + opus.size() + SrtpSession::max_trailer > scratch.size()) return;
  std::memcpy(buf + header, opus.data(), opus.size());
  size_t len = header + opus.size();
  send_stats_.on_packet_sent(opus.size(), out_timestamp_, now);
  ++out_seq_;
  out_timestamp_ += kSamplesPer20ms;
  out_marker_ = false;
  if (srtp_out_->protect_rtp(buf, len, scratch.size()) != SrtpError::ok) return;
  env_.metrics.rtp_out.add();
  transmit({buf, len});
}

void Peer::skip_audio_frame() {
  out_timestamp_ += kSamplesPer20ms;
  out_marker_ = true;
}

void Peer::send_rtcp_report(Nanos now) {
  next_rtcp_at_ = now + kRtcpInterval;
  std::optional<RtcpReportBlock> block;
  if (remote_ssrc_ != 0) block = receive_stats_.make_report_block(remote_ssrc_, now);
  const std::span<uint8_t> scratch = packet_scratch();
  uint8_t* buf = scratch.data();
  size_t len;
  if (send_stats_.packets_sent() > 0) {
    const auto info = send_stats_.make_sender_info(NtpTime::from_unix_nanos(wall_now_unix_nanos()), now);
    len = build_sr_sdes(scratch, info, block ? &*block : nullptr, plan_.cname);
  } else {
    len = build_rr_sdes(scratch, plan_.ssrc, block ? &*block : nullptr, plan_.cname);
  }
  if (len == 0 || srtp_out_->protect_rtcp(buf, len, scratch.size()) != SrtpError::ok) return;
  env_.metrics.rtcp_out.add();
  transmit({buf, len});
  if (++reports_sent_ % 5 == 0) {
    nlohmann::json quality = {{"type", "session.quality"},
                              {"jitter_ms", receive_stats_.jitter_ms()},
                              {"loss", receive_stats_.last_fraction_lost() / 256.0}};
    if (auto rtt = send_stats_.last_rtt()) quality["rtt_ms"] = static_cast<double>(*rtt) / 1e6;
    env_.observer.on_peer_report(quality, now);
  }
}

void Peer::end(Nanos now) {
  now_ = now;
  if (ended_) return;
  ended_ = true;
  if (data_channel_) data_channel_->close();
  if (dtls_) dtls_->close();
  ice_.close();
}

void Peer::snapshot_into(nlohmann::json& j) const {
  j["ice_state"] = to_string(ice_.state());
  j["dtls_state"] = dtls_ ? dtls_state_name(dtls_->state()) : "closed";
  j["client_address"] = has_path_ ? path_.client.to_string() : "";
  j["transport"] = !has_path_ ? "" : path_.key.transport == RTCE_TRANSPORT_TCP ? "tcp" : "udp";
  if (has_path_ && path_.relayed()) {
    j["relay_address"] = path_.send_to.to_string();
    j["vip"] = path_.vip.to_string();
  }
  j["codec"] = "opus/48000/2";
  if (auto rtt = send_stats_.last_rtt())
    j["rtt_ms"] = static_cast<double>(*rtt) / 1e6;
  else
    j["rtt_ms"] = nullptr;
  j["jitter_ms"] = receive_stats_.jitter_ms();
  j["loss"] = receive_stats_.expected() > 0
                  ? static_cast<double>(std::max<int64_t>(0, receive_stats_.lost())) /
                        static_cast<double>(receive_stats_.expected())
                  : 0.0;
  j["remote_loss"] = send_stats_.remote_fraction_lost();
  j["remote_jitter_ms"] = send_stats_.remote_jitter_ms();
  j["packets_received"] = packets_in_;
  j["packets_sent"] = packets_out_;
  j["bytes_received"] = bytes_in_;
  j["bytes_sent"] = bytes_out_;
  j["rtp_packets_sent"] = send_stats_.packets_sent();
  j["rtp_packets_received"] = receive_stats_.received();
  j["time_to_connected_ms"] = connected_at_
                                  ? nlohmann::json((connected_at_ - plan_.offer_received_at) / 1'000'000)
                                  : nlohmann::json(nullptr);
  if (!dtls_failure_.empty()) j["dtls_failure"] = dtls_failure_;
  if (plan_.data_channel) {
    nlohmann::json dc = {
        {"state", data_channel_ ? "started" : (data_channel_failure_.empty() ? "idle" : "failed")},
        {"channels", nlohmann::json::array()}};
    for (const auto& [stream, label] : channel_labels_)
      dc["channels"].push_back({{"stream", stream}, {"label", label}});
    if (!data_channel_failure_.empty()) dc["failure"] = data_channel_failure_;
    j["data_channel"] = std::move(dc);
  }
  j["has_audio"] = plan_.has_audio;
  j["ice_generation"] = ice_generation_;
  j["ice_restart_pending"] = !pending_local_ufrag_.empty();
}

}  // namespace rtce
