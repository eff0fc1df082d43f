// udp_batch.h — fixed-capacity batches for recvmmsg and sendmmsg, shared by the relay's
// UDP workers and the transceiver's media workers. Every buffer (payload slots, iovecs,
// mmsghdrs, addresses, control messages) is allocated in the constructor; receiving,
// queueing and flushing allocate nothing and make one system call per batch.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "clock.h"
#include "net_address.h"

namespace rtce {

// Room for one IP_PKTINFO or IPV6_PKTINFO control message, the only ones we ask for.
inline constexpr size_t kUdpControlBytes = 64;

class UdpReceiveBatch {
 public:
  // `capacity` datagrams of up to `max_datagram` bytes, each with `headroom` writable bytes
  // in front of it (the relay prepends its framing there without moving the payload).
  UdpReceiveBatch(size_t capacity, size_t max_datagram, size_t headroom = 0);
  // Moving keeps every buffer where it is (the headers point into them); copying would not.
  UdpReceiveBatch(UdpReceiveBatch&&) = default;
  UdpReceiveBatch& operator=(UdpReceiveBatch&&) = default;

  size_t capacity() const { return msgs_.size(); }
  size_t max_datagram() const { return max_datagram_; }

  // One non-blocking recvmmsg into every slot. Returns how many datagrams came: 0 when
  // none was waiting, or on an error (the caller's event loop will be woken again).
  size_t receive(int fd);

  uint8_t* data(size_t i) { return storage_.data() + i * stride_ + headroom_; }
  // The datagram's length as sent, which exceeds max_datagram() when it was truncated.
  size_t length(size_t i) const { return msgs_[i].msg_len; }
  // Cut to max_datagram() bytes: count it as a drop, its bytes are not the datagram.
  bool truncated(size_t i) const {
    return (msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 || msgs_[i].msg_len > max_datagram_;
  }
  const sockaddr_storage& source(size_t i) const { return addrs_[i]; }
  socklen_t source_length(size_t i) const { return msgs_[i].msg_hdr.msg_namelen; }
  SocketAddress source_address(size_t i) const {
    return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&addrs_[i]), source_length(i));
  }
  // The address the datagram was sent to, with `port`: from the IP_PKTINFO/IPV6_PKTINFO
  // message a socket asked for with request_destination_address(); nullopt without one.
  std::optional<SocketAddress> destination(size_t i, uint16_t port) const;
  // The same address as bytes (4 or 16, network order) written to out[16]: returns
  // RTCE_FAMILY_V4 or RTCE_FAMILY_V6, or 0 (and leaves out alone) without one.
  uint8_t destination_bytes(size_t i, uint8_t out[16]) const;

 private:
  struct alignas(cmsghdr) Control {
    uint8_t bytes[kUdpControlBytes];
  };
  size_t max_datagram_;
  size_t headroom_;
  size_t stride_;
  std::vector<uint8_t> storage_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<Control> control_;
};

class UdpSendBatch {
 public:
  // Up to `capacity` queued datagrams. With copy_bytes > 0 each slot also owns a buffer of
  // that size (next_buffer()) for callers whose payload does not outlive the call.
  explicit UdpSendBatch(size_t capacity, size_t copy_bytes = 0);
  UdpSendBatch(UdpSendBatch&&) = default;
  UdpSendBatch& operator=(UdpSendBatch&&) = default;

  size_t capacity() const { return msgs_.size(); }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == msgs_.size(); }

  // Queues `len` bytes at `data` for `to`; the bytes must stay put until flush(). With
  // `source`, the datagram leaves from that address (IP_PKTINFO / IPV6_PKTINFO): a socket
  // bound to a wildcard address answers from the exact address its peer sent to, as ICE
  // requires. Returns false, queueing nothing, when the batch is full: flush first.
  bool add(const uint8_t* data, size_t len, const sockaddr* to, socklen_t to_len,
           const sockaddr* source = nullptr);
  bool add(const uint8_t* data, size_t len, const SocketAddress& to, const SocketAddress* source = nullptr) {
    return add(data, len, to.sa(), to.len(), source ? source->sa() : nullptr);
  }
  // The buffer of the slot the next add() fills (copy_bytes long): write the datagram
  // there, then add() it. Empty when the batch is full or owns no buffers.
  std::span<uint8_t> next_buffer() {
    if (full() || copy_bytes_ == 0) return {};
    return {storage_.data() + count_ * copy_bytes_, copy_bytes_};
  }

  // Sends everything queued with sendmmsg and empties the batch. A datagram the kernel
  // refuses (socket buffer full, destination unreachable) is skipped so the rest still
  // go; returns how many were refused, for the caller's drop counter.
  size_t flush(int fd);

 private:
  struct alignas(cmsghdr) Control {
    uint8_t bytes[kUdpControlBytes];
  };
  size_t copy_bytes_;
  size_t count_ = 0;
  std::vector<uint8_t> storage_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<Control> control_;
};

// Drains a non-blocking UDP socket into `rx` as every worker does: up to `max_rounds`
// recvmmsg batches (bounded, so timers and the other sockets run under load too), stopping
// at the first batch that is not full (the socket is empty). Calls on_datagram(i, now) for
// each datagram of a batch, truncated ones included (rx.truncated(i) tells), with `now`
// read once per batch, then after_batch(): sends that point into `rx` must leave there,
// before the next batch reuses its buffers. Returns how many datagrams came.
template <typename OnDatagram, typename AfterBatch>
size_t drain_udp(int fd, UdpReceiveBatch& rx, int max_rounds, OnDatagram&& on_datagram,
                 AfterBatch&& after_batch) {
  size_t total = 0;
  for (int round = 0; round < max_rounds; round++) {
    const size_t n = rx.receive(fd);
    if (n == 0) break;
    total += n;
    const Nanos now = monotonic_now();
    for (size_t i = 0; i < n; i++) on_datagram(i, now);
    after_batch();
    if (n < rx.capacity()) break;
  }
  return total;
}

}  // namespace rtce
