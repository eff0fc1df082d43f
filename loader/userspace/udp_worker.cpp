// udp_worker.cpp — see udp_worker.h.
#include "udp_worker.h"

#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "clock.h"
#include "cpu_affinity.h"
#include "udp_batch.h"
#include "udp_socket_options.h"

namespace rtce {
namespace {

constexpr size_t kMaxDatagram = 9216;  // jumbo frames; larger datagrams are counted oversize
constexpr int kHousekeepingMs = 100;
constexpr int kBatchesPerWakeup = 8;
// Flows map lookups per worker and housekeeping tick for replies the XDP program passed up
// (about 10 000/s): a neighbour is resolved after the first few, so this only bounds what
// a sender on the transceiver network can make the relay spend in syscalls.
constexpr uint32_t kPassedUpLookupsPerTick = 1000;
constexpr uint64_t kTagReturn = 1000, kTagWake = 1001, kTagPeers = 1002, kTagPassedUp = 1003;  // + index

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

void RoutingMailbox::post(std::shared_ptr<const RoutingTable> table) {
  std::lock_guard lock(mutex_);
  pending_ = std::move(table);
  ready_.store(true, std::memory_order_release);
}

std::shared_ptr<const RoutingTable> RoutingMailbox::take() {
  if (!ready_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(mutex_);
  ready_.store(false, std::memory_order_relaxed);
  return std::move(pending_);
}

// Received datagrams keep kFramingHeadroom bytes in front, where RelayCore writes the
// PROXY v2 header; the sends point into those buffers (no copy), so a round's sends are
// flushed before the next receive reuses them. A header padded for GSO is written to the
// send slot's own head buffer instead, in front of the same payload.
struct UdpWorker::Batch {
  Batch(size_t n, size_t vip_count, const RelayConfig& config)
      : rx(n, kMaxDatagram, kFramingHeadroom),
        to_transceiver(n, kFramingHeadroom + gso_max_padding(config.gso_max_datagram)),
        to_peers(n) {
    to_transceiver.set_gso(config.gso);
    to_transceiver.set_max_segment(config.gso_max_datagram);
    to_client.reserve(vip_count);
    for (size_t v = 0; v < vip_count; v++) to_client.emplace_back(n);
  }
  UdpReceiveBatch rx;
  UdpGsoSendBatch to_transceiver;       // GSO: the datagrams for one endpoint in few messages
  UdpSendBatch to_peers;                // owner role: framed replies back to the ingress relays
  std::vector<UdpSendBatch> to_client;  // one per VIP socket
};

UdpWorker::UdpWorker(unsigned index, const RelayConfig& config, std::shared_ptr<const RoutingTable> routing,
                     FlowSync* flow_sync, RecoveredHook on_recovered, const PassedUpFlows* passed_up)
    : index_(index),
      config_(config),
      core_(
          FlowTable::Options{static_cast<uint32_t>((config.flow_capacity + std::max(1u, config.workers) - 1) /
                                                   std::max(1u, config.workers)),
                             config.flow_idle_timeout, config.flow_evict_idle_after, 16},
          std::move(routing), config.flow_limits),
      batch_(std::make_unique<Batch>(config.batch_size, config.listen.size(), config)),
      flow_sync_(flow_sync),
      on_recovered_(std::move(on_recovered)) {
  if (flow_sync_) {
    flow_channel_ = &flow_sync_->channel(index);
    flow_channel_->set_reply_waker([this] { wake(); });
    FlowStoreLink link;
    link.outbox = flow_channel_;
    link.recovery.lookup_timeout = config.flow_store_lookup_timeout;
    link.recovery.lookups_per_second = config.flow_store_lookups_per_second;
    link.recovery.headroom = kFramingHeadroom;
    link.refresh_interval = config.flow_store_refresh_interval;
    core_.attach_flow_store(link);
  }
  const int buf = static_cast<int>(config.socket_buffer_bytes);
  // Every descriptor is a UniqueFd: a throw half way closes what was opened.
  for (const auto& vip : config.listen) {
    VipSocket s;
    s.bound = vip;
    s.wildcard = vip.is_unspecified();
    set_flow_vip(s.key, vip.sa());
    s.fd.reset(socket(vip.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.fd) fail("socket for VIP " + vip.to_string());
    const int fd = s.fd.get();
    set_socket_option(fd, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT on " + vip.to_string());
    set_socket_buffers(fd, buf, "VIP " + vip.to_string());
    if (!vip.is_v4()) set_socket_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY");
    // Only a wildcard VIP needs to learn the destination address of each datagram.
    if (s.wildcard) request_destination_address(fd, vip.is_v4(), "VIP " + vip.to_string());
    if (bind(fd, vip.sa(), vip.len()) < 0) fail("bind VIP " + vip.to_string());
    vips_.push_back(std::move(s));
  }
  return_fd_.reset(socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!return_fd_) fail("return socket");
  set_socket_option(return_fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY=0 on return socket");
  set_socket_buffers(return_fd_.get(), buf, "return socket");
  SocketAddress ret = config.return_listen;
  if (ret.port() != 0) ret.set_port(static_cast<uint16_t>(ret.port() + index));
  if (bind(return_fd_.get(), ret.sa(), ret.len()) < 0) fail("bind return socket " + ret.to_string());
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  getsockname(return_fd_.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
  return_address_ = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&bound), bound_len);
  if (passed_up) open_passed_up_sockets(config, passed_up);
  if (!config.peers_listen.is_unspecified()) open_peer_socket(config);

  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_ || !wake_fd_) fail("epoll/eventfd");
  auto watch = [&](int fd, uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) < 0) fail("epoll_ctl");
  };
  for (size_t i = 0; i < vips_.size(); i++) watch(vips_[i].fd.get(), i);
  watch(return_fd_.get(), kTagReturn);
  watch(wake_fd_.get(), kTagWake);
  for (size_t i = 0; i < passed_up_fds_.size(); i++) watch(passed_up_fds_[i].get(), kTagPassedUp + i);
  if (peer_fd_) watch(peer_fd_.get(), kTagPeers);
  if (config.ice_tcp.port != 0) {
    stream_staging_.resize(config.batch_size * (kFramingHeadroom + config.ice_tcp.max_frame));
    tcp_ = std::make_unique<TcpStreams>(config.ice_tcp, config.flow_limits, config.listen,
                                        std::max(1u, config.workers), epoll_fd_.get(),
                                        static_cast<StreamSink&>(*this));
  }
}

bool UdpWorker::on_stream_frame(const rtce_flow_key& key, uint16_t vip, std::span<uint8_t> frame, Nanos now) {
  const size_t slot_bytes = kFramingHeadroom + config_.ice_tcp.max_frame;
  if (stream_staged_ == config_.batch_size) flush_stream_frames();
  uint8_t* payload = stream_staging_.data() + stream_staged_ * slot_bytes + kFramingHeadroom;
  std::memcpy(payload, frame.data(), frame.size());  // frame.size() <= max_frame (FrameReader)
  const auto out = core_.on_stream_frame(key, vip, payload, frame.size(), now);
  if (!out) return false;
  stream_staged_++;
  queue_to_transceiver(*out);
  return true;
}

void UdpWorker::flush_stream_frames() {
  flush_to_transceivers();
  stream_staged_ = 0;  // the batch no longer points into the staging slots
}

void UdpWorker::open_peer_socket(const RelayConfig& config) {
  // Dual-stack, so that peers and replies are all sockaddr_in6 (v4-mapped) like the return
  // socket's; every worker joins one reuseport group on the address.
  const SocketAddress& addr = config.peers_listen;
  peer_fd_.reset(socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!peer_fd_) fail("socket for peers.listen " + addr.to_string());
  set_socket_option(peer_fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY=0 on peers.listen");
  set_socket_option(peer_fd_.get(), SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT on " + addr.to_string());
  set_socket_buffers(peer_fd_.get(), static_cast<int>(config.socket_buffer_bytes), "peers.listen");
  const sockaddr_in6 bound = addr.to_v6_mapped();
  if (bind(peer_fd_.get(), reinterpret_cast<const sockaddr*>(&bound), sizeof bound) < 0)
    fail("bind peers.listen " + addr.to_string());
}

template <typename Fn, typename Flush>
void UdpWorker::drain(int fd, Fn&& fn, Flush&& flush) {
  UdpReceiveBatch& rx = batch_->rx;
  drain_udp(
      fd, rx, kBatchesPerWakeup,
      [&](size_t i, Nanos now) {
        if (rx.truncated(i))
          core_.counters().drop(DropReason::oversize);
        else
          fn(i, now);
      },
      flush);
}

void UdpWorker::drain_peers() {
  UdpReceiveBatch& rx = batch_->rx;
  drain(
      peer_fd_.get(),
      [&](size_t i, Nanos now) {
        sockaddr_in6 from{};
        std::memcpy(&from, &rx.source(i), sizeof from);
        if (auto out = core_.on_peer_packet(from, rx.data(i), rx.length(i), now)) queue_to_transceiver(*out);
      },
      [&] { flush_to_transceivers(); });
}

void UdpWorker::flush_to_peers() {
  if (batch_->to_peers.empty()) return;
  for (size_t refused = batch_->to_peers.flush(peer_fd_.get()); refused > 0; refused--)
    core_.counters().drop(DropReason::send_error);
}

void UdpWorker::open_passed_up_sockets(const RelayConfig& config, const PassedUpFlows* passed_up) {
  std::vector<VipSocketBinding> vips;
  for (const auto& v : vips_) vips.push_back({v.bound, v.wildcard});
  core_.attach_passed_up_flows(passed_up, std::move(vips), kPassedUpLookupsPerTick);
  const std::string port = std::to_string(config.xdp_return_port);
  for (const std::string& text : {config.xdp_relay_address4, "[" + config.xdp_relay_address6 + "]"}) {
    if (text.empty() || text == "[]") continue;
    const SocketAddress addr = SocketAddress::parse_or_throw(text + ":" + port, "xdp.relay_address");
    UniqueFd fd(socket(addr.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) fail("socket for XDP pass-ups on " + addr.to_string());
    // Every worker joins one reuseport group, so passed-up replies spread like the VIPs'.
    set_socket_option(fd.get(), SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT on " + addr.to_string());
    set_socket_buffers(fd.get(), static_cast<int>(config.socket_buffer_bytes),
                       "XDP pass-ups " + addr.to_string());
    if (!addr.is_v4()) set_socket_option(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY");
    // The XDP relay address need not be configured on the host (the program answers for it);
    // then the kernel never delivers a pass-up here, but the relay still starts.
    set_socket_option(fd.get(), addr.is_v4() ? IPPROTO_IP : IPPROTO_IPV6,
                      addr.is_v4() ? IP_FREEBIND : IPV6_FREEBIND, 1, "FREEBIND on " + addr.to_string());
    if (bind(fd.get(), addr.sa(), addr.len()) < 0) fail("bind XDP pass-up socket " + addr.to_string());
    passed_up_fds_.push_back(std::move(fd));
    passed_up_families_.push_back(addr.family());
  }
}

UdpWorker::~UdpWorker() {
  request_stop();
  join();
}

void UdpWorker::start() {
  thread_ = std::thread([this] { run(); });
}

void UdpWorker::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_.get(), &one, sizeof one);
}

void UdpWorker::request_stop() {
  stop_.store(true, std::memory_order_release);
  wake();
}

void UdpWorker::join() {
  if (thread_.joinable()) thread_.join();
}

void UdpWorker::post_routing(std::shared_ptr<const RoutingTable> table) {
  mailbox_.post(std::move(table));
  wake();
}

void UdpWorker::run() {
  if (config_.pin_cpus) pin_current_thread(index_, "worker " + std::to_string(index_));
  const uint32_t sweep_slots = std::max<uint32_t>(64, core_.flows().capacity() / 10);
  Nanos last_housekeeping = monotonic_now();
  epoll_event events[32];
  while (!stop_.load(std::memory_order_acquire)) {
    int n = epoll_wait(epoll_fd_.get(), events, 32, kHousekeepingMs);
    if (n < 0 && errno != EINTR) {
      spdlog::error("worker {}: epoll_wait: {}", index_, std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; i++) {
      const uint64_t tag = events[i].data.u64;
      if (TcpStreams::owns_tag(tag)) {
        tcp_->on_event(tag, events[i].events, monotonic_now());  // frames flushed below, all at once
      } else if (tag == kTagWake) {
        uint64_t drained;
        [[maybe_unused]] auto r = read(wake_fd_.get(), &drained, sizeof drained);
        if (auto table = mailbox_.take()) core_.set_routing(std::move(table));
        if (flow_channel_) drain_flow_replies(monotonic_now());
      } else if (tag == kTagReturn) {
        drain_return(return_fd_.get(), true);
      } else if (tag == kTagPeers) {
        drain_peers();
      } else if (tag >= kTagPassedUp) {
        const int fd = passed_up_fds_[tag - kTagPassedUp].get();
        drain_return(fd, false);
      } else {
        drain_vip(tag);
      }
    }
    // Every connection's frames of this wake-up in one batch (a connection at a call's rate
    // has one frame per wake-up: flushing per connection made one message per frame).
    if (stream_staged_ > 0) flush_stream_frames();
    const Nanos now = monotonic_now();
    if (now - last_housekeeping >= kHousekeepingMs * 1'000'000LL) {
      core_.expire(now, sweep_slots);
      if (tcp_) tcp_->expire(now);
      last_housekeeping = now;
    }
    notify_flow_sync();
  }
}

void UdpWorker::drain_vip(size_t vip_index) {
  const VipSocket& vip = vips_[vip_index];
  UdpReceiveBatch& rx = batch_->rx;
  drain(
      vip.fd.get(),
      [&](size_t i, Nanos now) {
        // The key straight from the socket's addresses: the VIP's side is the socket's, but
        // a wildcard's address is the one the client sent to (IP_PKTINFO).
        rtce_flow_key key = vip.key;
        set_flow_client(key, reinterpret_cast<const sockaddr*>(&rx.source(i)));
        if (vip.wildcard) rx.destination_bytes(i, key.vip_addr);
        if (auto out =
                core_.on_client_packet(key, static_cast<uint16_t>(vip_index), rx.data(i), rx.length(i), now))
          queue_to_transceiver(*out);
      },
      [&] {
        flush_to_transceivers();
        notify_flow_sync();
      });
}

// The return socket is dual-stack (sources arrive as sockaddr_in6); an XDP pass-up socket is
// of its address's family.
void UdpWorker::drain_return(int fd, bool dual_stack) {
  UdpReceiveBatch& rx = batch_->rx;
  drain(
      fd,
      [&](size_t i, Nanos now) {
        sockaddr_in6 from{};
        if (dual_stack)
          std::memcpy(&from, &rx.source(i), sizeof from);
        else
          from = rx.source_address(i).to_v6_mapped();
        auto out = core_.on_transceiver_packet(from, rx.data(i), rx.length(i), now);
        if (!out) return;
        if (out->key.transport == RTCE_TRANSPORT_TCP && !out->peer) {  // one frame on its connection
          if (tcp_)
            tcp_->queue_reply(out->key, out->data, out->len);
          else
            core_.counters().drop(DropReason::return_no_flow);
          return;
        }
        if (out->peer) {  // owner role: back to the ingress relay, framed
          if (batch_->to_peers.full()) flush_to_peers();
          batch_->to_peers.add(out->data, out->len, reinterpret_cast<const sockaddr*>(out->peer),
                               sizeof(sockaddr_in6));
          return;
        }
        UdpSendBatch& queue = batch_->to_client[out->vip_socket];
        if (queue.full()) flush_to_clients(out->vip_socket);
        // The addresses straight from the flow key. A wildcard VIP answers from the exact
        // address the client sent to (ICE requires it).
        sockaddr_storage client, vip;
        const socklen_t client_len = flow_client_sockaddr(out->key, client);
        const bool from_vip = vips_[out->vip_socket].wildcard;
        if (from_vip) flow_vip_sockaddr(out->key, vip);
        queue.add(out->data, out->len, reinterpret_cast<const sockaddr*>(&client), client_len,
                  from_vip ? reinterpret_cast<const sockaddr*>(&vip) : nullptr);
      },
      [&] {
        for (size_t v = 0; v < vips_.size(); v++) flush_to_clients(v);
        flush_to_peers();
        if (tcp_) tcp_->flush();
      });
}

void UdpWorker::queue_to_transceiver(const ToTransceiver& out) {
  UdpGsoSendBatch& queue = batch_->to_transceiver;
  if (queue.full()) flush_to_transceivers();
  // The flow's own copy of its endpoint: one address per flow, so it tells flows apart (the
  // batch keeps each flow's datagrams in order).
  const auto flow_tag = reinterpret_cast<uintptr_t>(out.endpoint);
  if (queue.gso()) {
    // Padded up to its size class, the datagram shares its length, hence a GSO message, with
    // others for the endpoint. The padded header goes to the slot's head buffer; the payload
    // stays where it is, and so does the unpadded datagram, sent instead if it goes alone.
    const size_t pad = gso_padded_length(out.len, config_.gso_max_datagram) - out.len;
    if (pad > 0) {
      const std::span<uint8_t> head = queue.next_head();
      const uint32_t h = rtce_pp2_write_padded(head.data(), static_cast<uint32_t>(head.size()), out.data,
                                               static_cast<uint32_t>(out.len), static_cast<uint32_t>(pad));
      if (h > 0) {  // else (a header with TLVs too long for the head buffer): unpadded
        const size_t header = h - pad;
        queue.add(head.data(), h, out.data + header, out.len - header, *out.endpoint, flow_tag,
                  {out.data, out.len});
        return;
      }
    }
  }
  queue.add(nullptr, 0, out.data, out.len, *out.endpoint, flow_tag);
}

void UdpWorker::drain_flow_replies(Nanos now) {
  // The packets that waited live in the core's recovery pool until the next miss; they are
  // all sent (flushed) before this returns, so no miss can reuse their slots first.
  flow_channel_->drain_replies([&](const FlowLookupReply& reply) {
    // XDP mode: the program sends the rest of a recovered ingress flow from the XDP relay
    // address and return port, and the owning relay's flow belongs to one sender
    // (peer_wrong_sender otherwise), so the packets that waited leave from there too; an
    // owner flow's, so that its transceiver sees one relay address throughout.
    const bool from_xdp_port =
        (reply.role == FlowRole::ingress || reply.role == FlowRole::owner) && !passed_up_fds_.empty();
    const LookupResumed resumed =
        core_.on_lookup_reply(reply.key, reply.endpoint_id, now, reply.role, &reply.via);
    for (const ToTransceiver& out : resumed.packets)
      if (!from_xdp_port || !send_from_xdp_port(out)) queue_to_transceiver(out);
    if (resumed.flow && on_recovered_) on_recovered_(*resumed.flow);
  });
  flush_to_transceivers();
}

bool UdpWorker::send_from_xdp_port(const ToTransceiver& out) {
  // Recovery only (at most FlowRecovery's packets_per_flow per flow): one sendto each.
  const SocketAddress to =
      SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(out.endpoint), sizeof(sockaddr_in6))
          .unmapped();
  for (size_t i = 0; i < passed_up_fds_.size(); i++) {
    if (passed_up_families_[i] != to.family()) continue;
    if (sendto(passed_up_fds_[i].get(), out.data, out.len, 0, to.sa(), to.len()) < 0)
      core_.counters().drop(DropReason::send_error);
    return true;
  }
  return false;  // no XDP relay address of that family: from the return socket
}

void UdpWorker::notify_flow_sync() {
  if (flow_sync_ && core_.take_flow_store_activity()) flow_sync_->notify();
}

void UdpWorker::flush_to_transceivers() {
  UdpGsoSendBatch& queue = batch_->to_transceiver;
  if (queue.empty()) return;
  const UdpGsoSendBatch::FlushResult r = queue.flush(return_fd_.get());
  RelayCounters& c = core_.counters();
  for (size_t refused = r.refused; refused > 0; refused--) c.drop(DropReason::send_error);
  c.gso_messages.add(r.gso_messages);
  c.gso_datagrams.add(r.gso_datagrams);
  c.gso_fallbacks.add(r.gso_fallbacks);
  c.gso_padding_bytes.add(r.padding_bytes);
  if (r.gso_off_errno)
    spdlog::warn(
        "worker {}: the kernel refused UDP GSO towards transceivers ({}); this worker sends one "
        "datagram per message from now on",
        index_, std::strerror(r.gso_off_errno));
}

void UdpWorker::flush_to_clients(size_t vip_index) {
  UdpSendBatch& queue = batch_->to_client[vip_index];
  if (queue.empty()) return;
  for (size_t refused = queue.flush(vips_[vip_index].fd.get()); refused > 0; refused--)
    core_.counters().drop(DropReason::send_error);
}

}  // namespace rtce
