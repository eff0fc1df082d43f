// phone_session.cpp — see phone_session.h.
#include "phone_session.h"

#include <spdlog/spdlog.h>

#include <limits>

#include "audio/g711.h"

namespace rtce {

namespace {
constexpr int kProviderRate = 8000;
constexpr size_t kProviderFrameSamples = 160;  // 20 ms at 8 kHz: one G.711 byte per sample
constexpr size_t kMaxFramesPerMessage = 10;    // what a codec accepts in one media message
// RFC 6455 §7.4.1.
constexpr uint16_t kNormalClosure = 1000;
constexpr uint16_t kPolicyViolation = 1008;

// A backend that speaks the Realtime protocol makes the phone call a Realtime call: the
// event layer runs (its only clients are the app server's sidebands), so an app server
// steers a phone call exactly as it steers a browser's.
CallPlan phone_call_plan(const PhonePlan& plan, const CallSettings& settings) {
  CallPlan call;
  call.id = plan.id;
  call.user_agent = plan.user_agent;
  call.has_audio = true;
  call.realtime = settings.backend_speaks_realtime;
  if (call.realtime) call.realtime_session = nlohmann::json::object();
  return call;
}
}  // namespace

PhoneSession::PhoneSession(PhonePlan plan, std::unique_ptr<MediaStreamCodec> codec,
                           std::shared_ptr<PhoneStreamLink> link, PhoneSessionEnvironment env, Nanos now)
    : WorkerSession(plan.id, plan.access, env.owner, now),
      plan_(std::move(plan)),
      link_(std::move(link)),
      metrics_(env.metrics),
      start_deadline_(now + kStartTimeout),
      codec_(std::move(codec)),
      inbound_resampler_(kProviderRate, env.settings.sample_rate),
      outbound_resampler_(env.settings.sample_rate, kProviderRate),
      call_(phone_call_plan(plan_, env.settings),
            CallEnvironment{*this, std::move(env.make_backend), env.metrics, log_, env.settings}, now) {
  const size_t frame = static_cast<size_t>(samples_per_20ms(env.settings.sample_rate));
  pcm8k_.reserve(kProviderFrameSamples * kMaxFramesPerMessage);
  inbound_pending_.reserve(frame * (kMaxFramesPerMessage + 2));
  outbound_pending_.reserve(kProviderFrameSamples * 4);
  ulaw_out_.resize(kProviderFrameSamples);
  log_.add({{"type", "stream.opened"}, {"call_sid", plan_.call_sid}}, now);
}

PhoneSession::~PhoneSession() { close_stream(kNormalClosure, "the call is gone"); }

void PhoneSession::on_stream_message(std::string_view text, Nanos now) {
  if (ended()) return;
  const MediaStreamReadResult result = codec_->read(text);
  if (result.refusal) {
    ++counts_.refused;
    metrics_.telephony_refusals[static_cast<size_t>(plan_.provider)][static_cast<size_t>(*result.refusal)]
        .add();
    if (counts_.refused <= 3)
      spdlog::info("phone call {}: refused a provider message: {}", id_,
                   media_stream_refusal_message(*result.refusal));
    return;
  }
  if (!result.event) return;
  const MediaStreamEvent& event = *result.event;
  switch (event.kind) {
    case MediaStreamEventKind::connected: return;
    case MediaStreamEventKind::start: return on_start(*event.start, now);
    case MediaStreamEventKind::media: return on_media(event.ulaw, now);
    case MediaStreamEventKind::dtmf:
      ++counts_.dtmf;
      metrics_.phone_dtmf.add();
      call_.on_transport_event({{"type", "telephony.dtmf"}, {"digit", std::string(1, event.digit)}}, now);
      return;
    case MediaStreamEventKind::mark: return on_mark(event.mark_name, now);
    case MediaStreamEventKind::error:
      // The provider reports a problem on the stream (Telnyx: a malformed media we sent, say);
      // the call goes on. Logged, a few per call.
      if (++counts_.provider_errors <= 3)
        spdlog::warn("phone call {}: the provider reported an error: {}", id_, event.text);
      log_.add({{"type", "stream.error"}, {"text", event.text}}, now);
      return;
    case MediaStreamEventKind::stop:
      log_.add({{"type", "stream.stop"}}, now);
      return end(SessionEnd::provider_stopped, now);
  }
}

void PhoneSession::on_start(const MediaStreamStart& start, Nanos now) {
  // The token in the stream's URL was minted for this call: a stream that says it carries
  // another one is not the call the webhook answered.
  if (plan_.start_names_call_sid && start.call_sid != plan_.call_sid) {
    spdlog::warn("phone call {}: the stream's callSid {} is not the webhook's {}", id_, start.call_sid,
                 plan_.call_sid);
    close_stream(kPolicyViolation, "callSid does not match the call this stream was opened for");
    return end(SessionEnd::stream_closed, now);
  }
  started_ = true;
  stream_sid_ = start.stream_sid;
  CallConnection connection;
  connection.client_address = plan_.client_address;
  connection.path_kind = "telephony";
  for (const auto& [name, value] : start.custom_parameters) connection.metadata[name] = value;
  // The id the app server's API knows the call by (GET, hangup, a Realtime call's sideband).
  connection.metadata["rtcedge.call_id"] = "rtc_" + id_;
  const std::string p = phone_provider_name(plan_.provider);
  connection.metadata[p + ".call_sid"] = plan_.call_sid;
  connection.metadata[p + ".stream_sid"] = stream_sid_;
  connection.metadata[p + ".account_sid"] = start.account_sid;
  connection.metadata[p + ".from"] = plan_.from;
  connection.metadata[p + ".to"] = plan_.to;
  log_.add({{"type", "stream.start"}, {"stream_sid", stream_sid_}}, now);
  metrics_.sessions_connected.add();
  call_.on_connected(connection, now);
}

void PhoneSession::on_media(std::span<const uint8_t> ulaw, Nanos now) {
  ++counts_.media_in;
  metrics_.phone_media_in.add();
  pcm8k_.resize(ulaw.size());
  ulaw_decode(ulaw, pcm8k_);
  inbound_resampler_.process(pcm8k_, inbound_pending_);
  const size_t frame = static_cast<size_t>(samples_per_20ms(inbound_resampler_.out_rate()));
  size_t at = 0;
  for (; at + frame <= inbound_pending_.size(); at += frame)
    call_.on_pcm_audio(std::span<const int16_t>(inbound_pending_).subspan(at, frame), now);
  inbound_pending_.erase(inbound_pending_.begin(), inbound_pending_.begin() + static_cast<ptrdiff_t>(at));
}

void PhoneSession::on_mark(const std::string& name, Nanos now) {
  // The provider played everything sent before the mark (or dropped it on a clear): the
  // caller has heard the segment. Marks of our own only, in order.
  auto it = std::find(pending_marks_.begin(), pending_marks_.end(), name);
  if (it == pending_marks_.end()) return;
  pending_marks_.erase(pending_marks_.begin(), it + 1);
  ++counts_.marks_played;
  metrics_.phone_marks_played.add();
  call_.on_transport_event({{"type", "telephony.mark"}, {"name", name}}, now);
}

void PhoneSession::send_pcm(std::span<const int16_t> pcm_20ms, Nanos /*now*/) {
  if (!link_ || !started_) return;
  outbound_resampler_.process(pcm_20ms, outbound_pending_);
  outbound_resampler_holds_sound_ = true;
  send_provider_frames();
}

void PhoneSession::skip_audio_frame() {
  if (!link_ || !started_ || !outbound_resampler_holds_sound_) return;
  outbound_resampler_holds_sound_ = false;
  outbound_resampler_.flush(outbound_pending_);
  // The tail, padded to a whole frame with silence.
  outbound_pending_.resize((outbound_pending_.size() + kProviderFrameSamples - 1) / kProviderFrameSamples *
                           kProviderFrameSamples);
  send_provider_frames();
}

void PhoneSession::send_provider_frames() {
  size_t at = 0;
  for (; at + kProviderFrameSamples <= outbound_pending_.size(); at += kProviderFrameSamples) {
    ulaw_encode(std::span<const int16_t>(outbound_pending_).subspan(at, kProviderFrameSamples), ulaw_out_);
    codec_->media_message(ulaw_out_, media_text_);
    link_->send_text(media_text_);
    ++counts_.media_out;
    metrics_.phone_media_out.add();
  }
  outbound_pending_.erase(outbound_pending_.begin(), outbound_pending_.begin() + static_cast<ptrdiff_t>(at));
}

void PhoneSession::output_segment_ended(Nanos /*now*/) {
  if (!link_ || !started_) return;
  std::string name = std::string(kMarkPrefix) + std::to_string(next_mark_++);
  link_->send_text(codec_->mark_message(name));
  ++counts_.marks_sent;
  metrics_.phone_marks_sent.add();
  pending_marks_.push_back(std::move(name));
  if (pending_marks_.size() > kMaxPendingMarks) pending_marks_.pop_front();
}

void PhoneSession::output_cleared(Nanos /*now*/) {
  if (!link_ || !started_) return;
  // None of what was cleared may play: neither the partial frame nor the filter's memory.
  outbound_pending_.clear();
  outbound_resampler_.reset();
  outbound_resampler_holds_sound_ = false;
  link_->send_text(codec_->clear_message());
  ++counts_.clears;
  metrics_.phone_clears.add();
}

void PhoneSession::on_stream_closed(Nanos now) {
  link_.reset();  // nothing to close: the socket is gone
  if (!ended()) end(SessionEnd::stream_closed, now);
}

void PhoneSession::tick(Nanos now) {
  if (ended()) return;
  if (!started_ && now >= start_deadline_) {
    close_stream(kPolicyViolation, "no start message");
    return end(SessionEnd::connect_timeout, now);
  }
  call_.tick(now);
}

Nanos PhoneSession::next_deadline(Nanos /*now*/) const {
  if (ended()) return std::numeric_limits<Nanos>::max();
  return started_ ? call_.next_deadline() : start_deadline_;
}

void PhoneSession::end(SessionEnd reason, Nanos now) {
  if (ended()) return;
  call_.end(reason, now);
  close_stream(kNormalClosure, std::string("call ended: ") + session_end_name(reason));
  record_end(reason, now);
}

void PhoneSession::hang_up(SessionEnd reason, Nanos now) {
  if (ended()) return;
  close_stream(kNormalClosure, std::string("call ended: ") + session_end_name(reason));
  record_end(reason, now);
}

void PhoneSession::close_stream(uint16_t code, std::string reason) {
  if (!link_) return;
  link_->close(code, std::move(reason));
  link_.reset();
}

nlohmann::json PhoneSession::snapshot(Nanos now) const {
  nlohmann::json j;
  j["id"] = id_;
  j["transport"] = phone_provider_name(plan_.provider);
  j["state"] = ended() ? "ended" : started_ ? "connected" : "connecting";
  j["path"] = "telephony";
  call_.snapshot_into(j);
  j["telephony"] = {{"provider", phone_provider_name(plan_.provider)},
                    {"call_sid", plan_.call_sid},
                    {"stream_sid", stream_sid_},
                    {"media_in", counts_.media_in},
                    {"media_out", counts_.media_out},
                    {"marks_sent", counts_.marks_sent},
                    {"marks_played", counts_.marks_played},
                    {"clears", counts_.clears},
                    {"dtmf", counts_.dtmf},
                    {"refused", counts_.refused},
                    {"provider_errors", counts_.provider_errors}};
  snapshot_common(j, now);
  return j;
}

}  // namespace rtce
