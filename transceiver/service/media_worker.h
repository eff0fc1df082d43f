// media_worker.h — one transceiver endpoint: a thread with one UDP socket and one event
// loop that owns its sessions outright (no locks on the media path). It demultiplexes
// framed (relay) and direct datagrams, hands STUN to the Peer of its server ufrag and
// everything else to the Peer of the exact path an authenticated check registered, batches
// the Peers' transmits (sendmmsg), and drives every session's timers from one periodic tick.
// It builds what sessions share once: their typed settings and the backend factory.
#pragma once

#include <boost/asio.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "media_path.h"
#include "session.h"
#include "transceiver_config.h"
#include "udp_batch.h"
#include "worker_metrics.h"

namespace rtce {

class MediaWorker final : public DatagramSender, public PathRouter {
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

  // Runs fn on the worker thread.
  void post(std::function<void()> fn);

  // Worker thread only.
  void add_session(SessionPlan plan);
  // Ends session `id` with `reason`; one that had ended by itself (the client's close_notify,
  // say) and waits for the next sweep keeps its own reason and is retired now.
  enum class EndResult : uint8_t { not_found, ended, had_ended };
  EndResult end_session(const std::string& id, SessionEnd reason);
  std::optional<nlohmann::json> snapshot(const std::string& id) const;
  size_t live_sessions() const { return sessions_.size(); }

  void send(const MediaPath& path, std::span<const uint8_t> payload) override;
  void route(const PathKey& key, Peer& peer) override;
  void unroute(const PathKey& key, const Peer& peer) override;
  void route_ufrag(const std::string& ufrag, Peer& peer) override;
  void unroute_ufrag(const std::string& ufrag, const Peer& peer) override;
  // Worker thread only. nullopt: no live session with that id. The ETag is the session's
  // after the request.
  struct IceRestartReply {
    Peer::IceRestartVerdict verdict;
    std::string etag;
  };
  std::optional<IceRestartReply> restart_ice(const std::string& id, const Peer::IceRestartRequest& request);

 private:
  struct PathKeyHash {
    size_t operator()(const PathKey& k) const;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void wait_readable();
  void drain_socket();
  void handle_datagram(uint8_t* data, size_t len, const SocketAddress& sender, Nanos now);
  void schedule_tick();
  void tick();
  void flush_sends();
  void retire(Session& session);
  BackendFactory backend_factory();

  const uint32_t index_;
  const uint16_t endpoint_id_;
  const TransceiverConfig& config_;
  std::shared_ptr<DtlsContext> dtls_;
  WorkerMetrics& metrics_;
  SocketAddress local_;
  const SessionSettings session_settings_;
  BackendFactory make_backend_;  // built on first use, from the same config

  boost::asio::io_context io_;
  boost::asio::ip::udp::socket socket_;
  boost::asio::steady_timer tick_timer_;
  std::thread thread_;

  std::unordered_map<std::string, std::unique_ptr<Session>, StringHash, std::equal_to<>> sessions_;  // by id
  std::unordered_map<std::string, Peer*, StringHash, std::equal_to<>> by_ufrag_;
  std::unordered_map<PathKey, Peer*, PathKeyHash> by_path_;
  std::deque<nlohmann::json> ended_;  // snapshots of recently ended sessions, for GET

  // Batched I/O, allocated once. Sends are copied into the batch: a session's payload
  // buffer is reused before the batch is flushed.
  static constexpr size_t kBatch = 32;
  static constexpr size_t kMaxDatagram = 2048;
  UdpReceiveBatch rx_{kBatch, kMaxDatagram};
  UdpSendBatch tx_{kBatch, kMaxDatagram};
};

}  // namespace rtce
