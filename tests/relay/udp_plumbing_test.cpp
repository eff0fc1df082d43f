// udp_plumbing_test.cpp — the UDP plumbing in common/ that both data paths share: batched
// receive and send over loopback sockets (truncation, headroom, destination and source
// addresses through IP_PKTINFO, a refused datagram in the middle of a batch), socket
// buffer sizing, CPU pinning within the allowed mask, UniqueFd, the byte-order helpers
// and the RFC 7983 first-byte classification.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

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
