// call.cpp — see call.h.
#include "call.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

namespace rtce {

namespace {

constexpr int kMaxPacketMs = 120;  // Opus' longest packet, decoded whole at the Call's rate
constexpr size_t kMaxDecodedSamples = 48000 * kMaxPacketMs / 1000;
constexpr size_t kMaxOpusFrame = 320;     // 128 kbit/s at 20 ms; voice uses far less
constexpr size_t kMaxOpusEncoded = 1275;  // RFC 6716's largest frame
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

// PCM between the codec and its neighbours: decoded packets on their way to the backend, a
// queued frame on its way to the encoder (int16-aligned). One per thread rather than per call:
// both uses fill it and hand it on within one call of pump_*_audio, and a backend never calls
// back into a Call from inside send_audio (BackendListener), so nothing else writes it then.
std::span<int16_t> pcm_scratch() {
  thread_local std::vector<int16_t> buffer(kMaxDecodedSamples);
  return buffer;
}

size_t slot_bytes(const CallSettings& s) {
  return s.opus_passthrough && s.transport_audio == TransportAudio::opus
             ? kMaxOpusFrame
             : static_cast<size_t>(samples_per_20ms(s.sample_rate)) * 2;
}

}  // namespace

Call::Call(CallPlan plan, CallEnvironment env, Nanos now)
    : plan_(std::move(plan)),
      env_(std::move(env)),
      now_(now),
      pacer_(now),
      playout_(slot_bytes(env_.settings), env_.settings.playout_initial_frames,
               env_.settings.playout_max_frames),
      frame_samples_(static_cast<size_t>(samples_per_20ms(env_.settings.sample_rate))) {
  // A PCM transport codes its own frames: no Opus passthrough and nothing to decode here.
  if (env_.settings.transport_audio == TransportAudio::pcm) env_.settings.opus_passthrough = false;
  if (!env_.settings.opus_passthrough && env_.settings.transport_audio == TransportAudio::opus) {
    jitter_.emplace(env_.settings.jitter);
    decoder_.emplace(env_.settings.sample_rate);
    encoder_.emplace(env_.settings.sample_rate, env_.settings.encoder);
    // 120 ms at the Call's rate: the decoder runs at it.
    decode_samples_ =
        std::min(kMaxDecodedSamples, static_cast<size_t>(env_.settings.sample_rate) * kMaxPacketMs / 1000);
  }
  if (plan_.realtime) start_event_layer();
}

Call::~Call() {
  // A backend must not call back into a call being destroyed.
  if (backend_ && backend_state_ != BackendState::closed) backend_->close("session destroyed");
  close_sidebands("the call is gone");
}

// The event layer lives as long as the call: the browser's channel and the sidebands come
// and go around it.
void Call::start_event_layer() {
  RealtimeEventChannel::Callbacks callbacks;
  callbacks.send_to_client = [this](std::string_view text) {
    // A phone call has no client channel: its sidebands are its only clients.
    if (env_.settings.transport_audio == TransportAudio::pcm) return;
    // A closed or backed-up channel loses the event (an error reply owed to the client, say):
    // counted, as the layer's own drops are.
    if (!events_stream_ || !env_.transport.send_channel_text(*events_stream_, text))
      env_.metrics.realtime_drops[static_cast<size_t>(RealtimeDrop::unsent)].add();
  };
  callbacks.send_to_backend = [this](const nlohmann::json& event) { send_to_backend(event); };
  // The client's output_audio_buffer.clear and response.cancel: the layer acknowledges them
  // itself (output_audio_buffer.cleared), so it hears of no stop.
  callbacks.clear_output = [this] { clear_output(now_, ClearOrigin::event_layer); };
  callbacks.send_to_sideband = [this](EventSource sideband, std::string_view text) {
    for (auto& [id, link] : sidebands_) {
      if (id != sideband) continue;
      env_.metrics.sideband_messages_out.add();
      link->send_text(text);
    }
  };
  RealtimeEventChannel::Limits limits;
  limits.transcription_supported = env_.settings.backend_speaks_realtime;
  limits.noise_reduction_supported = env_.settings.backend_speaks_realtime;
  limits.semantic_vad_supported = env_.settings.backend_speaks_realtime;
  limits.max_sidebands = env_.settings.max_sidebands;
  limits.tool_timeout = env_.settings.tool_timeout;
  limits.sidebands_only = env_.settings.transport_audio == TransportAudio::pcm;
  // An event is one message: the smaller of what we announced and the layer's own bound.
  if (plan_.channel_max_message_size > 0)
    limits.max_message_bytes = std::min(limits.max_message_bytes, plan_.channel_max_message_size);
  realtime_ = std::make_unique<RealtimeEventChannel>(plan_.realtime_session, limits, std::move(callbacks));
}

void Call::on_connected(const CallConnection& connection, Nanos now) {
  now_ = now;
  if (ended_ || connected_) return;
  connected_ = true;
  // Calls that connect together (a burst of setups) would otherwise share a frame phase and
  // wake the worker together; a phase from the id spreads them over the 20 ms period.
  pacer_.restart(now + static_cast<Nanos>(std::hash<std::string>{}(plan_.id) % pacer_.period()));
  start_backend(connection);
}

void Call::start_backend(const CallConnection& connection) {
  BackendSessionInfo info;
  info.session_id = plan_.id;
  info.sample_rate = env_.settings.sample_rate;
  info.client_address = connection.client_address;
  info.path = connection.path_kind;
  info.user_agent = plan_.user_agent;
  info.opus_passthrough = env_.settings.opus_passthrough;
  info.session_config = plan_.realtime_session;
  info.metadata = connection.metadata;
  // The data-channel policy is the edge's: a Realtime backend would refuse the field.
  if (info.session_config.is_object()) info.session_config.erase("client");
  backend_ = env_.make_backend(std::move(info), *this);
  backend_state_ = backend_ ? BackendState::open : BackendState::closed;
}

void Call::send_to_backend(const nlohmann::json& event) {
  if (backend_ && backend_state_ == BackendState::open) backend_->send_event(event);
}

void Call::on_audio(uint16_t seq, uint32_t rtp_timestamp, std::span<const uint8_t> opus, Nanos now) {
  now_ = now;
  if (ended_) return;
  if (env_.settings.opus_passthrough) {
    if (backend_ && backend_state_ == BackendState::open) backend_->send_opus(opus);
    return;
  }
  if (!jitter_) return;  // a PCM transport's frames come through on_pcm_audio
  jitter_->push(seq, rtp_timestamp, opus, now);
  pump_inbound_audio(now);  // in order and in time: decoded now, not at the next frame
}

void Call::on_pcm_audio(std::span<const int16_t> pcm_20ms, Nanos now) {
  now_ = now;
  if (ended_ || env_.settings.transport_audio != TransportAudio::pcm || pcm_20ms.size() != frame_samples_)
    return;
  if (backend_ && backend_state_ == BackendState::open) backend_->send_audio(pcm_20ms);
}

void Call::on_transport_report(const nlohmann::json& event, Nanos now) {
  now_ = now;
  if (!ended_) send_to_backend(event);
}

void Call::on_transport_event(nlohmann::json event, Nanos now) {
  now_ = now;
  if (ended_) return;
  if (!realtime_) return send_to_backend(event);
  event["type"] = "rtcedge." + event.value("type", std::string("transport"));
  realtime_->on_backend_event(event, now);
  mirror_realtime_stats();
}

void Call::tick(Nanos now) {
  now_ = now;
  if (ended_) return;
  // A backend that keeps time on our deadlines (the echo) speaks first: what it hands over
  // now can play in this frame.
  if (backend_ && backend_state_ == BackendState::open && backend_->next_deadline() <= now)
    backend_->on_deadline(now);
  if (realtime_ && !ended_ && realtime_->next_deadline() <= now) {
    realtime_->on_deadline(now);
    mirror_realtime_stats();
  }
  if (ended_ || !connected_ || !plan_.has_audio) return;
  if (jitter_) pump_inbound_audio(now);  // a gap whose wait has run out
  pump_outbound_audio(now);
}

Nanos Call::next_deadline() const {
  if (ended_) return std::numeric_limits<Nanos>::max();
  Nanos next = std::numeric_limits<Nanos>::max();
  if (backend_ && backend_state_ == BackendState::open) next = backend_->next_deadline();
  if (connected_ && plan_.has_audio) next = std::min(next, pacer_.next_deadline());
  if (realtime_) next = std::min(next, realtime_->next_deadline());
  return next;
}

void Call::pump_inbound_audio(Nanos now) {
  const size_t frame = frame_samples_;
  const std::span<int16_t> pcm = pcm_scratch().first(decode_samples_);
  for (int guard = 0; guard < 16; ++guard) {
    auto out = jitter_->pop(now);
    if (out.kind == JitterBuffer::Output::Kind::none) break;
    int samples;
    if (out.kind == JitterBuffer::Output::Kind::frame) {
      samples = decoder_->decode(out.payload, pcm);
    } else if (out.fec_available) {
      samples = decoder_->decode_fec(out.payload, pcm.first(frame));
      env_.metrics.jitter_fec.add();
    } else {
      samples = decoder_->conceal(pcm.first(frame));
      env_.metrics.jitter_plc.add();
    }
    if (samples < 0) {
      env_.metrics.opus_decode_errors.add();
      continue;
    }
    for (size_t off = 0; off + frame <= static_cast<size_t>(samples); off += frame)
      if (backend_ && backend_state_ == BackendState::open) backend_->send_audio(pcm.subspan(off, frame));
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

void Call::pump_outbound_audio(Nanos now) {
  const int due = pacer_.due(now);
  uint8_t opus[kMaxOpusEncoded];
  for (int i = 0; i < due; ++i) {
    if (!playout_.empty()) {
      const auto frame = playout_.front();
      bool sent = false;
      if (env_.settings.transport_audio == TransportAudio::pcm) {
        const std::span<int16_t> pcm = pcm_scratch().first(frame_samples_);
        std::memcpy(pcm.data(), frame.data(), frame.size());
        env_.transport.send_pcm(pcm, now);
        sent = true;
      } else if (env_.settings.opus_passthrough) {
        env_.transport.send_audio(frame, now);
        sent = true;
      } else {
        // The slot holds PCM bytes; the scratch buffer gives them int16 alignment.
        const std::span<int16_t> pcm = pcm_scratch().first(frame_samples_);
        std::memcpy(pcm.data(), frame.data(), frame.size());
        const int n = encoder_->encode(pcm, opus);
        if (n > 0) {
          env_.transport.send_audio({opus, static_cast<size_t>(n)}, now);
          sent = true;
        }
      }
      playout_.pop();
      if (sent) {
        note_output_playing(true, now);
        if (env_.settings.transport_audio == TransportAudio::opus) trailing_silence_ = kTrailingSilenceFrames;
        continue;
      }
    }
    note_output_playing(false, now);
    if (trailing_silence_ > 0) {
      --trailing_silence_;
      env_.transport.send_audio(kOpusSilenceFrame, now);
      continue;
    }
    // Nothing to play: the frame's time passes in silence (like DTX); the next packet
    // starts a talkspurt.
    env_.transport.skip_audio_frame();
  }
}

void Call::queue_output(std::span<const uint8_t> frame) {
  if (ended_) return;
  if (!playout_.push(frame)) env_.metrics.output_frames_dropped.add();
}

void Call::on_backend_audio(std::span<const int16_t> pcm_20ms) {
  if (env_.settings.opus_passthrough || pcm_20ms.size() != frame_samples_) {
    if (!ended_) env_.metrics.output_frames_dropped.add();
    return;
  }
  queue_output({reinterpret_cast<const uint8_t*>(pcm_20ms.data()), pcm_20ms.size_bytes()});
}

void Call::on_backend_opus(std::span<const uint8_t> opus_packet) {
  if (!env_.settings.opus_passthrough) {
    if (!ended_) env_.metrics.output_frames_dropped.add();
    return;
  }
  queue_output(opus_packet);
}

void Call::clear_output(Nanos now, ClearOrigin origin) {
  const bool was_playing = output_playing_;
  const size_t dropped = playout_.clear();
  output_playing_ = false;
  output_idle_since_ = 0;
  // What the backend said but has not handed over yet no longer plays either.
  if (backend_ && backend_state_ == BackendState::open) backend_->discard_output();
  env_.log.add({{"type", "clear"}, {"frames", dropped}}, now);
  env_.transport.output_cleared(now);
  // A clear from the backend stops the output the event layer announced as started.
  if (origin == ClearOrigin::backend && realtime_ && was_playing) realtime_->on_output_stopped(now);
}

void Call::on_backend_clear() {
  if (!ended_) clear_output(now_, ClearOrigin::backend);
}

void Call::note_output_playing(bool played, Nanos now) {
  if (played) {
    output_idle_since_ = 0;
    if (!output_playing_) {
      output_playing_ = true;
      if (realtime_) realtime_->on_output_started(now);
    }
    return;
  }
  if (!output_playing_) return;
  if (output_idle_since_ == 0) {
    output_idle_since_ = now;
  } else if (now - output_idle_since_ >= kOutputStopAfter) {
    output_playing_ = false;
    output_idle_since_ = 0;
    if (realtime_) realtime_->on_output_stopped(now);
    env_.transport.output_segment_ended(now);
  }
}

void Call::on_channel_open(uint16_t stream, std::string_view label, std::string_view /*protocol*/,
                           Nanos now) {
  now_ = now;
  if (ended_) return;
  channel_labels_.emplace_back(stream, std::string(label));
  if (!realtime_ || label != kRealtimeEventsLabel || events_stream_) return;
  events_stream_ = stream;
  realtime_->on_open(now);
  mirror_realtime_stats();
}

void Call::on_channel_message(uint16_t stream, std::span<const uint8_t> message, bool binary, Nanos now) {
  now_ = now;
  if (ended_) return;
  if (realtime_ && events_stream_ == stream) {
    realtime_->on_client_message(message, binary, now);
    mirror_realtime_stats();
    return;
  }
  // Any other channel: a JSON object goes to the backend as datachannel.message.
  auto it = std::find_if(channel_labels_.begin(), channel_labels_.end(),
                         [stream](const auto& c) { return c.first == stream; });
  auto parsed =
      binary ? nlohmann::json() : nlohmann::json::parse(message.begin(), message.end(), nullptr, false);
  if (!parsed.is_object() || !backend_ || backend_state_ != BackendState::open) {
    env_.metrics.drops[static_cast<size_t>(DatagramDrop::data_channel_refused)].add();
    return;
  }
  backend_->send_event({{"type", "datachannel.message"},
                        {"label", it == channel_labels_.end() ? "" : it->second},
                        {"message", std::move(parsed)}});
}

void Call::on_channel_closed(uint16_t stream, Nanos now) {
  now_ = now;
  std::erase_if(channel_labels_, [stream](const auto& c) { return c.first == stream; });
  if (events_stream_ == stream) {
    events_stream_.reset();
    realtime_->on_client_closed();
  }
}

void Call::on_channels_failed(Nanos now) {
  now_ = now;
  if (events_stream_) realtime_->on_client_closed();
  events_stream_.reset();
  channel_labels_.clear();
}

std::optional<EventSource> Call::attach_sideband(std::shared_ptr<SidebandLink> link, Nanos now) {
  now_ = now;
  if (!realtime_ || ended_ || !link || realtime_->sidebands() >= env_.settings.max_sidebands) {
    env_.metrics.sidebands_refused.add();
    return std::nullopt;
  }
  // Listed first: attaching sends session.created (and what a gap missed) to it at once.
  const EventSource id = next_sideband_++;
  sidebands_.emplace_back(id, std::move(link));
  if (!realtime_->attach_sideband(id, now)) {
    sidebands_.pop_back();
    env_.metrics.sidebands_refused.add();
    return std::nullopt;
  }
  env_.metrics.sidebands_attached.add();
  mirror_realtime_stats();
  return id;
}

void Call::on_sideband_message(EventSource sideband, std::string_view message, Nanos now) {
  now_ = now;
  if (!realtime_ || ended_) return;
  env_.metrics.sideband_messages_in.add();
  realtime_->on_sideband_message(sideband, message, now);
  mirror_realtime_stats();
}

void Call::detach_sideband(EventSource sideband, Nanos now) {
  now_ = now;
  std::erase_if(sidebands_, [sideband](const auto& s) { return s.first == sideband; });
  if (realtime_) realtime_->detach_sideband(sideband, now);
}

void Call::on_sideband_undelivered(EventSource sideband, std::string json_text, Nanos now) {
  now_ = now;
  if (!realtime_ || ended_) return;
  realtime_->on_sideband_undelivered(sideband, std::move(json_text));
  mirror_realtime_stats();
}

void Call::close_sidebands(std::string_view reason) {
  for (auto& [id, link] : sidebands_) link->close(reason);
  sidebands_.clear();
}

void Call::mirror_realtime_stats() {
  if (!realtime_) return;
  const auto& now = realtime_->stats();
  for (size_t i = 0; i < now.drops.size(); ++i)
    env_.metrics.realtime_drops[i].add(now.drops[i] - seen_realtime_.drops[i]);
  env_.metrics.sideband_missed_events.add(now.missed_events - seen_realtime_.missed_events);
  env_.metrics.tool_calls_timed_out.add(now.tool_calls_timed_out - seen_realtime_.tool_calls_timed_out);
  seen_realtime_ = now;
}

void Call::on_backend_event(const nlohmann::json& event) {
  if (ended_) return;
  env_.log.add(event, now_);
  const std::string type = event.value("type", "");
  if (type == "session.end") return finish(SessionEnd::backend_ended);
  if (type == "datachannel.send") {
    // The backend writes to a client-opened channel by label (calls other than Realtime ones).
    const std::string label = event.value("label", "");
    auto it = std::find_if(channel_labels_.begin(), channel_labels_.end(),
                           [&](const auto& c) { return c.second == label; });
    auto message = event.find("message");
    if (it != channel_labels_.end() && message != event.end())
      env_.transport.send_channel_text(
          it->first, message->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  // The edge tells the client about its session itself; a Realtime server's own
  // session.created/updated would reach the client twice.
  if (type == "session.created" || type == "session.updated") return;
  if (realtime_) {
    realtime_->on_backend_event(event, now_);
    mirror_realtime_stats();
  }
}

void Call::on_backend_closed(std::string_view reason) {
  if (backend_state_ == BackendState::closed) return;
  backend_state_ = BackendState::closed;
  env_.log.add({{"type", "backend.closed"}, {"reason", std::string(reason)}}, now_);
  // The backend hanging up on purpose is not a failure.
  finish(reason.rfind("session_end", 0) == 0 ? SessionEnd::backend_ended : SessionEnd::backend_failed);
}

void Call::finish(SessionEnd reason) {
  if (ended_) return;
  end(reason, now_);
  env_.transport.hang_up(reason, now_);
}

void Call::end(SessionEnd reason, Nanos now) {
  now_ = now;
  if (ended_) return;
  ended_ = true;
  if (realtime_) {
    realtime_->on_call_ended(session_end_name(reason), now);
    mirror_realtime_stats();
  }
  close_sidebands(session_end_name(reason));
  playout_.clear();
  if (backend_ && backend_state_ != BackendState::closed) {
    backend_state_ = BackendState::closed;
    backend_->close(session_end_name(reason));
  }
}

void Call::snapshot_into(nlohmann::json& j) const {
  j["mode"] = env_.settings.transport_audio == TransportAudio::pcm ? "pcm"
              : env_.settings.opus_passthrough                     ? "passthrough"
                                                                   : "transcoding";
  j["sample_rate"] = env_.settings.sample_rate;
  if (jitter_) {
    const auto& jc = jitter_->counters();
    j["jitter_buffer"] = {{"lost", jc.lost},
                          {"fec_recovered", jc.fec_recovered},
                          {"concealed", jc.plc},
                          {"late", jc.late},
                          {"reordered", jc.reordered}};
  }
  j["playout"] = {{"queued_frames", playout_.size()}, {"reserved_bytes", playout_.reserved_bytes()}};
  if (realtime_) j["realtime_session"] = realtime_->session();
  j["backend"] = {{"kind", env_.settings.backend_kind}, {"state", backend_state_name(backend_state_)}};
}

}  // namespace rtce
