// session.cpp — see session.h.
#include "session.h"

#include <spdlog/spdlog.h>

namespace rtce {

namespace {

CallPlan call_plan(const SessionPlan& plan) {
  CallPlan call;
  call.id = plan.id;
  call.user_agent = plan.user_agent;
  call.has_audio = plan.has_audio;
  call.realtime = plan.realtime;
  call.realtime_session = plan.realtime_session;
  if (plan.data_channel) call.channel_max_message_size = plan.data_channel->local_max_message_size;
  return call;
}

}  // namespace

WorkerSession::WorkerSession(std::string id, CallAccess access, SessionOwner& owner, Nanos now)
    : owner_(owner), id_(std::move(id)), access_(std::move(access)), created_at_(now), log_(now) {}

WorkerSession::~WorkerSession() = default;

void WorkerSession::record_end(SessionEnd reason, Nanos now, std::string_view detail) {
  end_reason_ = reason;
  ended_at_ = now;
  owner_.session_changed(*this);  // to be retired
  log_.add({{"type", "ended"}, {"reason", session_end_name(reason)}}, now);
  if (!detail.empty())
    spdlog::warn("session {} ended: {} ({})", id_, session_end_name(reason), detail);
  else
    spdlog::info("session {} ended: {}", id_, session_end_name(reason));
}

void WorkerSession::snapshot_common(nlohmann::json& j, Nanos now) const {
  j["age_ms"] = ((ended() ? ended_at_ : now) - created_at_) / 1'000'000;
  if (ended()) j["end_reason"] = session_end_name(end_reason());
  j["events"] = log_.to_json();
}

Session::Session(SessionPlan plan, SessionEnvironment env, Nanos now)
    : WorkerSession(plan.id, plan.access, env.owner, now),
      path_kind_(env.path_kind),
      peer_(plan, PeerEnvironment{env.sender, *this, *this, env.metrics, log_, env.dtls, env.settings.peer},
            now),
      call_(call_plan(plan),
            CallEnvironment{*this, std::move(env.make_backend), env.metrics, log_, env.settings.call}, now) {}

Session::~Session() = default;

void Session::tick(Nanos now) {
  peer_.tick(now);
  if (!ended()) call_.tick(now);
}

void Session::end(SessionEnd reason, Nanos now) {
  if (ended()) return;
  call_.end(reason, now);
  peer_.end(now);
  record_end(reason, now);
}

namespace {
std::string end_detail(SessionEnd reason, const Peer& peer) {
  return reason == SessionEnd::dtls_failed ? std::string(peer.dtls_failure()) : std::string();
}
}  // namespace

void Session::on_peer_connected(Nanos now) {
  call_.on_connected({peer_.path().client.to_string(), path_kind_, {}}, now);
}

void Session::on_peer_audio(const RtpView& rtp, Nanos now) {
  call_.on_audio(rtp.seq, rtp.timestamp, rtp.payload, now);
}

void Session::on_peer_report(const nlohmann::json& event, Nanos now) {
  call_.on_transport_report(event, now);
}

void Session::on_channel_open(uint16_t stream, std::string_view label, std::string_view protocol, Nanos now) {
  call_.on_channel_open(stream, label, protocol, now);
}

void Session::on_channel_message(uint16_t stream, std::span<const uint8_t> message, bool binary, Nanos now) {
  call_.on_channel_message(stream, message, binary, now);
}

void Session::on_channel_closed(uint16_t stream, Nanos now) { call_.on_channel_closed(stream, now); }

void Session::on_channels_failed(std::string_view /*reason*/, Nanos now) { call_.on_channels_failed(now); }

void Session::on_peer_closed(SessionEnd reason, Nanos now) {
  if (ended()) return;
  call_.end(reason, now);
  record_end(reason, now, end_detail(reason, peer_));
}

void Session::hang_up(SessionEnd reason, Nanos now) {
  if (ended()) return;
  peer_.end(now);
  record_end(reason, now);
}

nlohmann::json Session::snapshot(Nanos now) const {
  nlohmann::json j;
  j["id"] = id_;
  j["transport"] = "webrtc";
  j["state"] = ended() ? "ended" : peer_.connected() ? "connected" : peer_.has_path() ? "connecting" : "new";
  j["path"] = path_kind_;
  peer_.snapshot_into(j);
  call_.snapshot_into(j);
  snapshot_common(j, now);
  return j;
}

}  // namespace rtce
