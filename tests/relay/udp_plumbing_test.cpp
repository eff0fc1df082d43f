// udp_plumbing_test.cpp — the UDP plumbing in common/ that both data paths share: batched
// receive and send over loopback sockets (truncation, headroom, destination and source
// addresses through IP_PKTINFO, a refused datagram in the middle of a batch), UDP GSO sends
// and UDP_GRO receives split back into datagrams (every malformed case of the split),
// socket buffer sizing, CPU pinning within the allowed mask, UniqueFd, the byte-order
// helpers and the RFC 7983 first-byte classification.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "byte_order.h"
#include "cpu_affinity.h"
#include "net_address.h"
#include "rtce_proxy_v2.h"
#include "rtce_stun.h"
#include "rtce_types.h"
#include "udp_batch.h"
#include "udp_socket_options.h"
#include "unique_fd.h"

namespace rtce {
namespace {

using namespace std::chrono_literals;

UniqueFd udp_socket_v4(const char* ip = "127.0.0.1", uint16_t port = 0) {
  UniqueFd fd(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw std::runtime_error("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error(std::string("bind ") + ip + ": " + std::strerror(errno));
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_storage s{};
  socklen_t len = sizeof s;
  getsockname(fd, reinterpret_cast<sockaddr*>(&s), &len);
  return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&s), len).port();
}

SocketAddress addr(const std::string& text) { return SocketAddress::parse_or_throw(text, "test"); }

void send_to(int fd, const std::vector<uint8_t>& bytes, const SocketAddress& to) {
  ASSERT_EQ(sendto(fd, bytes.data(), bytes.size(), 0, to.sa(), to.len()), static_cast<ssize_t>(bytes.size()));
}

struct Received {
  std::vector<uint8_t> bytes;  // what landed in the slot (at most max_datagram)
  size_t length;
  bool truncated;
  SocketAddress source;
  std::optional<SocketAddress> destination;
};

// Receives until `want` datagrams came or 5 s passed; each batch is copied out before the
// next receive reuses the slots.
std::vector<Received> receive_all(UdpReceiveBatch& batch, int fd, size_t want, uint16_t port = 0) {
  std::vector<Received> out;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const size_t n = batch.receive(fd);
    for (size_t i = 0; i < n; i++) {
      const size_t kept = std::min(batch.length(i), batch.max_datagram());
      out.push_back({std::vector<uint8_t>(batch.data(i), batch.data(i) + kept), batch.length(i),
                     batch.truncated(i), batch.source_address(i), batch.destination(i, port)});
    }
  }
  return out;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(seed + i);
  return v;
}

TEST(UdpReceiveBatch, ReceivesABatchAndFlagsTheTruncatedDatagram) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4();
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  const auto small = pattern(10, 1), exact = pattern(100, 2), big = pattern(150, 3);
  send_to(tx.get(), small, to);
  send_to(tx.get(), exact, to);
  send_to(tx.get(), big, to);

  UdpReceiveBatch batch(8, 100, 16);
  auto got = receive_all(batch, rx.get(), 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].bytes, small);
  EXPECT_FALSE(got[0].truncated);
  EXPECT_EQ(got[1].bytes, exact);
  EXPECT_EQ(got[1].length, 100u);
  EXPECT_FALSE(got[1].truncated) << "exactly max_datagram bytes fit";
  EXPECT_TRUE(got[2].truncated);
  EXPECT_EQ(got[2].length, 150u) << "the real length, not the slot size";
  EXPECT_EQ(got[2].bytes, std::vector<uint8_t>(big.begin(), big.begin() + 100));
  const SocketAddress from = addr("127.0.0.1:" + std::to_string(bound_port(tx.get())));
  for (const auto& r : got) EXPECT_EQ(r.source, from);
  EXPECT_FALSE(got[0].destination) << "the socket did not ask for IP_PKTINFO";
}

TEST(UdpReceiveBatch, HeadroomInFrontOfEverySlotIsWritableAndSeparate) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4();
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  send_to(tx.get(), pattern(64, 7), to);
  send_to(tx.get(), pattern(64, 9), to);
  UdpReceiveBatch batch(4, 64, 32);
  pollfd p{rx.get(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  // Both may not be queued yet; take them one receive at a time if need be.
  size_t n = batch.receive(rx.get());
  ASSERT_GE(n, 1u);
  // Writing the headroom of slot 1 must not touch slot 0's datagram (the relay prepends
  // its framing there).
  std::memset(batch.data(1) - 32, 0xee, 32);
  EXPECT_EQ(std::vector<uint8_t>(batch.data(0), batch.data(0) + 64), pattern(64, 7));
  EXPECT_EQ(batch.data(1) - batch.data(0), 96);
}

TEST(UdpReceiveBatch, WildcardSocketLearnsEachDatagramsDestination) {
  UniqueFd rx = udp_socket_v4("0.0.0.0"), tx = udp_socket_v4();
  request_destination_address(rx.get(), /*ipv4=*/true, "test socket");
  const uint16_t port = bound_port(rx.get());
  send_to(tx.get(), pattern(8, 1), addr("127.0.0.3:" + std::to_string(port)));
  send_to(tx.get(), pattern(8, 2), addr("127.0.0.1:" + std::to_string(port)));
  UdpReceiveBatch batch(8, 64);
  auto got = receive_all(batch, rx.get(), 2, port);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].destination);
  EXPECT_EQ(*got[0].destination, addr("127.0.0.3:" + std::to_string(port)));
  ASSERT_TRUE(got[1].destination);
  EXPECT_EQ(*got[1].destination, addr("127.0.0.1:" + std::to_string(port)));
}

TEST(UdpReceiveBatch, Ipv6DestinationAddress) {
  UniqueFd rx(socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0));
  ASSERT_TRUE(rx);
  set_socket_option(rx.get(), IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY");
  const SocketAddress any = addr("[::]:0");
  ASSERT_EQ(bind(rx.get(), any.sa(), any.len()), 0);
  request_destination_address(rx.get(), /*ipv4=*/false, "test socket");
  UniqueFd tx(socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0));
  const uint16_t port = bound_port(rx.get());
  const SocketAddress to = addr("[::1]:" + std::to_string(port));
  if (sendto(tx.get(), "x", 1, 0, to.sa(), to.len()) != 1) GTEST_SKIP() << "no IPv6 loopback here";
  UdpReceiveBatch batch(2, 64);
  auto got = receive_all(batch, rx.get(), 1, port);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].destination);
  EXPECT_EQ(*got[0].destination, to);
}

TEST(UdpSendBatch, SendsInOrderAndRefusesPastCapacity) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4();
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  UdpSendBatch batch(3, 32);
  std::vector<std::vector<uint8_t>> sent;
  for (uint8_t i = 0; i < 3; i++) {
    auto buf = batch.next_buffer();
    ASSERT_EQ(buf.size(), 32u);
    const auto bytes = pattern(5 + i, static_cast<uint8_t>(10 * i));
    std::memcpy(buf.data(), bytes.data(), bytes.size());
    ASSERT_TRUE(batch.add(buf.data(), bytes.size(), to));
    sent.push_back(bytes);
  }
  EXPECT_TRUE(batch.full());
  EXPECT_TRUE(batch.next_buffer().empty());
  EXPECT_FALSE(batch.add(sent[0].data(), sent[0].size(), to)) << "a full batch queues nothing";
  EXPECT_EQ(batch.flush(tx.get()), 0u);
  EXPECT_TRUE(batch.empty());

  UdpReceiveBatch rxb(8, 64);
  auto got = receive_all(rxb, rx.get(), 3);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < 3; i++) EXPECT_EQ(got[i].bytes, sent[i]);
}

TEST(UdpSendBatch, ARefusedDatagramIsSkippedAndCountedTheRestStillGo) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4();
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  // An IPv6 destination on an IPv4 socket: the kernel refuses that one (EAFNOSUPPORT).
  const SocketAddress wrong_family = addr("[::1]:9");
  const auto a = pattern(4, 1), b = pattern(4, 2), c = pattern(4, 3);
  UdpSendBatch batch(4);
  ASSERT_TRUE(batch.add(a.data(), a.size(), to));
  ASSERT_TRUE(batch.add(b.data(), b.size(), wrong_family));
  ASSERT_TRUE(batch.add(c.data(), c.size(), to));
  EXPECT_EQ(batch.flush(tx.get()), 1u);
  UdpReceiveBatch rxb(8, 64);
  auto got = receive_all(rxb, rx.get(), 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].bytes, a);
  EXPECT_EQ(got[1].bytes, c);
}

TEST(UdpSendBatch, SourceAddressLeavesAWildcardSocketFromThatAddress) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4("0.0.0.0");
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  const SocketAddress vip = addr("127.0.0.2:" + std::to_string(bound_port(tx.get())));
  const auto a = pattern(6, 1), b = pattern(6, 2);
  UdpSendBatch batch(2);
  ASSERT_TRUE(batch.add(a.data(), a.size(), to, &vip));
  ASSERT_TRUE(batch.add(b.data(), b.size(), to));  // no source: the kernel picks
  EXPECT_EQ(batch.flush(tx.get()), 0u);
  UdpReceiveBatch rxb(4, 64);
  auto got = receive_all(rxb, rx.get(), 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].source, vip);
  EXPECT_EQ(got[1].source, addr("127.0.0.1:" + std::to_string(bound_port(tx.get()))));
}

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

// A dual-stack IPv6 socket, as the relay's return socket is (IPv4 peers v4-mapped).
UniqueFd udp_socket_dual() {
  UniqueFd fd(socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw std::runtime_error("socket");
  set_socket_option(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY");
  const SocketAddress any = addr("[::]:0");
  if (bind(fd.get(), any.sa(), any.len()) != 0) throw std::runtime_error("bind [::]:0");
  return fd;
}

sockaddr_in6 mapped_loopback(int fd) {
  return addr("127.0.0.1:" + std::to_string(bound_port(fd))).to_v6_mapped();
}

// Sends `datagrams` (all `segment` bytes but the last, which may be shorter) as one message
// with UDP_SEGMENT, as a GSO sender does.
void send_segmented(int fd, const std::vector<std::vector<uint8_t>>& datagrams, uint16_t segment,
                    const SocketAddress& to) {
  std::vector<iovec> iov;
  size_t total = 0;
  for (const auto& d : datagrams) {
    iov.push_back({const_cast<uint8_t*>(d.data()), d.size()});
    total += d.size();
  }
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(uint16_t))] = {};
  msghdr h{};
  h.msg_name = const_cast<sockaddr*>(to.sa());
  h.msg_namelen = to.len();
  h.msg_iov = iov.data();
  h.msg_iovlen = iov.size();
  h.msg_control = control;
  h.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof segment);
  std::memcpy(CMSG_DATA(c), &segment, sizeof segment);
  ASSERT_EQ(sendmsg(fd, &h, 0), static_cast<ssize_t>(total)) << std::strerror(errno);
}

std::vector<std::vector<uint8_t>> run_of(size_t count, size_t segment, size_t last) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < count; i++)
    out.push_back(pattern(i + 1 < count ? segment : last, static_cast<uint8_t>(i * 7)));
  return out;
}

TEST(UdpGro, ARunSentWithUdpSegmentComesAsOneReceiveAndIsSplitIntoItsDatagrams) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4();
  if (!enable_udp_gro(rx.get())) GTEST_SKIP() << "no UDP_GRO on this kernel";
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  const auto run = run_of(11, 100, 37);  // 10 x 100 bytes, then 37
  send_segmented(tx.get(), run, 100, to);

  UdpReceiveBatch batch = UdpReceiveBatch::coalescing(4, 2048);
  pollfd p{rx.get(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  // One receive slot: 11 datagrams from a batch of 4 slots is only possible coalesced.
  ASSERT_EQ(batch.receive(rx.get()), run.size()) << "the loopback delivers the GSO run whole";
  EXPECT_FALSE(batch.filled());
  const SocketAddress from = addr("127.0.0.1:" + std::to_string(bound_port(tx.get())));
  for (size_t i = 0; i < run.size(); i++) {
    EXPECT_FALSE(batch.truncated(i)) << i;
    ASSERT_EQ(batch.length(i), run[i].size()) << i;
    EXPECT_EQ(std::vector<uint8_t>(batch.data(i), batch.data(i) + batch.length(i)), run[i]) << i;
    EXPECT_EQ(batch.source_address(i), from) << "each datagram of the run has the run's source";
  }
  EXPECT_EQ(batch.split_errors(), 0u);
}

TEST(UdpGro, RunsAndPlainDatagramsInOneBatchKeepTheirOrder) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4();
  if (!enable_udp_gro(rx.get())) GTEST_SKIP() << "no UDP_GRO on this kernel";
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  const auto first = run_of(3, 64, 64), second = run_of(5, 200, 10);
  const auto lone = pattern(50, 99);
  send_segmented(tx.get(), first, 64, to);
  send_to(tx.get(), lone, to);
  send_segmented(tx.get(), second, 200, to);
  std::vector<std::vector<uint8_t>> want = first;
  want.push_back(lone);
  want.insert(want.end(), second.begin(), second.end());

  UdpReceiveBatch batch = UdpReceiveBatch::coalescing(2, 2048);
  auto got = receive_all(batch, rx.get(), want.size());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) {
    EXPECT_EQ(got[i].bytes, want[i]) << i;
    EXPECT_FALSE(got[i].truncated) << i;
  }
}

TEST(UdpGro, SegmentsLongerThanMaxDatagramAreFlaggedOneByOne) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4();
  if (!enable_udp_gro(rx.get())) GTEST_SKIP() << "no UDP_GRO on this kernel";
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  send_segmented(tx.get(), run_of(4, 300, 300), 300, to);
  UdpReceiveBatch batch = UdpReceiveBatch::coalescing(2, 256);
  auto got = receive_all(batch, rx.get(), 4);
  ASSERT_EQ(got.size(), 4u) << "each segment is a datagram, too long for the consumer";
  for (const auto& r : got) {
    EXPECT_TRUE(r.truncated);
    EXPECT_EQ(r.length, 300u);
  }
}

TEST(UdpGro, WithoutGroTheKernelSplitsTheRunAndAPlainBatchSeesEveryDatagram) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_v4();
  const SocketAddress to = addr("127.0.0.1:" + std::to_string(bound_port(rx.get())));
  const auto run = run_of(6, 120, 120);
  send_segmented(tx.get(), run, 120, to);
  UdpReceiveBatch batch(4, 2048);
  auto got = receive_all(batch, rx.get(), run.size());
  ASSERT_EQ(got.size(), run.size());
  for (size_t i = 0; i < run.size(); i++) EXPECT_EQ(got[i].bytes, run[i]) << i;
}

TEST(UdpGro, CutReceiveTakesOnlyWholeDatagramsAndFlagsTheRest) {
  UdpDatagramPiece out[8];
  auto cut = [&](size_t received, size_t held, bool truncated, int segment, size_t room = 8) {
    const size_t n = cut_receive(received, held, truncated, segment, std::span(out, room));
    return std::vector<UdpDatagramPiece>(out, out + n);
  };
  auto piece_is = [](const UdpDatagramPiece& p, uint32_t offset, uint32_t length, bool bad) {
    return p.offset == offset && p.length == length && p.bad == bad;
  };
  // A plain datagram, whole or cut by its slot.
  auto v = cut(100, 2048, false, 0);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(piece_is(v[0], 0, 100, false));
  v = cut(3000, 2048, true, 0);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(piece_is(v[0], 0, 3000, true));
  // A run: whole segments, the last shorter; an exact multiple; one segment's worth.
  v = cut(437, 65536, false, 100);
  ASSERT_EQ(v.size(), 5u);
  for (uint32_t k = 0; k < 4; k++) EXPECT_TRUE(piece_is(v[k], 100 * k, 100, false)) << k;
  EXPECT_TRUE(piece_is(v[4], 400, 37, false));
  EXPECT_EQ(cut(400, 65536, false, 100).size(), 4u);
  v = cut(80, 65536, false, 100);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(piece_is(v[0], 0, 80, false));
  // A malformed UDP_GRO message: all of it one bad piece.
  v = cut(437, 65536, false, -1);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(piece_is(v[0], 0, 437, true));
  // A run its slot cut: the whole segments in the slot, then the rest, flagged.
  v = cut(1000, 450, true, 100);
  ASSERT_EQ(v.size(), 5u);
  EXPECT_TRUE(piece_is(v[3], 300, 100, false));
  EXPECT_TRUE(piece_is(v[4], 400, 600, true));
  // More segments than pieces: the last piece is the rest, flagged.
  v = cut(1000, 65536, false, 100, 4);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_TRUE(piece_is(v[2], 200, 100, false));
  EXPECT_TRUE(piece_is(v[3], 300, 700, true));
  // A batch without room to split (a plain batch on a socket with UDP_GRO): one bad piece.
  v = cut(1000, 65536, false, 100, 1);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(piece_is(v[0], 0, 1000, true));
}

TEST(UdpGro, SegmentSizeFromTheControlMessagesRejectsMalformedOnes) {
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(in_pktinfo))] = {};
  msghdr h{};
  auto with = [&](int level, int type, size_t data_len, int value) {
    std::memset(control, 0, sizeof control);
    h.msg_control = control;
    h.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(data_len);
    std::memcpy(CMSG_DATA(c), &value, std::min(data_len, sizeof value));
    h.msg_controllen = CMSG_SPACE(data_len);
    return udp_gro_segment_size(h);
  };
  h.msg_controllen = 0;
  EXPECT_EQ(udp_gro_segment_size(h), 0) << "no control message: a plain datagram";
  EXPECT_EQ(with(SOL_UDP, UDP_GRO, sizeof(int), 1200), 1200);
  EXPECT_EQ(with(IPPROTO_IP, IP_PKTINFO, sizeof(in_pktinfo), 0), 0) << "only IP_PKTINFO";
  EXPECT_EQ(with(SOL_UDP, UDP_GRO, 2, 1200), -1) << "too short for an int";
  EXPECT_EQ(with(SOL_UDP, UDP_GRO, sizeof(int), 0), -1);
  EXPECT_EQ(with(SOL_UDP, UDP_GRO, sizeof(int), -5), -1);
  EXPECT_EQ(with(SOL_UDP, UDP_GRO, sizeof(int), 70000), -1);
}

// What a GSO sender's receiver gets, in order, copied out (coalescing, on a GRO socket).
std::vector<std::vector<uint8_t>> receive_bytes(int fd, size_t want) {
  UdpReceiveBatch batch = UdpReceiveBatch::coalescing(4, 2048);
  std::vector<std::vector<uint8_t>> out;
  for (auto& r : receive_all(batch, fd, want)) out.push_back(std::move(r.bytes));
  return out;
}

std::vector<uint8_t> concat(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::vector<uint8_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST(UdpGsoSendBatch, EqualLengthsForOneDestinationLeaveAsOneMessage) {
  UniqueFd a = udp_socket_v4(), b = udp_socket_v4(), tx = udp_socket_dual();
  enable_udp_gro(a.get());
  enable_udp_gro(b.get());
  const sockaddr_in6 to_a = mapped_loopback(a.get()), to_b = mapped_loopback(b.get());
  UdpGsoSendBatch batch(16, 32);
  std::vector<std::vector<uint8_t>> bodies, heads;
  for (int i = 0; i < 10; i++) {
    bodies.push_back(pattern(i < 8 ? 90 : 50, static_cast<uint8_t>(i)));
    heads.push_back(pattern(10, static_cast<uint8_t>(100 + i)));
  }
  std::vector<std::vector<uint8_t>> want_a, want_b;
  for (int i = 0; i < 10; i++) {
    // Odd ones of 0..7 to b, the rest to a: 100 bytes each (with the head), 8 and 9 60 bytes.
    const bool to_first = i >= 8 || i % 2 == 0;
    ASSERT_TRUE(batch.add(heads[i].data(), heads[i].size(), bodies[i].data(), bodies[i].size(),
                          to_first ? to_a : to_b, static_cast<uint64_t>(i)));
    (to_first ? want_a : want_b).push_back(concat(heads[i], bodies[i]));
  }
  const auto r = batch.flush(tx.get());
  EXPECT_EQ(r.refused, 0u);
  EXPECT_EQ(r.gso_messages, 3u) << "a's four 100s, b's four 100s, a's two 60s";
  EXPECT_EQ(r.gso_datagrams, 10u);
  EXPECT_EQ(r.gso_fallbacks, 0u);
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(receive_bytes(a.get(), want_a.size()), want_a);
  EXPECT_EQ(receive_bytes(b.get(), want_b.size()), want_b);
}

TEST(UdpGsoSendBatch, APaddedDatagramThatGoesAloneLeavesUnpadded) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_dual();
  enable_udp_gro(rx.get());
  const sockaddr_in6 to = mapped_loopback(rx.get());
  // Three datagrams padded to 64 bytes (head 24 + body 40), their plain forms 50, 52 and 30
  // bytes: the first two share a message, padded; the third is alone in its size (a 64 for
  // another destination is a different message), so it leaves as it was.
  const sockaddr_in6 elsewhere = mapped_loopback(tx.get());
  std::vector<std::vector<uint8_t>> plain = {pattern(50, 1), pattern(52, 2), pattern(30, 3)};
  const auto head = pattern(24, 9), body = pattern(40, 8);
  UdpGsoSendBatch batch(8, 0);
  ASSERT_TRUE(batch.add(head.data(), head.size(), body.data(), body.size(), to, 1, plain[0]));
  ASSERT_TRUE(batch.add(head.data(), head.size(), body.data(), body.size(), to, 2, plain[1]));
  ASSERT_TRUE(batch.add(head.data(), head.size(), body.data(), body.size(), elsewhere, 3, plain[2]));
  const auto r = batch.flush(tx.get());
  EXPECT_EQ(r.gso_messages, 1u);
  EXPECT_EQ(r.padding_bytes, (64u - 50u) + (64u - 52u)) << "only what GSO carried";
  const auto got = receive_bytes(rx.get(), 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], concat(head, body));
  EXPECT_EQ(got[1], concat(head, body));
  UdpReceiveBatch self(2, 2048);
  auto alone = receive_all(self, tx.get(), 1);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].bytes, plain[2]);
}

TEST(UdpGsoSendBatch, AFlowsDatagramsKeepTheirOrderAcrossLengths) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_dual();
  enable_udp_gro(rx.get());
  const sockaddr_in6 to = mapped_loopback(rx.get());
  // x (flow 2, 60 bytes), a1 (flow 1, 100), b1 (flow 1, 60), c (flow 3, 100). Grouping by
  // length alone would send b1 with x, before a1.
  const auto x = pattern(60, 1), a1 = pattern(100, 2), b1 = pattern(60, 3), c = pattern(100, 4);
  UdpGsoSendBatch batch(8, 0);
  ASSERT_TRUE(batch.add(nullptr, 0, x.data(), x.size(), to, 2));
  ASSERT_TRUE(batch.add(nullptr, 0, a1.data(), a1.size(), to, 1));
  ASSERT_TRUE(batch.add(nullptr, 0, b1.data(), b1.size(), to, 1));
  ASSERT_TRUE(batch.add(nullptr, 0, c.data(), c.size(), to, 3));
  const auto r = batch.flush(tx.get());
  EXPECT_EQ(r.gso_messages, 1u) << "a1 and c";
  const auto got = receive_bytes(rx.get(), 4);
  ASSERT_EQ(got.size(), 4u);
  const auto pos = [&](const std::vector<uint8_t>& d) {
    return std::find(got.begin(), got.end(), d) - got.begin();
  };
  EXPECT_LT(pos(a1), pos(b1)) << "flow 1's datagrams in the order queued";
  EXPECT_LT(pos(x), 4);
  EXPECT_LT(pos(c), 4);
}

TEST(UdpGsoSendBatch, LongDatagramsAndGsoOffGoOneByOne) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_dual();
  const sockaddr_in6 to = mapped_loopback(rx.get());
  UdpGsoSendBatch batch(8, 0);
  batch.set_max_segment(100);
  const auto big = pattern(200, 5);
  for (int i = 0; i < 3; i++) ASSERT_TRUE(batch.add(nullptr, 0, big.data(), big.size(), to, 1));
  auto r = batch.flush(tx.get());
  EXPECT_EQ(r.gso_messages, 0u) << "longer than max_segment: never grouped";
  EXPECT_EQ(receive_bytes(rx.get(), 3).size(), 3u);

  batch.set_gso(false);
  const auto small = pattern(40, 6);
  for (int i = 0; i < 5; i++) ASSERT_TRUE(batch.add(nullptr, 0, small.data(), small.size(), to, 1));
  r = batch.flush(tx.get());
  EXPECT_EQ(r.gso_messages, 0u);
  EXPECT_EQ(r.refused, 0u);
  EXPECT_EQ(receive_bytes(rx.get(), 5).size(), 5u);
}

TEST(UdpGsoSendBatch, AKernelThatRefusesGsoTurnsItOffAndNothingIsLost) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_dual();
  // UDP checksums off: the kernel refuses every GSO message (EINVAL) and sends plain ones.
  set_socket_option(tx.get(), SOL_SOCKET, SO_NO_CHECK, 1, "SO_NO_CHECK");
  const sockaddr_in6 to = mapped_loopback(rx.get());
  UdpGsoSendBatch batch(16, 0);
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < 12; i++) sent.push_back(pattern(i < 6 ? 80 : 40, static_cast<uint8_t>(i)));
  for (const auto& d : sent) ASSERT_TRUE(batch.add(nullptr, 0, d.data(), d.size(), to, 7));
  const auto r = batch.flush(tx.get());
  EXPECT_EQ(r.gso_fallbacks, 1u);
  EXPECT_EQ(r.gso_off_errno, EINVAL);
  EXPECT_EQ(r.gso_messages, 0u);
  EXPECT_EQ(r.refused, 0u);
  EXPECT_FALSE(batch.gso()) << "off for good";
  EXPECT_EQ(receive_bytes(rx.get(), sent.size()), sent) << "every datagram, in order";
}

TEST(UdpGsoSendBatch, ARefusedDestinationIsCountedAndLeavesGsoOn) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_dual();
  const sockaddr_in6 to = mapped_loopback(rx.get());
  const sockaddr_in6 port_zero = addr("127.0.0.1:0").to_v6_mapped();  // the kernel refuses it (EINVAL)
  const auto a = pattern(50, 1), z = pattern(70, 2);
  UdpGsoSendBatch batch(8, 0);
  ASSERT_TRUE(batch.add(nullptr, 0, a.data(), a.size(), to, 1));
  ASSERT_TRUE(batch.add(nullptr, 0, z.data(), z.size(), port_zero, 2));
  ASSERT_TRUE(batch.add(nullptr, 0, z.data(), z.size(), port_zero, 3));
  ASSERT_TRUE(batch.add(nullptr, 0, a.data(), a.size(), to, 1));
  const auto r = batch.flush(tx.get());
  EXPECT_EQ(r.refused, 2u);
  EXPECT_EQ(r.gso_fallbacks, 0u) << "one by one failed too: not GSO's fault";
  EXPECT_TRUE(batch.gso());
  EXPECT_EQ(r.gso_messages, 1u);
  EXPECT_EQ(receive_bytes(rx.get(), 2).size(), 2u);
}

TEST(UdpGsoSendBatch, GroupsStopAtTheKernelsSegmentLimit) {
  UniqueFd rx = udp_socket_v4(), tx = udp_socket_dual();
  enable_udp_gro(rx.get());
  set_socket_buffers(rx.get(), 1 << 20, "test receiver");
  const sockaddr_in6 to = mapped_loopback(rx.get());
  UdpGsoSendBatch batch(150, 0);
  const auto d = pattern(20, 3);
  for (int i = 0; i < 150; i++)
    ASSERT_TRUE(batch.add(nullptr, 0, d.data(), d.size(), to, static_cast<uint64_t>(i)));
  const auto r = batch.flush(tx.get());
  EXPECT_EQ(r.gso_messages, 3u) << "64 + 64 + 22";
  EXPECT_EQ(r.gso_datagrams, 150u);
  EXPECT_EQ(r.refused, 0u);
  EXPECT_EQ(receive_bytes(rx.get(), 150).size(), 150u);
}

TEST(SocketOptions, BuffersAreGrantedOrTheShortfallIsReadBack) {
  UniqueFd fd = udp_socket_v4();
  set_socket_buffers(fd.get(), 1 << 20, "test socket");
  int granted = 0;
  socklen_t len = sizeof granted;
  ASSERT_EQ(getsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &granted, &len), 0);
  if (geteuid() != 0) GTEST_SKIP() << "without CAP_NET_ADMIN the kernel caps the request";
  EXPECT_GE(granted / 2, 1 << 20);
  ASSERT_EQ(getsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &granted, &len), 0);
  EXPECT_GE(granted / 2, 1 << 20);
}

TEST(SocketOptions, AFailureNamesTheSocket) {
  try {
    set_socket_option(-1, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT on VIP 198.18.0.1:3478");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("SO_REUSEPORT on VIP 198.18.0.1:3478: "), std::string::npos)
        << e.what();
  }
}

TEST(CpuAffinity, WorkersTakeTheAllowedCpusInTurn) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  EXPECT_EQ(worker_cpu(0, allowed), -1);
  CPU_SET(1, &allowed);
  CPU_SET(3, &allowed);
  CPU_SET(6, &allowed);
  const int expected[] = {1, 3, 6, 1, 3, 6, 1};
  for (unsigned i = 0; i < 7; i++) EXPECT_EQ(worker_cpu(i, allowed), expected[i]) << "worker " << i;
}

TEST(CpuAffinity, PinningStaysInsideANarrowedMask) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &mine)) last = cpu;
  ASSERT_GE(last, 0);
  int pinned = -2;
  cpu_set_t after;
  CPU_ZERO(&after);
  std::thread([&] {
    // Like a container's cpuset: only the last CPU is allowed. Worker 0 must not land on
    // CPU 0 (what index % hardware_concurrency would pick), but on the CPU it may use.
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    pinned = pin_current_thread(0, "test worker");
    sched_getaffinity(0, sizeof after, &after);
  }).join();
  EXPECT_EQ(pinned, last);
  EXPECT_EQ(CPU_COUNT(&after), 1);
  EXPECT_TRUE(CPU_ISSET(last, &after));
}

TEST(UniqueFd, ClosesOnceAndMovesOwnership) {
  int raw = -1;
  {
    UniqueFd a(socket(AF_INET, SOCK_DGRAM, 0));
    raw = a.get();
    ASSERT_GE(raw, 0);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
    UniqueFd c;
    c = std::move(b);
    EXPECT_EQ(c.get(), raw);
    EXPECT_NE(fcntl(raw, F_GETFD), -1);
  }
  EXPECT_EQ(fcntl(raw, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);

  UniqueFd d(socket(AF_INET, SOCK_DGRAM, 0));
  const int kept = d.release();
  EXPECT_FALSE(d.valid());
  EXPECT_NE(fcntl(kept, F_GETFD), -1) << "release does not close";
  close(kept);
}

TEST(ByteOrder, BigEndianLoadsAndStores) {
  constexpr uint8_t bytes[] = {0x12, 0x34, 0x56, 0x78};
  static_assert(load_be16(bytes) == 0x1234);
  static_assert(load_be24(bytes) == 0x123456);
  static_assert(load_be32(bytes) == 0x12345678);
  uint8_t out[4]{};
  store_be32(out, 0xa1b2c3d4);
  EXPECT_EQ(out[0], 0xa1);
  EXPECT_EQ(out[3], 0xd4);
  store_be24(out, 0x010203);
  EXPECT_EQ(load_be24(out), 0x010203u);
  store_be16(out, 0xbeef);
  EXPECT_EQ(load_be16(out), 0xbeef);
  uint8_t wide[8]{};
  store_be64(wide, 0x0102030405060708ull);
  EXPECT_EQ(wide[0], 0x01);
  EXPECT_EQ(wide[7], 0x08);
  EXPECT_EQ(load_be64(wide), 0x0102030405060708ull);
}

TEST(ByteOrder, AgreesWithTheWireHeadersCTwin) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; i++) {
    uint8_t p[4];
    for (auto& b : p) b = static_cast<uint8_t>(rng());
    ASSERT_EQ(load_be16(p), rtce_load_be16(p));
    ASSERT_EQ(load_be32(p), rtce_load_be32(p));
    uint8_t a[4], b[4];
    const uint32_t v = static_cast<uint32_t>(rng());
    store_be32(a, v);
    rtce_store_be32(b, v);
    ASSERT_EQ(std::memcmp(a, b, 4), 0);
  }
}

TEST(FirstByte, EveryValueFallsInItsRfc7983Range) {
  // RFC 7983 section 7, as the figure there draws it.
  struct Range {
    int lo, hi;
    rtce_first_byte kind;
  };
  const Range ranges[] = {{0, 3, RTCE_FIRST_BYTE_STUN},
                          {16, 19, RTCE_FIRST_BYTE_ZRTP},
                          {20, 63, RTCE_FIRST_BYTE_DTLS},
                          {64, 79, RTCE_FIRST_BYTE_TURN_CHANNEL},
                          {128, 191, RTCE_FIRST_BYTE_RTP}};
  int counts[RTCE_FIRST_BYTE_COUNT]{};
  for (int b = 0; b < 256; b++) {
    rtce_first_byte want = RTCE_FIRST_BYTE_OTHER;
    for (const auto& r : ranges)
      if (b >= r.lo && b <= r.hi) want = r.kind;
    EXPECT_EQ(rtce_classify_first_byte(static_cast<uint8_t>(b)), want) << "first byte " << b;
    counts[rtce_classify_first_byte(static_cast<uint8_t>(b))]++;
  }
  EXPECT_EQ(counts[RTCE_FIRST_BYTE_STUN], 4);
  EXPECT_EQ(counts[RTCE_FIRST_BYTE_DTLS], 44);
  EXPECT_EQ(counts[RTCE_FIRST_BYTE_RTP], 64);
  EXPECT_EQ(counts[RTCE_FIRST_BYTE_OTHER], 256 - 4 - 4 - 44 - 16 - 64);
}

TEST(FirstByte, TheRelayFramingIsNoneOfThem) {
  EXPECT_EQ(rtce_classify_first_byte(RTCE_PP2_FIRST_BYTE), RTCE_FIRST_BYTE_OTHER);
  EXPECT_EQ(rtce_classify_first_byte(rtce_pp2_signature[0]), RTCE_FIRST_BYTE_OTHER);
}

TEST(FirstByte, TheStunWalkRejectsAnythingOutsideTheStunRange) {
  uint8_t msg[RTCE_STUN_HEADER_LEN]{};
  rtce_store_be16(msg, RTCE_STUN_BINDING_REQUEST);
  rtce_store_be32(msg + 4, RTCE_STUN_MAGIC_COOKIE);
  EXPECT_EQ(rtce_stun_check_header(msg, sizeof msg), RTCE_STUN_OK);
  msg[0] = 4;  // the first value past STUN's range
  EXPECT_EQ(rtce_stun_check_header(msg, sizeof msg), RTCE_STUN_NOT_STUN);
}

}  // namespace
}  // namespace rtce
