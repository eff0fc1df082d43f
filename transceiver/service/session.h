// session.h — what a media worker owns per conversation. WorkerSession is the part every
// transport shares (id, access, the event log, the end and its reason, the worker's wheel
// entry); Session is one WebRTC audio session: a Peer (the transport) and a Call (the
// conversation), and the few lines that connect them (the Peer's events go to the Call, the
// Call's frames and channel text go to the Peer). Everything with behaviour lives in the two;
// this class only routes and ends them together. A phone call's is phone_session.h.
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
class PhoneSession;
class WorkerSession;

// The worker's side of its sessions: the routing tables, keyed to sessions so that a datagram
// finds the session it wakes, and a note when a session changed outside the worker's own
// calls into it (a backend that hung up from its socket's handler).
class SessionOwner {
 public:
  virtual void route(const PathKey& key, Session& session) = 0;
  virtual void unroute(const PathKey& key, const Session& session) = 0;
  virtual void route_ufrag(const std::string& ufrag, Session& session) = 0;
  virtual void unroute_ufrag(const std::string& ufrag, const Session& session) = 0;
  virtual void session_changed(WorkerSession& session) = 0;

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

// The worker schedules a session in its deadline wheel (the Entry) at next_deadline(), and
// retires it once ended.
class WorkerSession : public DeadlineWheel::Entry {
 public:
  WorkerSession(std::string id, CallAccess access, SessionOwner& owner, Nanos now);
  virtual ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  virtual void tick(Nanos now) = 0;
  virtual Nanos next_deadline(Nanos now) const = 0;
  // Ends the Call (the backend hears the reason) and the transport together.
  virtual void end(SessionEnd reason, Nanos now) = 0;
  virtual Call& call() = 0;
  virtual nlohmann::json snapshot(Nanos now) const = 0;
  // The WebRTC session, when this is one: the worker's datagram tables hold only those.
  virtual Session* webrtc() { return nullptr; }
  virtual PhoneSession* phone() { return nullptr; }

  bool ended() const { return end_reason_.has_value(); }
  SessionEnd end_reason() const { return end_reason_.value_or(SessionEnd::deleted); }
  const std::string& id() const { return id_; }
  const CallAccess& access() const { return access_; }

  bool touched = false;  // the worker's: on its list of sessions to reschedule or retire

 protected:
  // Notes the end (once) and has the worker retire the session; `detail` goes to the log line.
  void record_end(SessionEnd reason, Nanos now, std::string_view detail = {});
  // id, age, end reason and events: the fields every snapshot has.
  void snapshot_common(nlohmann::json& j, Nanos now) const;

  SessionOwner& owner_;
  const std::string id_;
  const CallAccess access_;
  const Nanos created_at_;
  std::optional<SessionEnd> end_reason_;
  Nanos ended_at_ = 0;
  EventLog log_;
};

class Session final : public WorkerSession, PeerObserver, CallTransport, PathRouter {
 public:
  Session(SessionPlan plan, SessionEnvironment env, Nanos now);
  ~Session() override;

  Peer& peer() { return peer_; }
  const Peer& peer() const { return peer_; }
  Call& call() override { return call_; }
  const Call& call() const { return call_; }

  // Timers of both; the worker's tick.
  void tick(Nanos now) override;
  Nanos next_deadline(Nanos now) const override {
    return std::min(peer_.next_deadline(now), call_.next_deadline());
  }
  // Ends the Call (the backend hears the reason) and the Peer (close_notify) together.
  void end(SessionEnd reason, Nanos now) override;
  nlohmann::json snapshot(Nanos now) const override;
  Session* webrtc() override { return this; }

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

  const std::string path_kind_;
  Peer peer_;
  Call call_;
};

}  // namespace rtce
