// udp_batch.h — fixed-capacity batches for recvmmsg and sendmmsg, shared by the relay's
// UDP workers and the transceiver's media workers. Every buffer (payload slots, iovecs,
// mmsghdrs, addresses, control messages) is allocated in the constructor; receiving,
// queueing and flushing allocate nothing and make one system call per batch.
//
// UDP GSO and GRO: UdpGsoSendBatch sends the equal-size datagrams of a batch that go to one
// destination as one message with a UDP_SEGMENT control message; a socket with UDP_GRO on
// receives such runs whole (loopback, veth) or coalesced by the NIC's GRO, and
// UdpReceiveBatch splits them again, so consumers only ever see datagrams.
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

// Room for an IP_PKTINFO or IPV6_PKTINFO control message and a UDP_GRO one, the only ones
// we ask for.
inline constexpr size_t kUdpControlBytes = 64;

// The most one receive can hold with UDP_GRO on: a coalesced run is one IP datagram, at most
// 65535 bytes with its headers.
inline constexpr size_t kUdpMaxCoalescedBytes = 65536;
// Segments per coalesced receive that a batch will split: UDP_MAX_SEGMENTS of recent kernels
// (128; 64 before), the most a GSO sender can put in one message (GRO stops at 64). More
// is not what a kernel delivers: the excess is one datagram flagged truncated().
inline constexpr size_t kUdpMaxSegmentsPerReceive = 128;

// One receive cut into its datagrams, as UdpReceiveBatch::receive() cuts each of its slots
// (a function of its own so that every malformed case can be tested). `received`: the length
// the kernel reported (MSG_TRUNC: past `held`, the bytes the slot holds, when it cut them);
// `truncated`: the kernel's MSG_TRUNC flag; `segment`: the UDP_GRO segment size, 0 for none
// (one datagram), negative for a malformed control message. Writes at most out.size()
// pieces (at least 1) and returns how many: the whole datagrams in order, then, if anything
// is left (a malformed message, a run cut by the slot, more segments than out holds), one
// piece flagged bad that covers the rest.
struct UdpDatagramPiece {
  uint32_t offset;  // from the start of the slot
  uint32_t length;
  bool bad;
};
size_t cut_receive(size_t received, size_t held, bool truncated, int segment,
                   std::span<UdpDatagramPiece> out);
// The segment size of a receive's UDP_GRO control message: 0 without one, -1 when it is
// malformed (too short, or a size outside 1..65535).
int udp_gro_segment_size(msghdr& h);

class UdpReceiveBatch {
 public:
  // `capacity` datagrams of up to `max_datagram` bytes, each with `headroom` writable bytes
  // in front of it (the relay prepends its framing there without moving the payload).
  UdpReceiveBatch(size_t capacity, size_t max_datagram, size_t headroom = 0);
  // For a socket with UDP_GRO on (enable_udp_gro()): `slots` receives of up to
  // kUdpMaxCoalescedBytes each, every one of which may be a coalesced run that receive()
  // splits into its datagrams (of up to `max_datagram` bytes: longer ones are flagged
  // truncated(), as a plain receive would cut them). A receive too small for a run would cut
  // it and lose the rest, hence the large slots; few of them, because each costs 64 KiB.
  static UdpReceiveBatch coalescing(size_t slots, size_t max_datagram);
  // Moving keeps every buffer where it is (the headers point into them); copying would not.
  UdpReceiveBatch(UdpReceiveBatch&&) = default;
  UdpReceiveBatch& operator=(UdpReceiveBatch&&) = default;

  // Receives (recvmmsg slots) per call; with coalescing, each may hold many datagrams.
  size_t capacity() const { return msgs_.size(); }
  size_t max_datagram() const { return max_datagram_; }

  // One non-blocking recvmmsg into every slot, coalesced runs split. Returns how many
  // datagrams came: 0 when none was waiting, or on an error (the caller's event loop will be
  // woken again). Datagrams i in [0, n) are then in arrival order. With `wait`, the call
  // blocks for the first datagram (MSG_WAITFORONE; up to the socket's SO_RCVTIMEO).
  size_t receive(int fd, bool wait = false);
  // Whether the last receive() filled every slot: the socket may hold more.
  bool filled() const { return filled_; }

  uint8_t* data(size_t i) { return storage_.data() + views_[i].offset; }
  // The datagram's length as sent, which exceeds max_datagram() when it was truncated.
  size_t length(size_t i) const { return views_[i].length; }
  // Cut to max_datagram() bytes, or the unsplittable part of a coalesced receive (a UDP_GRO
  // message that is malformed, a run cut by its slot, segments past
  // kUdpMaxSegmentsPerReceive): count it as a drop, its bytes are not the datagram.
  bool truncated(size_t i) const { return views_[i].bad || views_[i].length > max_datagram_; }
  // Coalesced receives this batch could not split whole since it was made (each also
  // yields one truncated() datagram): a malformed UDP_GRO message or a run cut short.
  uint64_t split_errors() const { return split_errors_; }
  // Every datagram of a coalesced run has the run's source and destination.
  const sockaddr_storage& source(size_t i) const { return addrs_[views_[i].slot]; }
  socklen_t source_length(size_t i) const { return msgs_[views_[i].slot].msg_hdr.msg_namelen; }
  SocketAddress source_address(size_t i) const {
    return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&source(i)), source_length(i));
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
  // One datagram: where it is in storage_, and the receive (slot) it came in.
  struct View {
    uint32_t offset;
    uint32_t length;
    uint32_t slot;
    bool bad;
  };
  static_assert(sizeof(View) == 16);
  UdpReceiveBatch(size_t slots, size_t slot_bytes, size_t max_datagram, size_t headroom,
                  size_t views_per_slot);
  // Writes the views of slot `s` (its datagram, or each datagram of its coalesced run) from
  // views_[first] on; returns how many (at most views_per_slot_).
  size_t split(size_t s, size_t first);
  size_t max_datagram_;
  size_t slot_bytes_;
  size_t headroom_;
  size_t stride_;
  size_t views_per_slot_;
  bool filled_ = false;
  uint64_t split_errors_ = 0;
  std::vector<uint8_t> storage_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<Control> control_;
  std::vector<View> views_;
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

// A UdpSendBatch for the datagrams of many flows to few destinations, through one dual-stack
// AF_INET6 socket (IPv4 destinations v4-mapped): flush() sends the datagrams queued for one
// destination with one length as one message with a UDP_SEGMENT control message (UDP GSO:
// one pass through the stack and one skb for up to kMaxSegments datagrams, cut apart by the
// device or, on loopback and veth, handed whole to a receiver with UDP_GRO). Callers make
// lengths equal where they can (the relay pads its framing to size classes). The rest,
// and everything once GSO is off, go one datagram per message, all in one sendmmsg.
//
// Order: datagrams of one flow tag (the caller's flow identity) leave in the order they were
// queued, even when their lengths differ; others may pass each other within a flush.
class UdpGsoSendBatch {
 public:
  // UDP_MAX_SEGMENTS of every kernel with UDP_SEGMENT (raised to 128 only in 6.x).
  static constexpr size_t kMaxSegments = 64;
  // Payload bytes of one GSO message: what fits one IPv4 datagram (65535 - 20 - 8).
  static constexpr size_t kMaxMessageBytes = 65507;

  // Up to `capacity` queued datagrams; each slot owns `head_bytes` of buffer (next_head())
  // for a header that goes in front of a payload kept elsewhere.
  UdpGsoSendBatch(size_t capacity, size_t head_bytes);
  UdpGsoSendBatch(UdpGsoSendBatch&&) = default;
  UdpGsoSendBatch& operator=(UdpGsoSendBatch&&) = default;

  size_t capacity() const { return slots_.size(); }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == slots_.size(); }
  // Whether flush() still groups datagrams into GSO messages: off from the start when asked,
  // or for good once the kernel refused a GSO message as unsupported (EIO, EINVAL).
  bool gso() const { return gso_; }
  void set_gso(bool on) { gso_ = on; }
  // Datagrams longer than this are never grouped (the route's MTU would refuse the segment).
  void set_max_segment(size_t bytes) { max_segment_ = bytes; }

  // The head buffer of the slot the next add() fills. Empty when the batch is full.
  std::span<uint8_t> next_head() {
    if (full()) return {};
    return {heads_.data() + count_ * head_bytes_, head_bytes_};
  }
  // Queues the datagram head[0, head_len) + body[0, body_len) for `to`; both must stay put
  // until flush() (head may be null with head_len 0). `plain`, if given, is the same datagram
  // as it was before the caller padded it for GSO: what is sent instead when the datagram
  // goes alone after all (padding only pays inside a GSO message). Returns false, queueing
  // nothing, when the batch is full: flush first.
  bool add(const uint8_t* head, size_t head_len, const uint8_t* body, size_t body_len, const sockaddr_in6& to,
           uint64_t flow_tag, std::span<const uint8_t> plain = {});

  struct FlushResult {
    size_t refused = 0;        // datagrams the kernel refused (socket buffer full, unreachable)
    size_t gso_messages = 0;   // GSO messages sent
    size_t gso_datagrams = 0;  // datagrams in them
    size_t gso_fallbacks = 0;  // GSO messages the kernel refused, whose datagrams went one by one
    size_t padding_bytes = 0;  // what padded datagrams sent in GSO messages added (length - plain)
    int gso_off_errno = 0;     // the error that turned GSO off in this flush, or 0
  };
  // Sends everything queued and empties the batch. A refused message is skipped so the rest
  // still go. A GSO message refused for GSO's sake is sent again one datagram per message:
  // with EIO or EINVAL (no checksum offload on the route's device, UDP checksums off, ...)
  // GSO is then turned off for good (gso() false); with EMSGSIZE (a segment longer than the
  // route's MTU) only that message goes plain.
  FlushResult flush(int fd);

 private:
  struct Slot {
    iovec parts[2];
    std::span<const uint8_t> plain;  // unpadded, or empty
    sockaddr_in6 to;
    uint32_t length;
    uint32_t group;
    uint64_t tag;
  };
  // Points the iovecs of send position `pos` at its datagram unpadded, where it has a plain
  // form: it leaves alone.
  void unpad(size_t pos);
  struct Group {
    const sockaddr_in6* to;
    uint32_t length;  // of every datagram in it
    uint32_t count;
    uint32_t start;  // its first datagram's position in send order
    bool open;       // may take more datagrams
  };
  struct alignas(cmsghdr) Control {
    uint8_t bytes[CMSG_SPACE(sizeof(uint16_t))];
  };
  size_t group_datagrams();
  // Sends the datagrams at send positions [first, first + n) one per message; returns how many
  // the kernel refused.
  size_t send_one_by_one(int fd, size_t first, size_t n);

  // Open groups a datagram looks through for its own (most recent first).
  static constexpr size_t kGroupsSearched = 32;
  size_t head_bytes_;
  size_t count_ = 0;
  bool gso_ = true;
  size_t max_segment_ = 1452;
  std::vector<uint8_t> heads_;
  std::vector<Slot> slots_;
  std::vector<Group> groups_;
  std::vector<uint32_t> order_;   // slot index at each send position
  std::vector<iovec> iov_;        // two per send position
  std::vector<mmsghdr> msgs_;     // one per group
  std::vector<mmsghdr> singles_;  // one per datagram, for those that go one by one
  std::vector<Control> control_;  // one per group
  // Per flush: the latest group (+1) each flow tag's hash went into, so that a later datagram
  // of the flow never joins an earlier group. A collision only splits a group needlessly.
  std::vector<uint32_t> tag_group_;
};

// Drains a non-blocking UDP socket into `rx` as every worker does: up to `max_rounds`
// recvmmsg batches (bounded, so timers and the other sockets run under load too), stopping
// at the first batch that did not fill every slot (the socket is empty). Calls on_datagram(i, now) for
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
    if (!rx.filled()) break;
  }
  return total;
}

}  // namespace rtce
