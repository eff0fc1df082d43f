// udp_batch.cpp — see udp_batch.h.
#include "udp_batch.h"

#include <netinet/udp.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "rtce_proxy_v2.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103  // linux/udp.h; older libc headers lack it
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

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
    : UdpReceiveBatch(capacity, max_datagram, max_datagram, headroom, 1) {}

UdpReceiveBatch UdpReceiveBatch::coalescing(size_t slots, size_t max_datagram) {
  return UdpReceiveBatch(slots, kUdpMaxCoalescedBytes, max_datagram, 0, kUdpMaxSegmentsPerReceive + 1);
}

UdpReceiveBatch::UdpReceiveBatch(size_t slots, size_t slot_bytes, size_t max_datagram, size_t headroom,
                                 size_t views_per_slot)
    : max_datagram_(max_datagram),
      slot_bytes_(slot_bytes),
      headroom_(headroom),
      stride_(headroom + slot_bytes),
      views_per_slot_(views_per_slot),
      storage_(slots * stride_),
      msgs_(slots),
      iov_(slots),
      addrs_(slots),
      control_(slots),
      views_(slots * views_per_slot) {
  for (size_t i = 0; i < slots; i++) {
    iov_[i] = {storage_.data() + i * stride_ + headroom_, slot_bytes_};
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
    msgs_[i].msg_hdr.msg_name = &addrs_[i];
    msgs_[i].msg_hdr.msg_control = control_[i].bytes;
  }
}

size_t UdpReceiveBatch::receive(int fd, bool wait) {
  // The kernel shrinks these to what it wrote; restore them for every slot it may fill.
  for (auto& m : msgs_) {
    m.msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    m.msg_hdr.msg_controllen = kUdpControlBytes;
    m.msg_hdr.msg_flags = 0;
  }
  // MSG_TRUNC: msg_len is the datagram's real length, and msg_flags says it was cut.
  const int n = recvmmsg(fd, msgs_.data(), static_cast<unsigned>(msgs_.size()),
                         (wait ? MSG_WAITFORONE : MSG_DONTWAIT) | MSG_TRUNC, nullptr);
  filled_ = n > 0 && static_cast<size_t>(n) == msgs_.size();
  size_t count = 0;
  for (int s = 0; s < n; s++) count += split(static_cast<size_t>(s), count);
  return count;
}

int udp_gro_segment_size(msghdr& h) {
  if (h.msg_controllen == 0) return 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level != SOL_UDP || c->cmsg_type != UDP_GRO) continue;
    int size = 0;
    if (c->cmsg_len < CMSG_LEN(sizeof size)) return -1;
    std::memcpy(&size, CMSG_DATA(c), sizeof size);
    return size > 0 && size <= 65535 ? size : -1;
  }
  return 0;
}

size_t cut_receive(size_t received, size_t held, bool truncated, int segment,
                   std::span<UdpDatagramPiece> out) {
  if (segment == 0 || (segment > 0 && received <= static_cast<size_t>(segment))) {  // one datagram
    out[0] = {0, static_cast<uint32_t>(received), truncated || received > held};
    return 1;
  }
  // A coalesced run: datagrams of `segment` bytes, the last maybe shorter. Only the whole
  // ones in the slot are datagrams; the rest is one bad piece (all of it, when malformed).
  size_t k = 0, off = 0;
  if (segment > 0) {
    const size_t whole = std::min(received, held);
    while (k + 1 < out.size() && off < whole) {
      const size_t len = std::min(static_cast<size_t>(segment), received - off);
      if (off + len > whole) break;
      out[k++] = {static_cast<uint32_t>(off), static_cast<uint32_t>(len), false};
      off += len;
    }
  }
  if (off < received) out[k++] = {static_cast<uint32_t>(off), static_cast<uint32_t>(received - off), true};
  return k;
}

size_t UdpReceiveBatch::split(size_t s, size_t first) {
  msghdr& h = msgs_[s].msg_hdr;
  UdpDatagramPiece pieces[kUdpMaxSegmentsPerReceive + 1];
  const size_t received = msgs_[s].msg_len;
  const int segment = udp_gro_segment_size(h);
  const size_t n = cut_receive(received, slot_bytes_, (h.msg_flags & MSG_TRUNC) != 0, segment,
                               std::span(pieces, views_per_slot_));
  const auto base = static_cast<uint32_t>(s * stride_ + headroom_);
  for (size_t k = 0; k < n; k++) {
    const UdpDatagramPiece& p = pieces[k];
    views_[first + k] = {base + p.offset, p.length, static_cast<uint32_t>(s), p.bad};
  }
  // A run that did not split whole (a plain datagram cut by its slot is not one).
  const bool run = segment < 0 || (segment > 0 && received > static_cast<size_t>(segment));
  if (run && pieces[n - 1].bad) split_errors_++;
  return n;
}

uint8_t UdpReceiveBatch::destination_bytes(size_t i, uint8_t out[16]) const {
  // CMSG_NXTHDR takes a non-const msghdr; this one is only read.
  auto& h = const_cast<msghdr&>(msgs_[views_[i].slot].msg_hdr);
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

UdpGsoSendBatch::UdpGsoSendBatch(size_t capacity, size_t head_bytes)
    : head_bytes_(head_bytes),
      heads_(capacity * head_bytes),
      slots_(capacity),
      groups_(capacity),
      order_(capacity),
      iov_(2 * capacity),
      msgs_(capacity),
      singles_(capacity),
      control_(capacity),
      tag_group_(std::bit_ceil(std::max<size_t>(capacity * 4, 64))) {}

bool UdpGsoSendBatch::add(const uint8_t* head, size_t head_len, const uint8_t* body, size_t body_len,
                          const sockaddr_in6& to, uint64_t flow_tag, std::span<const uint8_t> plain) {
  if (full()) return false;
  Slot& s = slots_[count_++];
  s.parts[0] = {const_cast<uint8_t*>(head), head_len};
  s.parts[1] = {const_cast<uint8_t*>(body), body_len};
  s.plain = plain;
  s.to = to;
  s.length = static_cast<uint32_t>(head_len + body_len);
  s.tag = flow_tag;
  return true;
}

namespace {

bool same_destination(const sockaddr_in6& a, const sockaddr_in6& b) {
  return a.sin6_port == b.sin6_port && std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof a.sin6_addr) == 0 &&
         a.sin6_scope_id == b.sin6_scope_id;
}

// Fibonacci hashing of a flow tag (a pointer, say) into a power-of-two table.
size_t tag_slot(uint64_t tag, size_t table_size) {
  return static_cast<size_t>((tag * 0x9E3779B97F4A7C15ull) >> 40) & (table_size - 1);
}

}  // namespace

// Puts each queued datagram in a group (one future message) and lays the datagrams out in
// send order: a group's datagrams are consecutive, groups in the order they were opened.
// Returns the number of groups.
size_t UdpGsoSendBatch::group_datagrams() {
  size_t groups = 0;
  if (!gso_) {
    for (size_t i = 0; i < count_; i++) {
      slots_[i].group = static_cast<uint32_t>(i);
      groups_[i] = {&slots_[i].to, slots_[i].length, 1, 0, false};
    }
    groups = count_;
  } else {
    std::fill(tag_group_.begin(), tag_group_.end(), 0u);
    for (size_t i = 0; i < count_; i++) {
      Slot& s = slots_[i];
      uint32_t& latest = tag_group_[tag_slot(s.tag, tag_group_.size())];  // group + 1, 0 = none
      // The open group for this destination and length among the latest kGroupsSearched,
      // most recent first (bounded: lengths are the senders' to choose); a flow's datagram may
      // not join a group opened before one its flow already used (it would be sent first).
      size_t g = groups;
      if (s.length <= max_segment_)
        for (size_t k = groups; k-- > 0 && groups - k <= kGroupsSearched;) {
          const Group& c = groups_[k];
          if (c.open && c.length == s.length && same_destination(*c.to, s.to)) {
            g = k;
            break;
          }
        }
      if (g < groups && (g + 1 < latest || groups_[g].count >= kMaxSegments ||
                         (groups_[g].count + 1) * size_t{s.length} > kMaxMessageBytes)) {
        groups_[g].open = false;
        g = groups;
      }
      if (g == groups) groups_[groups++] = {&s.to, s.length, 0, 0, true};
      groups_[g].count++;
      s.group = static_cast<uint32_t>(g);
      latest = std::max(latest, static_cast<uint32_t>(g + 1));
    }
  }
  uint32_t start = 0;
  for (size_t g = 0; g < groups; g++) {
    groups_[g].start = start;
    start += groups_[g].count;
    groups_[g].count = 0;  // counted again as the datagrams are placed
  }
  for (size_t i = 0; i < count_; i++) {
    Group& g = groups_[slots_[i].group];
    const size_t pos = g.start + g.count++;
    order_[pos] = static_cast<uint32_t>(i);
    iov_[2 * pos] = slots_[i].parts[0];
    iov_[2 * pos + 1] = slots_[i].parts[1];
  }
  for (size_t g = 0; g < groups; g++)
    if (groups_[g].count == 1) unpad(groups_[g].start);
  return groups;
}

void UdpGsoSendBatch::unpad(size_t pos) {
  const Slot& s = slots_[order_[pos]];
  if (s.plain.empty()) return;
  iov_[2 * pos] = {const_cast<uint8_t*>(s.plain.data()), s.plain.size()};
  iov_[2 * pos + 1] = {nullptr, 0};
}

size_t UdpGsoSendBatch::send_one_by_one(int fd, size_t first, size_t n) {
  size_t refused = 0, done = 0;
  while (done < n) {
    const size_t batch = std::min(n - done, singles_.size());
    for (size_t k = 0; k < batch; k++) {
      const size_t pos = first + done + k;
      unpad(pos);
      msghdr& h = singles_[k].msg_hdr;
      h = {};
      h.msg_name = &slots_[order_[pos]].to;
      h.msg_namelen = sizeof(sockaddr_in6);
      h.msg_iov = &iov_[2 * pos];
      h.msg_iovlen = 2;
    }
    size_t sent = 0;
    while (sent < batch) {
      const int r = sendmmsg(fd, singles_.data() + sent, static_cast<unsigned>(batch - sent), MSG_DONTWAIT);
      if (r <= 0) {
        refused++;  // skip the one the kernel refused
        sent++;
      } else {
        sent += static_cast<size_t>(r);
      }
    }
    done += batch;
  }
  return refused;
}

UdpGsoSendBatch::FlushResult UdpGsoSendBatch::flush(int fd) {
  FlushResult result;
  if (count_ == 0) return result;
  const size_t groups = group_datagrams();
  for (size_t g = 0; g < groups; g++) {
    const Group& group = groups_[g];
    msghdr& h = msgs_[g].msg_hdr;
    h = {};
    h.msg_name = const_cast<sockaddr_in6*>(group.to);
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_iov = &iov_[2 * group.start];
    h.msg_iovlen = 2 * group.count;
    if (group.count > 1) {
      h.msg_control = control_[g].bytes;
      h.msg_controllen = sizeof control_[g].bytes;
      put_control_message(h, SOL_UDP, UDP_SEGMENT, static_cast<uint16_t>(group.length));
    }
  }
  size_t sent = 0;
  while (sent < groups) {
    const int r = sendmmsg(fd, msgs_.data() + sent, static_cast<unsigned>(groups - sent), MSG_DONTWAIT);
    if (r > 0) {
      for (size_t g = sent; g < sent + static_cast<size_t>(r); g++) {
        const Group& group = groups_[g];
        if (group.count < 2) continue;
        result.gso_messages++;
        result.gso_datagrams += group.count;
        for (size_t pos = group.start; pos < group.start + group.count; pos++) {
          const Slot& slot = slots_[order_[pos]];
          if (!slot.plain.empty()) result.padding_bytes += slot.length - slot.plain.size();
        }
      }
      sent += static_cast<size_t>(r);
      continue;
    }
    // groups_[sent]'s message was refused.
    const int err = errno;
    const Group& group = groups_[sent];
    sent++;
    if (group.count > 1 && (err == EIO || err == EINVAL || err == EMSGSIZE)) {
      // Maybe GSO's fault (no checksum offload, UDP checksums off, a segment over the MTU),
      // maybe not (a destination the kernel refuses anyway): the datagrams go one by one,
      // and only if that works was it GSO.
      const size_t refused = send_one_by_one(fd, group.start, group.count);
      result.refused += refused;
      if (refused == group.count) continue;
      result.gso_fallbacks++;
      if (err == EMSGSIZE) continue;  // this length only: the route's MTU
      // GSO unusable here: off for good, and every later datagram goes one by one.
      gso_ = false;
      result.gso_off_errno = err;
      const size_t next = group.start + group.count;
      result.refused += send_one_by_one(fd, next, count_ - next);
      break;
    }
    result.refused += group.count;
  }
  count_ = 0;
  return result;
}

}  // namespace rtce
