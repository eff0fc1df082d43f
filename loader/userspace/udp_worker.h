// udp_worker.h — one userspace relay worker: its own SO_REUSEPORT socket on every VIP,
// its own return socket, its own RelayCore, one thread pinned to one CPU.
//
// The kernel's reuseport hash keeps every packet of a client flow on the same worker,
// and transceivers reply to the worker's own return port, so a flow's state never leaves
// its worker: no locks, no shared tables. I/O is batched with recvmmsg/sendmmsg into
// buffers allocated once at start. With ice_tcp.port set, the worker also accepts ICE-TCP
// connections at its VIPs (tcp_streams.h): their frames go through the same RelayCore.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "flow_sync.h"
#include "relay_config.h"
#include "relay_core.h"
#include "tcp_streams.h"
#include "unique_fd.h"

namespace rtce {

// Hands a new routing table to a worker without a lock on its packet path: the worker
// only checks an atomic flag, and takes the mutex when the flag says there is news.
class RoutingMailbox {
 public:
  void post(std::shared_ptr<const RoutingTable> table);
  std::shared_ptr<const RoutingTable> take();

 private:
  std::mutex mutex_;
  std::shared_ptr<const RoutingTable> pending_;
  std::atomic<bool> ready_{false};
};

class UdpWorker final : private StreamSink {
 public:
  // Called on the worker thread for each flow recovered from the flow store (the XDP data
  // path mirrors it into its flows map).
  using RecoveredHook = std::function<void(const Flow&)>;

  // Opens and binds every socket; throws std::runtime_error naming the address on failure.
  // `flow_sync` (may be null) must outlive the worker.
  // `passed_up` (XDP mode only, may be null; must outlive the worker): the XDP flows map.
  // The worker then also listens on xdp.relay_address4/6:xdp.return_port (SO_REUSEPORT, like
  // its VIP sockets) for the replies the program passes up, and sends them to the client.
  UdpWorker(unsigned index, const RelayConfig& config, std::shared_ptr<const RoutingTable> routing,
            FlowSync* flow_sync = nullptr, RecoveredHook on_recovered = {},
            const PassedUpFlows* passed_up = nullptr);
  ~UdpWorker();
  UdpWorker(const UdpWorker&) = delete;
  UdpWorker& operator=(const UdpWorker&) = delete;

  void start();
  void request_stop();
  void join();
  void post_routing(std::shared_ptr<const RoutingTable> table);

  const RelayCounters& counters() const { return core_.counters(); }
  // nullptr when ice_tcp.port is 0.
  const TcpCounters* tcp_counters() const { return tcp_ ? &tcp_->counters() : nullptr; }
  SocketAddress return_address() const { return return_address_; }
  unsigned index() const { return index_; }

 private:
  struct Batch;
  struct VipSocket {
    UniqueFd fd;
    SocketAddress bound;
    bool wildcard = false;
    rtce_flow_key key{};  // the VIP's side of its flows' keys (a wildcard's is its port)
  };
  // Drains `fd` into the worker's batch (drain_udp): fn(i, now) for each datagram that was
  // not truncated (those are counted oversize), then flush().
  template <typename Fn, typename Flush>
  void drain(int fd, Fn&& fn, Flush&& flush);
  void run();
  void drain_vip(size_t vip_index);
  void drain_return(int fd, bool dual_stack);
  void open_passed_up_sockets(const RelayConfig& config, const PassedUpFlows* passed_up);
  void open_peer_socket(const RelayConfig& config);
  void drain_peers();
  void flush_to_peers();
  void queue_to_transceiver(const ToTransceiver& out);
  // Sends `out` from the XDP pass-up socket of its family; false if there is none.
  bool send_from_xdp_port(const ToTransceiver& out);
  void flush_to_transceivers();
  void drain_flow_replies(Nanos now);
  void notify_flow_sync();
  void flush_to_clients(size_t vip_index);
  void wake();
  // StreamSink: a connection's frame is copied into the staging slots (RelayCore frames it in
  // place, in their head room) and queued like a datagram. A slot is reused only after a
  // flush (flush_stream_frames), which run() does once per wake-up.
  bool on_stream_frame(const rtce_flow_key& key, uint16_t vip, std::span<uint8_t> frame, Nanos now) override;
  void on_stream_closed(const rtce_flow_key& key) override { core_.forget_flow(key); }
  bool stream_flow_alive(const rtce_flow_key& key) override { return core_.flows().find(key) != nullptr; }
  void flush_stream_frames();

  unsigned index_;
  RelayConfig config_;
  RelayCore core_;
  RoutingMailbox mailbox_;
  std::vector<VipSocket> vips_;
  UniqueFd return_fd_;
  std::vector<UniqueFd> passed_up_fds_;  // XDP mode: xdp.relay_address4/6:xdp.return_port
  std::vector<int> passed_up_families_;  // AF_INET / AF_INET6 of each
  UniqueFd peer_fd_;                     // peers.listen (global relay, owner role), dual-stack
  SocketAddress return_address_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Batch> batch_;
  FlowSync* flow_sync_ = nullptr;
  FlowSyncChannel* flow_channel_ = nullptr;
  RecoveredHook on_recovered_;
  std::vector<uint8_t> stream_staging_;  // batch_size slots of head room + ice_tcp.max_frame
  size_t stream_staged_ = 0;
  std::unique_ptr<TcpStreams> tcp_;  // after core_ and epoll_fd_: its connections close first
  std::thread thread_;
};

}  // namespace rtce
