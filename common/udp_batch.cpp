// udp_batch.cpp — see udp_batch.h.
#include "udp_batch.h"

#include <cstring>

#include "rtce_proxy_v2.h"

namespace rtce {

namespace {

// Makes `value` the only control message of `h` (whose msg_control has room for it).
template <typename T>
void put_control_message(msghdr& h, int level, int type, const T& value) {
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(sizeof value);
  std::memcpy(CMSG_DATA(c), &value, sizeof value);
  h.msg_controllen = CMSG_SPACE(sizeof value);
}

}  // namespace

UdpReceiveBatch::UdpReceiveBatch(size_t capacity, size_t max_datagram, size_t headroom)
    : max_datagram_(max_datagram),
      headroom_(headroom),
      stride_(headroom + max_datagram),
      storage_(capacity * stride_),
      msgs_(capacity),
      iov_(capacity),
      addrs_(capacity),
      control_(capacity) {
  for (size_t i = 0; i < capacity; i++) {
    iov_[i] = {data(i), max_datagram_};
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
    msgs_[i].msg_hdr.msg_name = &addrs_[i];
    msgs_[i].msg_hdr.msg_control = control_[i].bytes;
  }
}

size_t UdpReceiveBatch::receive(int fd) {
  // The kernel shrinks these to what it wrote; restore them for every slot it may fill.
  for (auto& m : msgs_) {
    m.msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    m.msg_hdr.msg_controllen = kUdpControlBytes;
    m.msg_hdr.msg_flags = 0;
  }
  // MSG_TRUNC: msg_len is the datagram's real length, and msg_flags says it was cut.
  const int n =
      recvmmsg(fd, msgs_.data(), static_cast<unsigned>(msgs_.size()), MSG_DONTWAIT | MSG_TRUNC, nullptr);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

uint8_t UdpReceiveBatch::destination_bytes(size_t i, uint8_t out[16]) const {
  // CMSG_NXTHDR takes a non-const msghdr; this one is only read.
  auto& h = const_cast<msghdr&>(msgs_[i].msg_hdr);
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo info;
      std::memcpy(&info, CMSG_DATA(c), sizeof info);
      std::memset(out, 0, 16);
      std::memcpy(out, &info.ipi_addr, 4);
      return RTCE_FAMILY_V4;
    }
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo info;
      std::memcpy(&info, CMSG_DATA(c), sizeof info);
      std::memcpy(out, info.ipi6_addr.s6_addr, 16);
      return RTCE_FAMILY_V6;
    }
  }
  return 0;
}

std::optional<SocketAddress> UdpReceiveBatch::destination(size_t i, uint16_t port) const {
  uint8_t addr[16];
  const uint8_t family = destination_bytes(i, addr);
  if (!family) return std::nullopt;
  return SocketAddress::from_bytes(family, addr, port);
}

UdpSendBatch::UdpSendBatch(size_t capacity, size_t copy_bytes)
    : copy_bytes_(copy_bytes),
      storage_(capacity * copy_bytes),
      msgs_(capacity),
      iov_(capacity),
      addrs_(capacity),
      control_(capacity) {
  for (size_t i = 0; i < capacity; i++) {
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
    msgs_[i].msg_hdr.msg_name = &addrs_[i];
  }
}

bool UdpSendBatch::add(const uint8_t* data, size_t len, const sockaddr* to, socklen_t to_len,
                       const sockaddr* source) {
  if (full() || to_len > sizeof(sockaddr_storage)) return false;
  const size_t k = count_++;
  std::memcpy(&addrs_[k], to, to_len);
  iov_[k] = {const_cast<uint8_t*>(data), len};
  msghdr& h = msgs_[k].msg_hdr;
  h.msg_namelen = to_len;
  h.msg_control = nullptr;
  h.msg_controllen = 0;
  if (source) {
    h.msg_control = control_[k].bytes;
    h.msg_controllen = kUdpControlBytes;
    if (source->sa_family == AF_INET) {
      in_pktinfo info{};
      info.ipi_spec_dst = reinterpret_cast<const sockaddr_in*>(source)->sin_addr;
      put_control_message(h, IPPROTO_IP, IP_PKTINFO, info);
    } else {
      in6_pktinfo info{};
      info.ipi6_addr = reinterpret_cast<const sockaddr_in6*>(source)->sin6_addr;
      put_control_message(h, IPPROTO_IPV6, IPV6_PKTINFO, info);
    }
  }
  return true;
}

size_t UdpSendBatch::flush(int fd) {
  size_t sent = 0, refused = 0;
  while (sent < count_) {
    const int n = sendmmsg(fd, msgs_.data() + sent, static_cast<unsigned>(count_ - sent), MSG_DONTWAIT);
    if (n <= 0) {
      refused++;  // skip the one the kernel refused
      sent++;
    } else {
      sent += static_cast<size_t>(n);
    }
  }
  count_ = 0;
  return refused;
}

}  // namespace rtce
