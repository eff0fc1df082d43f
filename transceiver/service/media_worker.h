// media_worker.h — one transceiver endpoint: a thread with one UDP socket and one event
// loop that owns its sessions outright (no locks on the media path). It demultiplexes
// framed (relay) and direct datagrams, hands STUN to the Peer of its server ufrag and
// everything else to the Peer of the exact path an authenticated check registered, and
// batches the Peers' transmits (sendmmsg).
//
// It wakes for deadlines, not datagrams: each session sits in a deadline wheel at its next
// deadline, and the thread sleeps until the end of the earliest 4 ms window that holds one.
// Each wake-up drains the socket to EAGAIN (recvmmsg), visits only the sessions whose window
// has ended, reschedules the sessions it touched and flushes every send in one batch. The
// socket wakes the thread only while no deadline is within a window (few sessions, or none):
// under load, arrivals wait for the next window instead of waking the thread one by one.
// It builds what sessions share once: their typed settings and the backend factory.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "deadline_wheel.h"
#include "media_path.h"
#include "path_table.h"
#include "phone_session.h"
#include "session.h"
#include "transceiver_config.h"
#include "udp_batch.h"
#include "unique_fd.h"
#include "worker_metrics.h"

namespace rtce {

class MediaWorker final : public DatagramSender, public SessionOwner {
 public:
  MediaWorker(uint32_t index, uint16_t endpoint_id, const TransceiverConfig& config,
              std::shared_ptr<DtlsContext> dtls, WorkerMetrics& metrics);
  ~MediaWorker() override;
  MediaWorker(const MediaWorker&) = delete;
  MediaWorker& operator=(const MediaWorker&) = delete;

  // Binds the socket; throws std::runtime_error naming the address.
  void bind();
  void start();
  // Ends every live session (reason) and stops the thread; blocks until it has.
  void stop(SessionEnd reason);

  uint32_t index() const { return index_; }
  uint16_t endpoint_id() const { return endpoint_id_; }
  const SocketAddress& local_address() const { return local_; }
  WorkerMetrics& metrics() { return metrics_; }

  // Runs fn on the worker thread; what it changed (a new session, an ICE restart) is
  // rescheduled and its sends flushed after it returns.
  void post(std::function<void()> fn);

  // The wake-up window: deadlines are served at the end of the window holding them.
  static constexpr Nanos kWakeWindow = 4'000'000;

  // Worker thread only.
  void add_session(SessionPlan plan);
  // Ends session `id` with `reason`; one that had ended by itself (the client's close_notify,
  // say) and waits for the next sweep keeps its own reason and is retired now.
  enum class EndResult : uint8_t { not_found, ended, had_ended };
  EndResult end_session(const std::string& id, SessionEnd reason);
  std::optional<nlohmann::json> snapshot(const std::string& id) const;
  // Who may act on session `id`, live or recently ended; nullptr when unknown.
  const CallAccess* access_of(const std::string& id) const;
  size_t live_sessions() const { return sessions_.size(); }
  // Runs fn on session `id` when it is live (a sideband's message, say) and reschedules the
  // session after; false when there is none. Inside post() only.
  bool with_live_session(const std::string& id, const std::function<void(WorkerSession&, Nanos now)>& fn);
  // A phone call whose provider stream just opened (phone_session.h). Worker thread only.
  void add_phone_session(PhonePlan plan, std::unique_ptr<MediaStreamCodec> codec,
                         std::shared_ptr<PhoneStreamLink> link);

  void send(const MediaPath& path, std::span<const uint8_t> payload) override;
  void route(const PathKey& key, Session& session) override;
  void unroute(const PathKey& key, const Session& session) override;
  void route_ufrag(const std::string& ufrag, Session& session) override;
  void unroute_ufrag(const std::string& ufrag, const Session& session) override;
  void session_changed(WorkerSession& session) override;
  // Worker thread only. nullopt: no live session with that id. The ETag is the session's
  // after the request.
  struct IceRestartReply {
    Peer::IceRestartVerdict verdict;
    std::string etag;
  };
  std::optional<IceRestartReply> restart_ice(const std::string& id, const Peer::IceRestartRequest& request);

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void watch_socket();
  void on_timer(boost::system::error_code ec);
  // One wake-up: drain, serve what is due, settle.
  void wake();
  void drain_socket();
  void handle_datagram(uint8_t* data, size_t len, const SocketAddress& sender, Nanos now);
  void touch(WorkerSession& session);
  // Outside a wake-up (an asio handler of a backend, a posted call): settle once, soon.
  void request_settle();
  // Reschedules or retires the touched sessions, flushes the sends, and sets the next
  // wake-up: the timer at the wheel's next window, the socket only when that is far.
  void settle(Nanos now);
  void set_wakeups(Nanos now);
  void flush_sends();
  void retire(WorkerSession& session);
  BackendFactory backend_factory();

  const uint32_t index_;
  const uint16_t endpoint_id_;
  const TransceiverConfig& config_;
  std::shared_ptr<DtlsContext> dtls_;
  WorkerMetrics& metrics_;
  SocketAddress local_;
  const SessionSettings session_settings_;
  const CallSettings phone_call_settings_;  // session_settings_.call for a PCM transport
  BackendFactory make_backend_;             // built on first use, from the same config

  boost::asio::io_context io_;
  UniqueFd socket_;
  // An epoll set holding only the socket, watched by io_: readable while the socket is armed
  // in it and has data. Disarming it (epoll_ctl, only on a change) is what stops per-datagram
  // wake-ups without touching io_'s own registration of anything.
  boost::asio::posix::stream_descriptor socket_watch_;
  bool socket_armed_ = false;
  boost::asio::steady_timer wake_timer_;
  Nanos timer_at_ = DeadlineWheel::kNever;  // when the pending wait ends; kNever: none
  std::thread thread_;

  DeadlineWheel wheel_;
  std::vector<WorkerSession*> touched_;  // to reschedule or retire at the next settle
  bool in_wake_ = false;
  bool settle_posted_ = false;

  std::unordered_map<std::string, std::unique_ptr<WorkerSession>, StringHash, std::equal_to<>>
      sessions_;  // by id
  std::unordered_map<std::string, Session*, StringHash, std::equal_to<>> by_ufrag_;
  PathTable<Session> by_path_;
  struct EndedSession {
    nlohmann::json snapshot;
    CallAccess access;
  };
  std::deque<EndedSession> ended_;  // recently ended sessions, for GET and a late DELETE

  // Batched I/O, allocated once. Sends are copied into the batch: a session's payload
  // buffer is reused before the batch is flushed. Receives take UDP_GRO runs (a relay's
  // GSO messages arrive whole): 8 slots of 64 KiB (512 KiB), each a datagram or a run of up
  // to 128 of them.
  static constexpr size_t kBatch = 64;
  static constexpr size_t kReceiveSlots = 8;
  static constexpr size_t kMaxDatagram = 2048;
  UdpReceiveBatch rx_ = UdpReceiveBatch::coalescing(kReceiveSlots, kMaxDatagram);
  UdpSendBatch tx_{kBatch, kMaxDatagram};
};

}  // namespace rtce
