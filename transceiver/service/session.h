// session.h — one WebRTC audio session as the worker owns it: a Peer (the transport) and a
// Call (the conversation), the event log they share, and the few lines that connect them
// (the Peer's events go to the Call, the Call's frames and channel text go to the Peer).
// Everything with behaviour lives in the two; this class only routes and ends them together.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "call/call.h"
#include "call_access.h"
#include "deadline_wheel.h"
#include "peer/peer.h"

namespace rtce {

// What signaling decided for a new session; handed to the worker that will own it.
struct SessionPlan : PeerPlan {
  std::string user_agent;
  // The session config of a Realtime call (multipart `session` part over the ephemeral key's
  // claims); null unless the call came in on /v1/realtime/calls.
  nlohmann::json realtime_session;
  bool realtime = false;  // a /v1/realtime call: run the oai-events layer on the channel of that label
  CallAccess access;      // who may act on the session (call_access.h)
};

class Session;

// The worker's side of its sessions: the routing tables, keyed to sessions so that a datagram
// finds the session it wakes, and a note when a session changed outside the worker's own
// calls into it (a backend that hung up from its socket's handler).
class SessionOwner {
 public:
  virtual void route(const PathKey& key, Session& session) = 0;
  virtual void unroute(const PathKey& key, const Session& session) = 0;
  virtual void route_ufrag(const std::string& ufrag, Session& session) = 0;
  virtual void unroute_ufrag(const std::string& ufrag, const Session& session) = 0;
  virtual void session_changed(Session& session) = 0;

 protected:
  ~SessionOwner() = default;
};

// Resolved once per worker from the configuration.
struct SessionSettings {
  PeerSettings peer;
  CallSettings call;
};

struct SessionEnvironment {
  DatagramSender& sender;
  SessionOwner& owner;
  WorkerMetrics& metrics;
  std::shared_ptr<DtlsContext> dtls;
  const SessionSettings& settings;
  BackendFactory make_backend;
  std::string path_kind;  // "relay" | "direct" for the backend's session info
};

// The worker schedules a session in its deadline wheel (the Entry) at next_deadline().
class Session final : public DeadlineWheel::Entry, PeerObserver, CallTransport, PathRouter {
 public:
  Session(SessionPlan plan, SessionEnvironment env, Nanos now);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Peer& peer() { return peer_; }
  const Peer& peer() const { return peer_; }
  Call& call() { return call_; }
  const Call& call() const { return call_; }

  // Timers of both; the worker's tick.
  void tick(Nanos now);
  Nanos next_deadline(Nanos now) const { return std::min(peer_.next_deadline(now), call_.next_deadline()); }
  // Ends the Call (the backend hears the reason) and the Peer (close_notify) together.
  void end(SessionEnd reason, Nanos now);

  bool ended() const { return end_reason_.has_value(); }
  SessionEnd end_reason() const { return end_reason_.value_or(SessionEnd::deleted); }
  const std::string& id() const { return id_; }
  const CallAccess& access() const { return access_; }
  nlohmann::json snapshot(Nanos now) const;

  bool touched = false;  // the worker's: on its list of sessions to reschedule or retire

 private:
  // PeerObserver: the transport's events, to the Call.
  void on_peer_connected(Nanos now) override;
  void on_peer_audio(const RtpView& rtp, Nanos now) override;
  void on_peer_report(const nlohmann::json& event, Nanos now) override;
  void on_channel_open(uint16_t stream, std::string_view label, std::string_view protocol,
                       Nanos now) override;
  void on_channel_message(uint16_t stream, std::span<const uint8_t> message, bool binary, Nanos now) override;
  void on_channel_closed(uint16_t stream, Nanos now) override;
  void on_channels_failed(std::string_view reason, Nanos now) override;
  void on_peer_closed(SessionEnd reason, Nanos now) override;
  // CallTransport: the conversation's output, to the Peer.
  void send_audio(std::span<const uint8_t> opus, Nanos now) override { peer_.send_audio(opus, now); }
  void skip_audio_frame() override { peer_.skip_audio_frame(); }
  bool send_channel_text(uint16_t stream, std::string_view text) override {
    return peer_.send_channel_text(stream, text);
  }
  void hang_up(SessionEnd reason, Nanos now) override;
  // PathRouter: the Peer's routes, to the worker's tables under this session.
  void route(const PathKey& key, Peer&) override { owner_.route(key, *this); }
  void unroute(const PathKey& key, const Peer&) override { owner_.unroute(key, *this); }
  void route_ufrag(const std::string& ufrag, Peer&) override { owner_.route_ufrag(ufrag, *this); }
  void unroute_ufrag(const std::string& ufrag, const Peer&) override { owner_.unroute_ufrag(ufrag, *this); }

  void record_end(SessionEnd reason, Nanos now);

  SessionOwner& owner_;
  const std::string id_;
  const CallAccess access_;
  const std::string path_kind_;
  const Nanos created_at_;
  std::optional<SessionEnd> end_reason_;
  Nanos ended_at_ = 0;
  EventLog log_;
  Peer peer_;
  Call call_;
};

}  // namespace rtce
