// session.cpp — see session.h.
#include "session.h"

#include <spdlog/spdlog.h>

#include "random.h"
#include "rtp/rtcp.h"
#include "rtp/rtp.h"

namespace rtce {

namespace {

constexpr int kRtpClock = 48000;
constexpr uint32_t kSamplesPer20ms = 960;    // at the RTP clock
constexpr size_t kMaxDecodedSamples = 5760;  // 120 ms at 48 kHz, Opus' longest packet
constexpr size_t kPacketScratch = 1500;
constexpr size_t kOutputFrames = 50;  // 1 s of backend audio queued for playout
constexpr size_t kMaxEvents = 20;
constexpr Nanos kRtcpInterval = 1'000'000'000;
// Playout that found nothing to play for this long counts as stopped
// (output_audio_buffer.stopped): backends deliver audio in bursts, not frame by frame.
constexpr Nanos kOutputStopAfter = 100'000'000;
constexpr std::string_view kRealtimeEventsLabel = "oai-events";
// A talkspurt (or a cleared output) ends with a few frames of Opus silence rather than a
// stop: a receiver whose packets just stop conceals the gap (NetEq's expansion fades out over
// hundreds of ms), so a barge-in would still be heard. One 20 ms CELT frame of silence, the
// packet Janus and others use for the same reason.
constexpr uint8_t kOpusSilenceFrame[] = {0xf8, 0xff, 0xfe};
constexpr int kTrailingSilenceFrames = 5;
// ICE restarts per session: a burst of 3, then one per 10 s. A restart costs a STUN
// exchange and a ufrag mint; a client restarting in a loop is broken or hostile.
constexpr double kRestartBurst = 3;
constexpr double kRestartsPerSecond = 0.1;

template <typename T>
T random_value() {
  T v;
  fill_random(&v, sizeof v);
  return v;
}

JitterBufferConfig jitter_config(const TransceiverConfig& c) {
  JitterBufferConfig j;
  j.target_delay = c.jitter_delay;
  return j;
}

OpusEncoderConfig encoder_config(const TransceiverConfig& c) {
  OpusEncoderConfig e;
  e.complexity = c.opus_complexity;
  e.bitrate_bps = c.opus_bitrate;
  return e;
}

std::vector<std::pair<std::string, std::string>> parse_headers(const std::vector<std::string>& lines) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& line : lines) {
    auto colon = line.find(':');
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    out.emplace_back(line.substr(0, colon), value);
  }
  return out;
}

}  // namespace

Session::Session(SessionPlan plan, SessionEnvironment env, Nanos now)
    : plan_(std::move(plan)),
      env_(std::move(env)),
      created_at_(now),
      ice_({plan_.local_ufrag, plan_.local_pwd, plan_.remote_ufrag, plan_.remote_pwd},
           {env_.config.consent_timeout, 2'000'000'000, env_.config.stun_error_replies_per_second}),
      receive_stats_(kRtpClock),
      send_stats_(plan_.ssrc, kRtpClock),
      out_seq_(random_value<uint16_t>()),
      out_timestamp_(random_value<uint32_t>()),
      pacer_(now),
      packet_scratch_(kPacketScratch) {
  if (env_.config.opus_passthrough) {
    opus_output_.emplace(kOutputFrames);
  } else {
    jitter_.emplace(jitter_config(env_.config));
    decoder_.emplace(env_.config.sample_rate);
    encoder_.emplace(env_.config.sample_rate, encoder_config(env_.config));
    output_.emplace(env_.config.sample_rate, kOutputFrames);
    pcm_scratch_.resize(kMaxDecodedSamples);
  }
  DtlsTransport::Callbacks callbacks;
  callbacks.send = [this](std::span<const uint8_t> d) {
    // The first flight, while the client's ICE may not be connected yet: kept to re-send
    // the moment it nominates (see on_ice_progress).
    if (!ice_was_connected_ && early_flight_len_ == 0 && d.size() <= early_flight_.size()) {
      std::memcpy(early_flight_.data(), d.data(), d.size());
      early_flight_len_ = d.size();
    }
    send(d);
  };
  callbacks.on_connected = [this](const SrtpKeys& keys) { on_dtls_connected(keys, now_); };
  callbacks.on_failed = [this](std::string_view reason) {
    dtls_failure_ = reason;
    end(SessionEnd::dtls_failed, now_);
  };
  callbacks.on_closed = [this] { end(SessionEnd::peer_closed, now_); };
  callbacks.on_application_data = [this](std::span<const uint8_t> packet) {
    if (data_channel_)
      data_channel_->handle_packet(packet, now_);
    else
      env_.metrics.drops[static_cast<size_t>(DatagramDrop::no_data_channel)].add();
  };
  DtlsTransport::Config dtls_config;
  dtls_config.handshake_timeout = env_.config.connect_timeout;
  dtls_ = std::make_unique<DtlsTransport>(env_.dtls, plan_.dtls_role, plan_.remote_fingerprint,
                                          std::move(callbacks), dtls_config);
  next_rtcp_at_ = now + kRtcpInterval;
}

Session::~Session() {
  // A backend must not call back into a session being destroyed.
  if (backend_ && backend_state_ != "closed") backend_->close("session destroyed");
}

void Session::send(std::span<const uint8_t> payload) {
  if (!has_path_) return;
  env_.sender.send(path_, payload);
  ++packets_out_;
  bytes_out_ += payload.size();
}

Session::StunVerdict Session::handle_stun(std::span<const uint8_t> request, const MediaPath& path,
                                          Nanos now) {
  now_ = now;
  if (ended_) return StunVerdict::rejected;
  auto result = ice_.handle_request(request, path.client, packet_scratch_, now);
  if (result.reply_len > 0) env_.sender.send(path, {packet_scratch_.data(), result.reply_len});
  if (result.reply_suppressed) env_.metrics.stun_error_replies_suppressed.add();
  if (!result.authenticated || result.outcome != IceLiteSession::Outcome::success)
    return StunVerdict::rejected;
  if (result.replayed) return StunVerdict::replayed;
  if (result.completed_restart) complete_ice_restart(now);
  const PathKey key = PathKey::of(path);
  if (!has_path_) {
    switch_media_path(path);
  } else if (key == PathKey::of(path_)) {
    on_authenticated(path, now);  // the same pair, maybe through another relay hop
  } else if (result.nominated) {
    add_event({{"type", "path.changed"}, {"client", path.client.to_string()}, {"by", "nomination"}});
    env_.metrics.path_switches.add();
    switch_media_path(path);
  } else {
    add_candidate_path(path);
  }
  // One triggered check on a pair's first valid check: a controlling client that nominates
  // on a timer (or only on a peer's check, as Pion does) nominates now instead of 200 ms on.
  if (size_t n = ice_.build_triggered_check(path.client, packet_scratch_); n > 0) {
    env_.sender.send(path, {packet_scratch_.data(), n});
    env_.metrics.ice_triggered_checks.add();
  }
  on_ice_progress(now);
  return StunVerdict::accepted;
}

bool Session::handle_stun_response(std::span<const uint8_t> response) {
  return !ended_ && ice_.handle_response(response);
}

void Session::on_ice_progress(Nanos now) {
  // As DTLS client, the ClientHello goes out on the first authenticated check: browsers
  // accept it before they nominate, and that saves them a round trip. Full-ICE clients
  // such as Pion drop DTLS that arrives before their own ICE is connected, so when the
  // session becomes connected (nomination, or the fallback) and the client has sent no DTLS
  // yet, the same first flight goes out again at once instead of after the 100 ms
  // retransmission timer. A duplicate is harmless: DTLS discards a repeated record.
  if (plan_.dtls_role == DtlsTransport::Role::client && dtls_->state() == DtlsTransport::State::idle &&
      has_path_)
    dtls_->start(now);
  if (ice_was_connected_ || ice_.state() != IceLiteSession::State::connected) return;
  ice_was_connected_ = true;
  if (early_flight_len_ > 0 && dtls_->state() == DtlsTransport::State::connecting &&
      dtls_->stats().datagrams_received == 0)
    send({early_flight_.data(), early_flight_len_});
}

void Session::switch_media_path(const MediaPath& path) {
  const PathKey key = PathKey::of(path);
  if (has_path_ && !(PathKey::of(path_) == key)) {
    env_.router.unroute(PathKey::of(path_), *this);
    // The gap is measured when the first authenticated media arrives on the new path.
    if (last_media_at_ != 0) switch_gap_from_ = last_media_at_;
  }
  // A candidate that becomes the media path is no longer a candidate.
  for (size_t i = 0; i < candidate_count_; ++i) {
    if (PathKey::of(candidates_[i]) == key) {
      candidates_[i] = candidates_[--candidate_count_];
      break;
    }
  }
  path_ = path;
  has_path_ = true;
  env_.router.route(key, *this);
}

void Session::add_candidate_path(const MediaPath& path) {
  const PathKey key = PathKey::of(path);
  for (size_t i = 0; i < candidate_count_; ++i) {
    if (PathKey::of(candidates_[i]) == key) {
      candidates_[i] = path;  // the latest relay hop
      return;
    }
  }
  if (candidate_count_ == kMaxCandidatePaths) {  // forget the oldest
    env_.router.unroute(PathKey::of(candidates_[0]), *this);
    for (size_t i = 1; i < kMaxCandidatePaths; ++i) candidates_[i - 1] = candidates_[i];
    --candidate_count_;
  }
  candidates_[candidate_count_++] = path;
  env_.router.route(key, *this);
}

void Session::on_authenticated(const MediaPath& path, Nanos now) {
  ice_.refresh_consent(now);
  if (!has_path_) return;
  if (PathKey::of(path) == PathKey::of(path_)) {
    last_media_at_ = now;
    if (switch_gap_from_ != 0) {
      const Nanos gap = now - switch_gap_from_;
      switch_gap_from_ = 0;
      env_.metrics.observe_path_gap(static_cast<double>(gap) * 1e-9);
      add_event({{"type", "path.gap"}, {"gap_ms", static_cast<double>(gap) / 1e6}});
    }
    if (!path.same_route(path_)) {
      // The relay hop changed (a restarted relay forwards from a new port, or another relay
      // of the VIP took the flow): replies follow it. The client saw nothing change.
      env_.metrics.relay_hop_moves.add();
      add_event({{"type", "relay.moved"}, {"relay", path.send_to.to_string()}});
      path_ = path;
    }
    return;
  }
  // Authenticated media from a candidate: the client is there now (SRTP replay protection
  // makes a copied packet fail before this point).
  add_event({{"type", "path.changed"}, {"client", path.client.to_string()}, {"by", "media"}});
  env_.metrics.path_switches.add();
  switch_media_path(path);
}

void Session::release_paths() {
  env_.router.unroute_ufrag(plan_.local_ufrag, *this);
  if (!pending_local_ufrag_.empty()) env_.router.unroute_ufrag(pending_local_ufrag_, *this);
  if (has_path_) env_.router.unroute(PathKey::of(path_), *this);
  for (size_t i = 0; i < candidate_count_; ++i) env_.router.unroute(PathKey::of(candidates_[i]), *this);
  candidate_count_ = 0;
}

std::string Session::etag() const { return "\"" + std::to_string(ice_generation_) + "\""; }

Session::IceRestartVerdict Session::begin_ice_restart(const IceRestartRequest& request, Nanos now) {
  if (ended_) return IceRestartVerdict::ended;
  auto count = [this](IceRestartResult r) { env_.metrics.ice_restarts[static_cast<size_t>(r)].add(); };
  if (!request.if_match.empty() && request.if_match != "*" && request.if_match != etag()) {
    count(IceRestartResult::precondition_failed);
    return IceRestartVerdict::precondition_failed;
  }
  // Candidates only, or the credentials in force (or pending): trickle, which an ICE-lite
  // server does not need (it learns the client's addresses from its checks).
  const auto* pending = ice_.pending_credentials();
  if (request.remote_ufrag.empty() || request.remote_ufrag == ice_.credentials().remote_ufrag ||
      (pending && request.remote_ufrag == pending->remote_ufrag))
    return IceRestartVerdict::trickle;
  if (request.if_match.empty()) {
    count(IceRestartResult::precondition_required);
    return IceRestartVerdict::precondition_required;
  }
  if (restart_tokens_at_ == 0) restart_tokens_at_ = now;
  restart_tokens_ =
      std::min(kRestartBurst, restart_tokens_ + (now - restart_tokens_at_) * 1e-9 * kRestartsPerSecond);
  restart_tokens_at_ = now;
  if (restart_tokens_ < 1) {
    count(IceRestartResult::rate_limited);
    return IceRestartVerdict::rate_limited;
  }
  restart_tokens_ -= 1;
  if (!pending_local_ufrag_.empty()) {
    env_.router.unroute_ufrag(pending_local_ufrag_, *this);
    count(IceRestartResult::replaced);
  }
  if (!ice_.begin_restart({request.local_ufrag, request.local_pwd, request.remote_ufrag, request.remote_pwd}))
    return IceRestartVerdict::ended;  // consent already lapsed: the client must call again
  pending_local_ufrag_ = request.local_ufrag;
  env_.router.route_ufrag(pending_local_ufrag_, *this);
  ++ice_generation_;
  count(IceRestartResult::started);
  add_event({{"type", "ice.restart_started"}, {"generation", ice_generation_}});
  spdlog::info("session {}: ICE restart {} (server ufrag {})", plan_.id, ice_generation_,
               pending_local_ufrag_);
  return IceRestartVerdict::started;
}

void Session::complete_ice_restart(Nanos now) {
  // The new credentials nominated: the old server ufrag no longer reaches this session.
  env_.router.unroute_ufrag(plan_.local_ufrag, *this);
  const auto& credentials = ice_.credentials();
  plan_.local_ufrag = credentials.local_ufrag;
  plan_.local_pwd = credentials.local_pwd;
  plan_.remote_ufrag = credentials.remote_ufrag;
  plan_.remote_pwd = credentials.remote_pwd;
  pending_local_ufrag_.clear();
  env_.metrics.ice_restarts[static_cast<size_t>(IceRestartResult::completed)].add();
  add_event({{"type", "ice.restarted"},
             {"generation", ice_generation_},
             {"at_path", has_path_ ? path_.client.to_string() : ""}});
  // The backend sees the same session id go on; the client may be somewhere else now.
  if (backend_ && backend_state_ != "closed")
    backend_->send_event({{"type", "session.ice_restarted"},
                          {"generation", ice_generation_},
                          {"client_address", has_path_ ? path_.client.to_string() : ""}});
  (void)now;
}

bool Session::handle_dtls(std::span<const uint8_t> record, Nanos now) {
  now_ = now;
  if (ended_) return false;
  const uint64_t bad_before = dtls_->stats().bad_datagrams;
  const auto state = dtls_->state();
  if (state != DtlsTransport::State::connecting && state != DtlsTransport::State::connected &&
      !(state == DtlsTransport::State::idle && plan_.dtls_role == DtlsTransport::Role::server))
    return false;
  dtls_->handle_datagram(record, now);
  return dtls_->stats().bad_datagrams == bad_before;
}

void Session::on_dtls_connected(const SrtpKeys& keys, Nanos now) {
  try {
    srtp_in_.emplace(keys.profile, SrtpSession::Direction::inbound, keys.remote_key_salt);
    srtp_out_.emplace(keys.profile, SrtpSession::Direction::outbound, keys.local_key_salt);
  } catch (const std::exception& e) {
    dtls_failure_ = std::string("SRTP setup: ") + e.what();
    end(SessionEnd::dtls_failed, now);
    return;
  }
  connected_at_ = now;
  env_.metrics.sessions_connected.add();
  env_.metrics.observe_setup(static_cast<double>(now - plan_.offer_received_at) * 1e-9);
  pacer_.restart(now);
  add_event({{"type", "connected"},
             {"srtp_profile", srtp_profile_name(keys.profile)},
             {"time_to_connected_ms", (now - plan_.offer_received_at) / 1'000'000}});
  spdlog::info("session {} connected in {} ms ({}, client {})", plan_.id,
               (now - plan_.offer_received_at) / 1'000'000, srtp_profile_name(keys.profile),
               path_.client.to_string());
  start_backend();
  start_data_channel(now);
}

void Session::start_data_channel(Nanos now) {
  if (!plan_.data_channel || ended_) return;
  DataChannelEndpoint::Config config;
  config.local_port = plan_.data_channel->local_port;
  config.remote_port = plan_.data_channel->remote_port;
  config.max_message_size = plan_.data_channel->local_max_message_size;
  config.remote_max_message_size = plan_.data_channel->remote_max_message_size;
  config.dtls_client = plan_.dtls_role == DtlsTransport::Role::client;
  DataChannelEndpoint::Callbacks callbacks;
  callbacks.send = [this](std::span<const uint8_t> packet) { dtls_->send_application_data(packet); };
  callbacks.on_open = [this](uint16_t stream, std::string_view label, std::string_view protocol) {
    on_channel_open(stream, label, protocol);
  };
  callbacks.on_message = [this](uint16_t stream, std::span<const uint8_t> message, bool binary) {
    on_channel_message(stream, message, binary);
  };
  callbacks.on_closed = [this](uint16_t stream) {
    add_event({{"type", "datachannel.closed"}, {"stream", stream}});
    std::erase_if(channel_labels_, [stream](const auto& c) { return c.first == stream; });
    if (events_stream_ == stream) {
      events_stream_.reset();
      realtime_.reset();
    }
  };
  callbacks.on_failed = [this](std::string_view reason) {
    // The association is gone; the audio is not. A text-only session has nothing left.
    data_channel_failure_ = reason;
    env_.metrics.data_channel_failures.add();
    add_event({{"type", "datachannel.failed"}, {"reason", std::string(reason)}});
    spdlog::warn("session {}: data channel failed: {}", plan_.id, reason);
    events_stream_.reset();
    realtime_.reset();
    channel_labels_.clear();
    if (!plan_.has_audio) end(SessionEnd::data_channel_failed, now_);
  };
  try {
    data_channel_ = std::make_unique<DataChannelEndpoint>(config, std::move(callbacks));
    data_channel_->start(now);
  } catch (const std::exception& e) {
    data_channel_.reset();
    data_channel_failure_ = e.what();
    env_.metrics.data_channel_failures.add();
    spdlog::warn("session {}: no data channel: {}", plan_.id, e.what());
    if (!plan_.has_audio) end(SessionEnd::data_channel_failed, now);
  }
}

void Session::on_channel_open(uint16_t stream, std::string_view label, std::string_view protocol) {
  env_.metrics.data_channels_opened.add();
  channel_labels_.emplace_back(stream, std::string(label));
  add_event({{"type", "datachannel.open"},
             {"stream", stream},
             {"label", std::string(label)},
             {"protocol", std::string(protocol)}});
  if (!plan_.realtime || label != kRealtimeEventsLabel || realtime_) return;
  RealtimeEventChannel::Callbacks callbacks;
  callbacks.send_to_client = [this, stream](std::string_view text) {
    if (data_channel_ && data_channel_->send_text(stream, text)) env_.metrics.data_channel_messages_out.add();
  };
  callbacks.send_to_backend = [this](const nlohmann::json& event) {
    if (backend_ && backend_state_ != "closed") backend_->send_event(event);
  };
  callbacks.clear_output = [this] { clear_output(); };
  RealtimeEventChannel::Limits limits;
  // A Realtime-protocol backend transcribes, reduces noise and runs semantic VAD itself.
  const bool realtime_backend = !env_.config.backend_url.empty() && env_.config.backend_dialect == "realtime";
  limits.transcription_supported = realtime_backend;
  limits.noise_reduction_supported = realtime_backend;
  limits.semantic_vad_supported = realtime_backend;
  // An event is one message: the smaller of what we announced and the layer's own bound.
  if (plan_.data_channel && plan_.data_channel->local_max_message_size > 0)
    limits.max_message_bytes = std::min(limits.max_message_bytes, plan_.data_channel->local_max_message_size);
  seen_realtime_drops_ = {};
  realtime_ = std::make_unique<RealtimeEventChannel>(plan_.realtime_session, limits, std::move(callbacks));
  events_stream_ = stream;
  realtime_->on_open(now_);
}

void Session::on_channel_message(uint16_t stream, std::span<const uint8_t> message, bool binary) {
  env_.metrics.data_channel_messages_in.add();
  if (realtime_ && events_stream_ == stream) {
    realtime_->on_client_message(message, binary, now_);
    mirror_realtime_drops();
    return;
  }
  // Any other channel: a JSON object goes to the backend as datachannel.message.
  auto it = std::find_if(channel_labels_.begin(), channel_labels_.end(),
                         [stream](const auto& c) { return c.first == stream; });
  auto parsed =
      binary ? nlohmann::json() : nlohmann::json::parse(message.begin(), message.end(), nullptr, false);
  if (!parsed.is_object() || !backend_ || backend_state_ == "closed") {
    env_.metrics.drops[static_cast<size_t>(DatagramDrop::data_channel_refused)].add();
    return;
  }
  backend_->send_event({{"type", "datachannel.message"},
                        {"label", it == channel_labels_.end() ? "" : it->second},
                        {"message", std::move(parsed)}});
}

void Session::mirror_realtime_drops() {
  if (!realtime_) return;
  const auto& drops = realtime_->stats().drops;
  for (size_t i = 0; i < drops.size(); ++i) {
    env_.metrics.realtime_drops[i].add(drops[i] - seen_realtime_drops_[i]);
    seen_realtime_drops_[i] = drops[i];
  }
}

void Session::clear_output() {
  if (output_) output_->clear();
  if (opus_output_) opus_output_->clear();
  // The event layer reports the clear itself (output_audio_buffer.cleared).
  output_playing_ = false;
  output_idle_since_ = 0;
}

void Session::note_output_playing(bool played, Nanos now) {
  if (!realtime_) return;
  if (played) {
    output_idle_since_ = 0;
    if (!output_playing_) {
      output_playing_ = true;
      realtime_->on_output_started(now);
    }
    return;
  }
  if (!output_playing_) return;
  if (output_idle_since_ == 0) {
    output_idle_since_ = now;
  } else if (now - output_idle_since_ >= kOutputStopAfter) {
    output_playing_ = false;
    output_idle_since_ = 0;
    realtime_->on_output_stopped(now);
  }
}

void Session::start_backend() {
  BackendSessionInfo info;
  info.session_id = plan_.id;
  info.sample_rate = env_.config.sample_rate;
  info.client_address = path_.client.to_string();
  info.path = env_.path_kind;
  info.user_agent = plan_.user_agent;
  info.opus_passthrough = env_.config.opus_passthrough;
  info.session_config = plan_.realtime_session;
  if (env_.config.backend_url.empty()) {
    EchoBackendConfig echo;
    echo.mode = env_.config.echo_mode == "parrot" ? EchoBackendConfig::Mode::parrot
                                                  : EchoBackendConfig::Mode::loopback;
    echo.loopback_delay = env_.config.echo_delay;
    backend_ = make_echo_backend(env_.io, echo, std::move(info), *this, env_.metrics.backend);
  } else {
    WebSocketBackendConfig ws;
    ws.url = env_.config.backend_url;
    ws.headers = parse_headers(env_.config.backend_headers);
    ws.connect_timeout = env_.config.backend_connect_timeout;
    ws.dialect = backend_dialect_from_name(env_.config.backend_dialect).value_or(BackendDialect::rtcedge);
    ws.ca_file = env_.config.backend_ca_file;
    backend_ = make_websocket_backend(env_.io, ws, std::move(info), *this, env_.metrics.backend);
  }
  backend_state_ = "open";
}

void Session::handle_srtp(std::span<uint8_t> packet, const MediaPath& path, Nanos now) {
  now_ = now;
  if (ended_) return;
  if (!srtp_in_) {
    env_.metrics.drops[static_cast<size_t>(DatagramDrop::not_ready)].add();
    return;
  }
  const bool authenticated = is_rtcp(packet) ? handle_rtcp(packet, now) : handle_rtp(packet, now);
  if (authenticated && !ended_) on_authenticated(path, now);
}

bool Session::handle_rtp(std::span<uint8_t> packet, Nanos now) {
  size_t len = packet.size();
  if (srtp_in_->unprotect_rtp(packet.data(), len) != SrtpError::ok) {
    env_.metrics.drops[static_cast<size_t>(DatagramDrop::srtp_failed)].add();
    return false;
  }
  auto rtp = parse_rtp({packet.data(), len}, plan_.audio_level_ext_id);
  if (!rtp || rtp->payload_type != plan_.opus_payload_type) {
    // Authenticated all the same: the client is alive and on this path.
    env_.metrics.drops[static_cast<size_t>(DatagramDrop::not_webrtc)].add();
    return true;
  }
  env_.metrics.rtp_in.add();
  ++packets_in_;
  bytes_in_ += len;
  remote_ssrc_ = rtp->ssrc;
  receive_stats_.update(rtp->seq, rtp->timestamp, now);
  if (env_.config.opus_passthrough) {
    if (backend_) backend_->send_opus(rtp->payload);
    return true;
  }
  jitter_->push(rtp->seq, rtp->timestamp, rtp->payload, now);
  return true;
}

bool Session::handle_rtcp(std::span<uint8_t> packet, Nanos now) {
  size_t len = packet.size();
  if (srtp_in_->unprotect_rtcp(packet.data(), len) != SrtpError::ok) {
    env_.metrics.drops[static_cast<size_t>(DatagramDrop::srtp_failed)].add();
    return false;
  }
  env_.metrics.rtcp_in.add();
  RtcpCompound compound;
  if (parse_rtcp_compound({packet.data(), len}, compound) != RtcpParseError::ok) return true;
  if (compound.sender_info) receive_stats_.on_sender_report(*compound.sender_info, now);
  for (const auto& block : compound.blocks())
    if (block.ssrc == plan_.ssrc) send_stats_.on_report_block(block, now);
  for (size_t i = 0; i < compound.bye_ssrc_count; ++i)
    if (remote_ssrc_ != 0 && compound.bye_ssrcs[i] == remote_ssrc_) end(SessionEnd::peer_closed, now);
  return true;
}

void Session::tick(Nanos now) {
  now_ = now;
  if (ended_) return;
  ice_.on_timer(now);
  // A restart that completed on the nomination fallback (a client that never nominates).
  if (!pending_local_ufrag_.empty() && !ice_.restart_pending()) complete_ice_restart(now);
  if (ice_.state() == IceLiteSession::State::disconnected) return end(SessionEnd::consent_expired, now);
  on_ice_progress(now);  // after the nomination fallback
  if (!connected_at_ && now - plan_.offer_received_at > env_.config.connect_timeout)
    return end(SessionEnd::connect_timeout, now);
  if (auto t = dtls_->next_timeout(now); t && *t <= now) dtls_->on_timer(now);
  if (ended_ || !connected_at_) return;
  if (data_channel_) data_channel_->pump(now);
  if (ended_ || !plan_.has_audio) return;
  if (jitter_) pump_inbound_audio(now);  // passthrough hands packets over as they arrive
  pump_outbound_audio(now);
  if (now >= next_rtcp_at_) send_rtcp_report(now);
}

void Session::pump_inbound_audio(Nanos now) {
  const size_t frame = static_cast<size_t>(samples_per_20ms(env_.config.sample_rate));
  for (int guard = 0; guard < 16; ++guard) {
    auto out = jitter_->pop(now);
    if (out.kind == JitterBuffer::Output::Kind::none) break;
    int samples;
    if (out.kind == JitterBuffer::Output::Kind::frame) {
      samples = decoder_->decode(out.payload, pcm_scratch_);
    } else if (out.fec_available) {
      samples = decoder_->decode_fec(out.payload, std::span(pcm_scratch_).first(frame));
      env_.metrics.jitter_fec.add();
    } else {
      samples = decoder_->conceal(std::span(pcm_scratch_).first(frame));
      env_.metrics.jitter_plc.add();
    }
    if (samples < 0) {
      env_.metrics.opus_decode_errors.add();
      continue;
    }
    for (size_t off = 0; off + frame <= static_cast<size_t>(samples); off += frame)
      if (backend_) backend_->send_audio(std::span<const int16_t>(pcm_scratch_.data() + off, frame));
  }
  // Mirror the buffer's own counters into the worker's (single writer: this thread).
  const auto& c = jitter_->counters();
  env_.metrics.jitter_lost.add(c.lost - seen_lost_);
  env_.metrics.jitter_late.add(c.late - seen_late_);
  env_.metrics.jitter_reordered.add(c.reordered - seen_reordered_);
  seen_lost_ = c.lost;
  seen_late_ = c.late;
  seen_reordered_ = c.reordered;
}

void Session::pump_outbound_audio(Nanos now) {
  const int due = pacer_.due(now);
  const size_t frame = static_cast<size_t>(samples_per_20ms(env_.config.sample_rate));
  uint8_t opus[1275];
  for (int i = 0; i < due; ++i) {
    if (env_.config.opus_passthrough) {
      if (!opus_output_->empty()) {
        send_opus_frame(opus_output_->front(), now);
        opus_output_->pop();
        note_output_playing(true, now);
        trailing_silence_ = kTrailingSilenceFrames;
        continue;
      }
    } else if (output_->pop(std::span(pcm_scratch_).first(frame))) {
      const int n = encoder_->encode(std::span<const int16_t>(pcm_scratch_.data(), frame), opus);
      if (n > 0) {
        send_opus_frame({opus, static_cast<size_t>(n)}, now);
        note_output_playing(true, now);
        trailing_silence_ = kTrailingSilenceFrames;
        continue;
      }
    }
    note_output_playing(false, now);
    if (trailing_silence_ > 0) {
      --trailing_silence_;
      send_opus_frame(kOpusSilenceFrame, now);
      continue;
    }
    // Nothing to play: the frame's time passes in silence (like DTX); the next packet
    // starts a talkspurt.
    out_timestamp_ += kSamplesPer20ms;
    out_marker_ = true;
  }
}

void Session::send_opus_frame(std::span<const uint8_t> opus, Nanos now) {
  uint8_t* buf = packet_scratch_.data();
  const size_t header = write_rtp_header(packet_scratch_, plan_.opus_payload_type, out_marker_, out_seq_,
                                         out_timestamp_, plan_.ssrc);
  if (header + opus.size() + SrtpSession::max_trailer > packet_scratch_.size()) return;
  std::memcpy(buf + header, opus.data(), opus.size());
  size_t len = header + opus.size();
  send_stats_.on_packet_sent(opus.size(), out_timestamp_, now);
  ++out_seq_;
  out_timestamp_ += kSamplesPer20ms;
  out_marker_ = false;
  if (srtp_out_->protect_rtp(buf, len, packet_scratch_.size()) != SrtpError::ok) return;
  env_.metrics.rtp_out.add();
  send({buf, len});
}

void Session::send_rtcp_report(Nanos now) {
  next_rtcp_at_ = now + kRtcpInterval;
  std::optional<RtcpReportBlock> block;
  if (remote_ssrc_ != 0) block = receive_stats_.make_report_block(remote_ssrc_, now);
  uint8_t* buf = packet_scratch_.data();
  size_t len;
  if (send_stats_.packets_sent() > 0) {
    const auto info = send_stats_.make_sender_info(NtpTime::from_unix_nanos(wall_now_unix_nanos()), now);
    len = build_sr_sdes(packet_scratch_, info, block ? &*block : nullptr, plan_.cname);
  } else {
    len = build_rr_sdes(packet_scratch_, plan_.ssrc, block ? &*block : nullptr, plan_.cname);
  }
  if (len == 0 || srtp_out_->protect_rtcp(buf, len, packet_scratch_.size()) != SrtpError::ok) return;
  env_.metrics.rtcp_out.add();
  send({buf, len});
  if (backend_ && ++reports_sent_ % 5 == 0) {
    nlohmann::json quality = {{"type", "session.quality"},
                              {"jitter_ms", receive_stats_.jitter_ms()},
                              {"loss", receive_stats_.last_fraction_lost() / 256.0}};
    if (auto rtt = send_stats_.last_rtt()) quality["rtt_ms"] = static_cast<double>(*rtt) / 1e6;
    backend_->send_event(quality);
  }
}

void Session::end(SessionEnd reason, Nanos now) {
  if (ended_) return;
  ended_ = true;
  end_reason_ = reason;
  ended_at_ = now;
  realtime_.reset();
  if (data_channel_) data_channel_->close();
  if (dtls_) dtls_->close();
  ice_.close();
  if (backend_ && backend_state_ != "closed") {
    backend_state_ = "closed";
    backend_->close(kSessionEndNames[static_cast<size_t>(reason)]);
  }
  add_event({{"type", "ended"}, {"reason", kSessionEndNames[static_cast<size_t>(reason)]}});
  if (reason == SessionEnd::dtls_failed)
    spdlog::warn("session {} ended: {} ({})", plan_.id, kSessionEndNames[static_cast<size_t>(reason)],
                 dtls_failure_);
  else
    spdlog::info("session {} ended: {}", plan_.id, kSessionEndNames[static_cast<size_t>(reason)]);
}

void Session::on_backend_audio(std::span<const int16_t> pcm_20ms) {
  if (ended_ || !output_) return;
  const uint64_t before = output_->frames_dropped();
  if (!output_->push(pcm_20ms)) env_.metrics.output_frames_dropped.add();
  env_.metrics.output_frames_dropped.add(output_->frames_dropped() - before);
}

void Session::on_backend_opus(std::span<const uint8_t> opus_packet) {
  if (ended_ || !opus_output_) return;
  const uint64_t before = opus_output_->dropped();
  if (!opus_output_->push(opus_packet)) env_.metrics.output_frames_dropped.add();
  env_.metrics.output_frames_dropped.add(opus_output_->dropped() - before);
}

void Session::on_backend_clear() {
  const bool was_playing = output_playing_;
  clear_output();
  if (realtime_ && was_playing) realtime_->on_output_stopped(now_);
  add_event({{"type", "clear"}});
}

void Session::on_backend_event(const nlohmann::json& event) {
  add_event(event);
  const std::string type = event.value("type", "");
  if (type == "session.end") return end(SessionEnd::backend_ended, now_);
  if (type == "datachannel.send" && data_channel_) {
    // The backend writes to a client-opened channel by label (sessions other than Realtime calls).
    const std::string label = event.value("label", "");
    auto it = std::find_if(channel_labels_.begin(), channel_labels_.end(),
                           [&](const auto& c) { return c.second == label; });
    auto message = event.find("message");
    if (it != channel_labels_.end() && message != event.end() &&
        data_channel_->send_text(it->first,
                                 message->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)))
      env_.metrics.data_channel_messages_out.add();
    return;
  }
  // The edge tells the client about its session itself; a Realtime server's own
  // session.created/updated would reach the client twice.
  if (type == "session.created" || type == "session.updated") return;
  if (realtime_) {
    realtime_->on_backend_event(event, now_);
    mirror_realtime_drops();
  }
}

void Session::on_backend_closed(std::string_view reason) {
  if (backend_state_ == "closed") return;
  backend_state_ = "closed";
  add_event({{"type", "backend.closed"}, {"reason", std::string(reason)}});
  // The backend hanging up on purpose is not a failure.
  end(reason.rfind("session_end", 0) == 0 ? SessionEnd::backend_ended : SessionEnd::backend_failed, now_);
}

void Session::add_event(nlohmann::json event) {
  event["at_ms"] = (monotonic_now() - created_at_) / 1'000'000;
  events_.push_back(std::move(event));
  if (events_.size() > kMaxEvents) events_.pop_front();
}

const char* Session::state_name() const {
  if (ended_) return "ended";
  if (connected_at_) return "connected";
  if (has_path_) return "connecting";
  return "new";
}

nlohmann::json Session::snapshot(Nanos now) const {
  nlohmann::json j;
  j["id"] = plan_.id;
  j["state"] = state_name();
  j["ice_state"] = to_string(ice_.state());
  j["dtls_state"] = dtls_ ? dtls_state_name(dtls_->state()) : "closed";
  j["path"] = env_.path_kind;
  j["client_address"] = has_path_ ? path_.client.to_string() : "";
  if (has_path_ && path_.relayed()) {
    j["relay_address"] = path_.send_to.to_string();
    j["vip"] = path_.vip.to_string();
  }
  j["codec"] = "opus/48000/2";
  j["mode"] = env_.config.opus_passthrough ? "passthrough" : "transcoding";
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
  j["age_ms"] = ((ended_ ? ended_at_ : now) - created_at_) / 1'000'000;
  if (ended_) j["end_reason"] = kSessionEndNames[static_cast<size_t>(end_reason_)];
  if (!dtls_failure_.empty()) j["dtls_failure"] = dtls_failure_;
  if (jitter_) {
    const auto& jc = jitter_->counters();
    j["jitter_buffer"] = {{"lost", jc.lost},
                          {"fec_recovered", jc.fec_recovered},
                          {"concealed", jc.plc},
                          {"late", jc.late},
                          {"reordered", jc.reordered}};
  }
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
  if (realtime_) j["realtime_session"] = realtime_->session();
  j["backend"] = {{"kind", env_.config.backend_url.empty() ? "echo-" + env_.config.echo_mode : "websocket"},
                  {"state", backend_state_}};
  j["events"] = nlohmann::json::array();
  for (const auto& e : events_) j["events"].push_back(e);
  return j;
}

}  // namespace rtce
