// tcp_streams.cpp — see tcp_streams.h.
#include "tcp_streams.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "flow_key.h"
#include "rtce_flow_limit.h"
#include "udp_socket_options.h"

namespace rtce {
namespace {

constexpr int kListenBacklog = 1024;
// Reads per readable connection per wake-up: 4 x 4 KiB by default, then the level-triggered
// epoll comes back to it after the other connections had their turn.
constexpr int kReadsPerWakeup = 4;
// Accepts per wake-up and listener, for the same reason.
constexpr int kAcceptsPerWakeup = 64;
constexpr size_t kLengthBytes = kRfc4571LengthBytes;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

// ---------------------------------------------------------------- connections

struct TcpStreams::Connection {
  Connection(size_t max_frame, size_t send_cap) : reader(max_frame) { queued.reserve(send_cap); }
  UniqueFd fd;
  rtce_flow_key key{};
  std::string prefix;
  uint16_t vip = 0;
  uint32_t generation = 0;
  bool verified = false;  // its first frame made a flow
  bool dirty = false;     // in dirty_
  bool want_write = false;
  Nanos opened = 0;
  Nanos last_frame = 0;
  FrameReader reader;
  std::vector<uint8_t> queued;  // frames for the client not yet taken by the kernel
  size_t sent = 0;              // of queued
};

TcpStreams::TcpStreams(const IceTcpOptions& options, const FlowLimits& prefix_lengths,
                       const std::vector<SocketAddress>& vips, unsigned workers, int epoll_fd,
                       StreamSink& sink)
    : options_(options),
      prefix_lengths_(prefix_lengths),
      max_connections_(
          std::max(1u, (options.max_connections + std::max(1u, workers) - 1) / std::max(1u, workers))),
      epoll_fd_(epoll_fd),
      sink_(sink) {
  for (const SocketAddress& vip : vips) {
    SocketAddress addr = vip;
    addr.set_port(options.port);
    UniqueFd fd(socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) fail("ICE-TCP socket for " + addr.to_string());
    set_socket_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR on TCP " + addr.to_string());
    set_socket_option(fd.get(), SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT on TCP " + addr.to_string());
    if (!addr.is_v4()) set_socket_option(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY");
    if (::bind(fd.get(), addr.sa(), addr.len()) < 0) fail("bind ICE-TCP " + addr.to_string());
    if (::listen(fd.get(), kListenBacklog) < 0) fail("listen ICE-TCP " + addr.to_string());
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTagBase + listeners_.size();
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd.get(), &ev) < 0) fail("epoll_ctl ICE-TCP listener");
    listeners_.push_back({std::move(fd), addr});
  }
}

TcpStreams::~TcpStreams() {
  // A relay that stops closes its connections (FIN): browsers see the failure at once and
  // restart ICE, instead of waiting for their consent checks to time out.
  for (uint32_t slot = 0; slot < slots_.size(); slot++)
    if (slots_[slot] && slots_[slot]->fd) close(slot, TcpCloseReason::shutdown);
}

// Tags: kTagBase + listener index; kTagBase | bit 61 | generation << 24 | slot for a
// connection, so an event of a closed connection never reaches the one that reuses its slot.
namespace {
constexpr uint64_t kConnectionBit = uint64_t{1} << 61;
constexpr uint64_t kSlotMask = (uint64_t{1} << 24) - 1;
uint64_t connection_tag(uint32_t generation, uint32_t slot) {
  return TcpStreams::kTagBase | kConnectionBit | (uint64_t{generation} << 24) | slot;
}
}  // namespace

TcpStreams::Connection* TcpStreams::find(uint64_t tag) {
  const auto slot = static_cast<uint32_t>(tag & kSlotMask);
  const auto generation = static_cast<uint32_t>((tag & ~(kTagBase | kConnectionBit)) >> 24);
  if (slot >= slots_.size() || !slots_[slot] || !slots_[slot]->fd || slots_[slot]->generation != generation)
    return nullptr;
  return slots_[slot].get();
}

void TcpStreams::on_event(uint64_t tag, uint32_t events, Nanos now) {
  if (!(tag & kConnectionBit)) {
    const size_t listener = tag - kTagBase;
    if (listener < listeners_.size()) accept_all(listener, now);
    return;
  }
  Connection* c = find(tag);
  if (!c) return;
  const auto slot = static_cast<uint32_t>(tag & kSlotMask);
  if (events & EPOLLOUT) write(*c);
  if (c->fd && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) read(slot, now);
}

std::string TcpStreams::prefix_of(const rtce_flow_key& key) const {
  rtce_prefix_limit_key prefix{};
  rtce_prefix_limit_key_of(
      &key,
      key.family == RTCE_FAMILY_V6 ? prefix_lengths_.source_prefix_v6 : prefix_lengths_.source_prefix_v4,
      &prefix);
  return std::string(reinterpret_cast<const char*>(&prefix), sizeof prefix);
}

void TcpStreams::accept_all(size_t listener, Nanos now) {
  for (int i = 0; i < kAcceptsPerWakeup; i++) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    UniqueFd fd(accept4(listeners_[listener].fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len,
                        SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED && errno != EINTR)
        spdlog::warn("ICE-TCP accept on {}: {}", listeners_[listener].bound.to_string(),
                     std::strerror(errno));
      return;
    }
    counters_.accepted.add();
    rtce_flow_key key{};
    key.transport = RTCE_TRANSPORT_TCP;
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &local_len);
    set_flow_vip(key, reinterpret_cast<const sockaddr*>(&local));
    set_flow_client(key, reinterpret_cast<const sockaddr*>(&peer));
    key.transport = RTCE_TRANSPORT_TCP;
    // Refused connections are closed at once (RST would tell a scanner more; FIN is enough).
    if (by_key_.size() >= max_connections_) {
      counters_.closed[static_cast<size_t>(TcpCloseReason::max_connections)].add();
      continue;
    }
    std::string prefix = prefix_of(key);
    uint32_t& in_prefix = per_prefix_[prefix];
    if (in_prefix >= options_.max_per_source_prefix) {
      counters_.closed[static_cast<size_t>(TcpCloseReason::source_prefix)].add();
      continue;
    }
    // Media is small and latency-bound: no Nagle delay on replies. (Never a throw on the
    // worker's thread: a connection reset already fails its first read.)
    const int on = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      if (slot > kSlotMask) return;  // unreachable below max_connections' bound
      slots_.emplace_back();
    }
    auto c = std::make_unique<Connection>(options_.max_frame, options_.send_queue_bytes);
    c->fd = std::move(fd);
    c->key = key;
    c->prefix = std::move(prefix);
    c->vip = static_cast<uint16_t>(listener);
    c->generation = next_generation_++ & 0xffffffu;
    c->opened = c->last_frame = now;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = connection_tag(c->generation, slot);
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd.get(), &ev) < 0) {
      counters_.closed[static_cast<size_t>(TcpCloseReason::socket_error)].add();
      free_slots_.push_back(slot);
      continue;
    }
    in_prefix++;
    by_key_[key] = slot;
    slots_[slot] = std::move(c);
    counters_.active.set(by_key_.size());
  }
}

void TcpStreams::read(uint32_t slot, Nanos now) {
  Connection& c = *slots_[slot];
  // Acknowledge what was read at once: a client that leaves Nagle on (Firefox's ICE-TCP
  // sockets) holds each small packet until its previous one is acknowledged, and a delayed
  // ACK (40 ms on Linux) then delays its audio by as much. Quick-ack mode does not last, so it
  // is re-armed once per wake-up; it also sends an ACK that is pending now.
  const int on = 1;  // (a failure here means the connection failed: the recv below says how)
  setsockopt(c.fd.get(), IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
  for (int i = 0; i < kReadsPerWakeup; i++) {
    const std::span<uint8_t> space = c.reader.space();
    const ssize_t n = recv(c.fd.get(), space.data(), space.size(), MSG_DONTWAIT);
    if (n == 0) return close(slot, TcpCloseReason::client_closed);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      return close(slot, errno == ECONNRESET ? TcpCloseReason::client_closed : TcpCloseReason::socket_error);
    }
    counters_.reads.add();
    c.reader.commit(static_cast<size_t>(n));
    while (auto frame = c.reader.next()) {
      counters_.frames_from_clients.add();
      if (!sink_.on_stream_frame(c.key, c.vip, *frame, now))
        return close(slot, c.verified ? TcpCloseReason::flow_gone : TcpCloseReason::first_frame_refused);
      c.verified = true;
      c.last_frame = now;
    }
    if (c.reader.too_large()) return close(slot, TcpCloseReason::frame_too_large);
    if (static_cast<size_t>(n) < space.size()) return;  // drained
  }
}

void TcpStreams::queue_reply(const rtce_flow_key& key, const uint8_t* data, size_t len) {
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) {
    counters_.reply_no_connection.add();
    return;
  }
  Connection& c = *slots_[it->second];
  if (c.sent > 0 && c.queued.size() + kLengthBytes + len > options_.send_queue_bytes) {
    // Room behind what the kernel took: move the rest to the front (once per flush at most).
    c.queued.erase(c.queued.begin(), c.queued.begin() + static_cast<std::ptrdiff_t>(c.sent));
    c.sent = 0;
  }
  if (!append_frame(c.queued, options_.send_queue_bytes, {data, len})) {
    counters_.reply_overflow.add();
    return;
  }
  counters_.frames_to_clients.add();
  if (!c.dirty) {
    c.dirty = true;
    dirty_.push_back(it->second);
  }
}

void TcpStreams::flush() {
  for (const uint32_t slot : dirty_) {
    Connection* c = slots_[slot].get();
    if (!c || !c->fd) continue;
    c->dirty = false;
    if (!c->want_write) write(*c);  // else EPOLLOUT says when the kernel has room
  }
  dirty_.clear();
}

void TcpStreams::write(Connection& c) {
  if (c.sent < c.queued.size()) {
    const ssize_t n =
        send(c.fd.get(), c.queued.data() + c.sent, c.queued.size() - c.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    counters_.sends.add();
    if (n > 0) c.sent += static_cast<size_t>(n);
    // An error shows again on the next read, which closes the connection with its reason.
  }
  if (c.sent == c.queued.size()) {
    c.queued.clear();
    c.sent = 0;
  }
  set_writable_interest(c, !c.queued.empty());
}

void TcpStreams::set_writable_interest(Connection& c, bool want) {
  if (c.want_write == want) return;
  c.want_write = want;
  const auto slot = static_cast<uint32_t>(by_key_.at(c.key));
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want ? EPOLLOUT : 0u);
  ev.data.u64 = connection_tag(c.generation, slot);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd.get(), &ev);
}

void TcpStreams::close(uint32_t slot, TcpCloseReason why) {
  std::unique_ptr<Connection> c = std::move(slots_[slot]);
  counters_.closed[static_cast<size_t>(why)].add();
  by_key_.erase(c->key);
  if (auto it = per_prefix_.find(c->prefix); it != per_prefix_.end() && --it->second == 0)
    per_prefix_.erase(it);
  free_slots_.push_back(slot);
  counters_.active.set(by_key_.size());
  if (c->verified) sink_.on_stream_closed(c->key);
  // The descriptor closes with c (epoll forgets it); a queued dirty_ entry finds the slot empty.
}

void TcpStreams::expire(Nanos now) {
  for (uint32_t slot = 0; slot < slots_.size(); slot++) {
    Connection* c = slots_[slot].get();
    if (!c) continue;
    if (!c->verified && now - c->opened >= options_.first_frame_timeout)
      close(slot, TcpCloseReason::first_frame_timeout);
    else if (c->verified && now - c->last_frame >= options_.idle_timeout)
      close(slot, TcpCloseReason::idle);
    else if (c->verified && !sink_.stream_flow_alive(c->key))
      close(slot, TcpCloseReason::flow_gone);
  }
}

}  // namespace rtce
