// udp_worker.cpp — see udp_worker.h.
#include "udp_worker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <tuple>

#include "clock.h"

namespace rtce {
namespace {

constexpr size_t kMaxDatagram = 9216;  // jumbo frames; larger datagrams are counted oversize
constexpr size_t kBufferStride = kFramingHeadroom + kMaxDatagram;
constexpr size_t kControlBytes = 64;
constexpr int kHousekeepingMs = 100;
constexpr int kBatchesPerWakeup = 8;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

void set_int_option(int fd, int level, int name, int value, const std::string& what) {
  if (setsockopt(fd, level, name, &value, sizeof value) < 0) fail(what);
}

// Asks for `bytes` of receive and send buffer. With CAP_NET_ADMIN the *FORCE variants
// bypass net.core.[rw]mem_max; without it the kernel silently caps the request, so read
// it back and say so once, instead of running with a fraction of the configured buffer.
void set_socket_buffers(int fd, int bytes, const std::string& what) {
  for (auto [force, plain, name] : {std::tuple{SO_RCVBUFFORCE, SO_RCVBUF, "SO_RCVBUF"},
                                    std::tuple{SO_SNDBUFFORCE, SO_SNDBUF, "SO_SNDBUF"}}) {
    if (setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof bytes) < 0)
      set_int_option(fd, SOL_SOCKET, plain, bytes, std::string(name) + " on " + what);
    int granted = 0;
    socklen_t len = sizeof granted;
    getsockopt(fd, SOL_SOCKET, plain, &granted, &len);
    if (granted / 2 < bytes) {  // the kernel reports twice the usable size
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        spdlog::warn(
            "{} on {}: asked for {} bytes, got {}; raise net.core.rmem_max/wmem_max or run with "
            "CAP_NET_ADMIN",
            name, what, bytes, granted / 2);
    }
  }
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

struct UdpWorker::Batch {
  explicit Batch(size_t n, size_t vip_count)
      : size(n),
        storage(n * kBufferStride),
        rx(n),
        rx_iov(n),
        rx_addr(n),
        rx_control(n * kControlBytes),
        to_transceiver(n),
        to_transceiver_iov(n),
        to_transceiver_addr(n),
        to_client(vip_count) {
    for (auto& q : to_client) q.resize(n);
  }
  uint8_t* packet(size_t i) { return storage.data() + i * kBufferStride + kFramingHeadroom; }
  void arm_rx() {
    for (size_t i = 0; i < size; i++) {
      rx_iov[i] = {packet(i), kMaxDatagram};
      rx[i] = {};
      rx[i].msg_hdr.msg_iov = &rx_iov[i];
      rx[i].msg_hdr.msg_iovlen = 1;
      rx[i].msg_hdr.msg_name = &rx_addr[i];
      rx[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
      rx[i].msg_hdr.msg_control = rx_control.data() + i * kControlBytes;
      rx[i].msg_hdr.msg_controllen = kControlBytes;
    }
  }

  struct ClientSend {
    mmsghdr msg{};
    iovec iov{};
    sockaddr_storage addr{};
    alignas(cmsghdr) uint8_t control[kControlBytes]{};
  };

  size_t size;
  std::vector<uint8_t> storage;
  std::vector<mmsghdr> rx;
  std::vector<iovec> rx_iov;
  std::vector<sockaddr_storage> rx_addr;
  std::vector<uint8_t> rx_control;
  std::vector<mmsghdr> to_transceiver;
  std::vector<iovec> to_transceiver_iov;
  std::vector<sockaddr_in6> to_transceiver_addr;
  size_t to_transceiver_count = 0;
  std::vector<std::vector<ClientSend>> to_client;
  std::vector<size_t> to_client_count;
};

UdpWorker::UdpWorker(unsigned index, const RelayConfig& config, std::shared_ptr<const RoutingTable> routing,
                     FlowSync* flow_sync, RecoveredHook on_recovered)
    : index_(index),
      config_(config),
      core_(
          FlowTable::Options{static_cast<uint32_t>((config.flow_capacity + std::max(1u, config.workers) - 1) /
                                                   std::max(1u, config.workers)),
                             config.flow_idle_timeout, config.flow_evict_idle_after, 16},
          std::move(routing), config.flow_limits),
      batch_(std::make_unique<Batch>(config.batch_size, config.listen.size())),
      flow_sync_(flow_sync),
      on_recovered_(std::move(on_recovered)) {
  batch_->to_client_count.assign(config.listen.size(), 0);
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
  try {
    for (const auto& vip : config.listen) {
      VipSocket s;
      s.bound = vip;
      s.wildcard = vip.is_unspecified();
      s.fd = socket(vip.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (s.fd < 0) fail("socket for VIP " + vip.to_string());
      vips_.push_back(s);
      set_int_option(s.fd, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT on " + vip.to_string());
      set_socket_buffers(s.fd, buf, "VIP " + vip.to_string());
      if (!vip.is_v4()) set_int_option(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY");
      // Only a wildcard VIP needs to learn the destination address of each datagram; the
      // kernel builds that control message per packet, so specific VIPs go without it.
      if (s.wildcard && vip.is_v4()) set_int_option(s.fd, IPPROTO_IP, IP_PKTINFO, 1, "IP_PKTINFO");
      if (s.wildcard && !vip.is_v4())
        set_int_option(s.fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO");
      if (bind(s.fd, vip.sa(), vip.len()) < 0) fail("bind VIP " + vip.to_string());
    }
    return_fd_ = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (return_fd_ < 0) fail("return socket");
    set_int_option(return_fd_, IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY=0 on return socket");
    set_socket_buffers(return_fd_, buf, "return socket");
    SocketAddress ret = config.return_listen;
    if (ret.port() != 0) ret.set_port(static_cast<uint16_t>(ret.port() + index));
    if (bind(return_fd_, ret.sa(), ret.len()) < 0) fail("bind return socket " + ret.to_string());
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof bound;
    getsockname(return_fd_, reinterpret_cast<sockaddr*>(&bound), &bound_len);
    return_address_ = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&bound), bound_len);

    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) fail("epoll/eventfd");
    auto watch = [&](int fd, uint64_t tag) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = tag;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0) fail("epoll_ctl");
    };
    for (size_t i = 0; i < vips_.size(); i++) watch(vips_[i].fd, i);
    watch(return_fd_, 1000);
    watch(wake_fd_, 1001);
  } catch (...) {
    for (auto& s : vips_)
      if (s.fd >= 0) close(s.fd);
    if (return_fd_ >= 0) close(return_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    throw;
  }
}

UdpWorker::~UdpWorker() {
  request_stop();
  join();
  for (auto& s : vips_) close(s.fd);
  close(return_fd_);
  close(epoll_fd_);
  close(wake_fd_);
}

void UdpWorker::start() {
  thread_ = std::thread([this] { run(); });
}

void UdpWorker::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
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
  if (config_.pin_cpus) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0) {
      int want = static_cast<int>(index_ % static_cast<unsigned>(CPU_COUNT(&allowed)));
      for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (want-- == 0) {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(cpu, &one);
          if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0)
            spdlog::warn("worker {}: could not pin to CPU {}", index_, cpu);
          break;
        }
      }
    }
  }
  const uint32_t sweep_slots = std::max<uint32_t>(64, core_.flows().capacity() / 10);
  Nanos last_housekeeping = monotonic_now();
  epoll_event events[32];
  while (!stop_.load(std::memory_order_acquire)) {
    int n = epoll_wait(epoll_fd_, events, 32, kHousekeepingMs);
    if (n < 0 && errno != EINTR) {
      spdlog::error("worker {}: epoll_wait: {}", index_, std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; i++) {
      const uint64_t tag = events[i].data.u64;
      if (tag == 1001) {
        uint64_t drained;
        [[maybe_unused]] auto r = read(wake_fd_, &drained, sizeof drained);
        if (auto table = mailbox_.take()) core_.set_routing(std::move(table));
        if (flow_channel_) drain_flow_replies(monotonic_now());
      } else if (tag == 1000) {
        drain_return();
      } else {
        drain_vip(tag);
      }
    }
    const Nanos now = monotonic_now();
    if (now - last_housekeeping >= kHousekeepingMs * 1'000'000LL) {
      core_.expire(now, sweep_slots);
      last_housekeeping = now;
    }
    notify_flow_sync();
  }
}

void UdpWorker::drain_vip(size_t vip_index) {
  const VipSocket& vip = vips_[vip_index];
  Batch& b = *batch_;
  for (int round = 0; round < kBatchesPerWakeup; round++) {
    b.arm_rx();
    int n = recvmmsg(vip.fd, b.rx.data(), static_cast<unsigned>(b.size), MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    const Nanos now = monotonic_now();
    for (int i = 0; i < n; i++) {
      msghdr& h = b.rx[i].msg_hdr;
      if (h.msg_flags & MSG_TRUNC) {
        core_.counters().drop(DropReason::oversize);
        continue;
      }
      SocketAddress client =
          SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&b.rx_addr[i]), h.msg_namelen);
      SocketAddress local = vip.bound;
      if (vip.wildcard) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
          if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            in_pktinfo info;
            std::memcpy(&info, CMSG_DATA(c), sizeof info);
            local = SocketAddress::from_bytes(RTCE_FAMILY_V4, reinterpret_cast<uint8_t*>(&info.ipi_addr),
                                              vip.bound.port());
          } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            in6_pktinfo info;
            std::memcpy(&info, CMSG_DATA(c), sizeof info);
            local = SocketAddress::from_bytes(RTCE_FAMILY_V6, info.ipi6_addr.s6_addr, vip.bound.port());
          }
        }
      }
      auto out = core_.on_client_packet(client, local, static_cast<uint16_t>(vip_index), b.packet(i),
                                        b.rx[i].msg_len, now);
      if (out) queue_to_transceiver(*out);
    }
    flush_to_transceivers();
    notify_flow_sync();
    if (static_cast<size_t>(n) < b.size) return;
  }
}

void UdpWorker::drain_return() {
  Batch& b = *batch_;
  for (int round = 0; round < kBatchesPerWakeup; round++) {
    b.arm_rx();
    int n = recvmmsg(return_fd_, b.rx.data(), static_cast<unsigned>(b.size), MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    for (int i = 0; i < n; i++) {
      msghdr& h = b.rx[i].msg_hdr;
      if (h.msg_flags & MSG_TRUNC) {
        core_.counters().drop(DropReason::oversize);
        continue;
      }
      sockaddr_in6 from{};
      std::memcpy(&from, &b.rx_addr[i], sizeof from);
      auto out = core_.on_transceiver_packet(from, b.packet(i), b.rx[i].msg_len);
      if (!out) continue;
      const VipSocket& vip = vips_[out->vip_socket];
      size_t k = b.to_client_count[out->vip_socket]++;
      Batch::ClientSend& s = b.to_client[out->vip_socket][k];
      s.msg = {};
      std::memcpy(&s.addr, out->client.sa(), out->client.len());
      s.iov = {const_cast<uint8_t*>(out->data), out->len};
      s.msg.msg_hdr.msg_name = &s.addr;
      s.msg.msg_hdr.msg_namelen = out->client.len();
      s.msg.msg_hdr.msg_iov = &s.iov;
      s.msg.msg_hdr.msg_iovlen = 1;
      if (vip.wildcard) {
        // Answer from the exact VIP address the client sent to (ICE requires it).
        s.msg.msg_hdr.msg_control = s.control;
        cmsghdr* c = reinterpret_cast<cmsghdr*>(s.control);
        uint8_t addr[16];
        out->vip.to_bytes(addr);
        if (vip.bound.is_v4()) {
          in_pktinfo info{};
          std::memcpy(&info.ipi_spec_dst, addr, 4);
          c->cmsg_level = IPPROTO_IP;
          c->cmsg_type = IP_PKTINFO;
          c->cmsg_len = CMSG_LEN(sizeof info);
          std::memcpy(CMSG_DATA(c), &info, sizeof info);
          s.msg.msg_hdr.msg_controllen = CMSG_SPACE(sizeof info);
        } else {
          in6_pktinfo info{};
          std::memcpy(&info.ipi6_addr, addr, 16);
          c->cmsg_level = IPPROTO_IPV6;
          c->cmsg_type = IPV6_PKTINFO;
          c->cmsg_len = CMSG_LEN(sizeof info);
          std::memcpy(CMSG_DATA(c), &info, sizeof info);
          s.msg.msg_hdr.msg_controllen = CMSG_SPACE(sizeof info);
        }
      }
    }
    for (size_t v = 0; v < vips_.size(); v++) flush_to_clients(v);
    if (static_cast<size_t>(n) < b.size) return;
  }
}

void UdpWorker::queue_to_transceiver(const ToTransceiver& out) {
  Batch& b = *batch_;
  if (b.to_transceiver_count == b.size) flush_to_transceivers();
  size_t k = b.to_transceiver_count++;
  b.to_transceiver_addr[k] = *out.endpoint;
  b.to_transceiver_iov[k] = {const_cast<uint8_t*>(out.data), out.len};
  b.to_transceiver[k] = {};
  b.to_transceiver[k].msg_hdr.msg_name = &b.to_transceiver_addr[k];
  b.to_transceiver[k].msg_hdr.msg_namelen = sizeof(sockaddr_in6);
  b.to_transceiver[k].msg_hdr.msg_iov = &b.to_transceiver_iov[k];
  b.to_transceiver[k].msg_hdr.msg_iovlen = 1;
}

void UdpWorker::drain_flow_replies(Nanos now) {
  // The packets that waited live in the core's recovery pool until the next miss; they are
  // all sent (flushed) before this returns, so no miss can reuse their slots first.
  flow_channel_->drain_replies([&](const FlowLookupReply& reply) {
    const Flow* flow = core_.on_lookup_reply(reply.key, reply.endpoint_id, now,
                                             [&](const ToTransceiver& out) { queue_to_transceiver(out); });
    if (flow && on_recovered_) on_recovered_(*flow);
  });
  flush_to_transceivers();
}

void UdpWorker::notify_flow_sync() {
  if (flow_sync_ && core_.take_flow_store_activity()) flow_sync_->notify();
}

void UdpWorker::flush_to_transceivers() {
  Batch& b = *batch_;
  size_t sent = 0;
  while (sent < b.to_transceiver_count) {
    int n = sendmmsg(return_fd_, b.to_transceiver.data() + sent,
                     static_cast<unsigned>(b.to_transceiver_count - sent), MSG_DONTWAIT);
    if (n <= 0) {
      core_.counters().drop(DropReason::send_error);  // skip the one the kernel refused
      sent++;
    } else {
      sent += static_cast<size_t>(n);
    }
  }
  b.to_transceiver_count = 0;
}

void UdpWorker::flush_to_clients(size_t vip_index) {
  Batch& b = *batch_;
  size_t count = b.to_client_count[vip_index];
  if (count == 0) return;
  // ClientSend entries are not contiguous mmsghdrs; gather the headers for one call.
  std::vector<Batch::ClientSend>& queue = b.to_client[vip_index];
  size_t sent = 0;
  mmsghdr msgs[64];
  while (sent < count) {
    size_t chunk = std::min<size_t>(count - sent, 64);
    for (size_t i = 0; i < chunk; i++) msgs[i] = queue[sent + i].msg;
    int n = sendmmsg(vips_[vip_index].fd, msgs, static_cast<unsigned>(chunk), MSG_DONTWAIT);
    if (n <= 0) {
      core_.counters().drop(DropReason::send_error);
      sent++;
    } else {
      sent += static_cast<size_t>(n);
    }
  }
  b.to_client_count[vip_index] = 0;
}

}  // namespace rtce
