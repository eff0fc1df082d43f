// tcp_streams_test.cpp — the relay's ICE-TCP side: RFC 4571 framing (FrameReader,
// append_frame) as pure functions, then TcpStreams over real loopback connections with a
// recording sink in place of the worker's RelayCore: frames in, replies out, and every
// reason a connection is closed.
#include "tcp_streams.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "clock.h"
#include "unique_fd.h"

namespace {

using namespace rtce;
using Bytes = std::vector<uint8_t>;

Bytes framed(const std::string& payload) {
  Bytes out;
  EXPECT_TRUE(append_frame(out, 65536, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}));
  return out;
}

std::string text(std::span<const uint8_t> s) { return {reinterpret_cast<const char*>(s.data()), s.size()}; }

// Feeds `stream` to a reader in pieces of `piece` bytes; returns the frames in order.
std::vector<std::string> read_all(FrameReader& r, const Bytes& stream, size_t piece) {
  std::vector<std::string> frames;
  for (size_t at = 0; at < stream.size();) {
    auto space = r.space();
    if (space.empty()) break;
    const size_t n = std::min({piece, space.size(), stream.size() - at});
    std::memcpy(space.data(), stream.data() + at, n);
    r.commit(n);
    at += n;
    while (auto f = r.next()) frames.push_back(text(*f));
  }
  return frames;
}

TEST(FrameReader, FramesSurviveEverySplitOfTheStream) {
  Bytes stream;
  std::vector<std::string> sent;
  for (int i = 0; i < 40; i++) {
    std::string payload(static_cast<size_t>((i * 37) % 200), static_cast<char>('a' + i % 26));
    if (i == 7) payload.clear();  // an empty frame is a frame (RFC 4571 allows it)
    sent.push_back(payload);
    const Bytes f = framed(payload);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  for (size_t piece : {1u, 2u, 3u, 5u, 64u, 511u, 4096u}) {
    FrameReader r(256);
    EXPECT_EQ(read_all(r, stream, piece), sent) << "pieces of " << piece;
    EXPECT_FALSE(r.too_large());
  }
}

TEST(FrameReader, ALengthOverTheMaximumStopsTheStream) {
  FrameReader r(100);
  Bytes stream = framed("ok");
  const Bytes big = framed(std::string(101, 'x'));
  stream.insert(stream.end(), big.begin(), big.end());
  const auto frames = read_all(r, stream, 4096);
  EXPECT_EQ(frames, std::vector<std::string>{"ok"});
  EXPECT_TRUE(r.too_large());
  EXPECT_TRUE(r.space().empty());
  EXPECT_FALSE(r.next());
}

TEST(FrameReader, AWholeMaximumFrameAlwaysFits) {
  FrameReader r(2048);
  // One byte short of a frame, then the frame's rest: space() must make room each time.
  const Bytes one = framed(std::string(2048, 'y'));
  Bytes stream;
  for (int i = 0; i < 5; i++) stream.insert(stream.end(), one.begin(), one.end());
  const auto frames = read_all(r, stream, 2049);
  ASSERT_EQ(frames.size(), 5u);
  EXPECT_EQ(frames[4], std::string(2048, 'y'));
}

TEST(AppendFrame, RefusesWhatWouldPassTheCap) {
  Bytes out;
  const std::string p(10, 'z');
  const std::span<const uint8_t> s(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  EXPECT_TRUE(append_frame(out, 24, s));
  EXPECT_TRUE(append_frame(out, 24, s)) << "exactly the cap fits";
  EXPECT_FALSE(append_frame(out, 24, s));
  EXPECT_EQ(out.size(), 24u);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 10);
}

// ---------------------------------------------------------------- over loopback

class RecordingSink : public StreamSink {
 public:
  bool on_stream_frame(const rtce_flow_key& key, uint16_t vip, std::span<uint8_t> frame, Nanos) override {
    frames.push_back(text(frame));
    last_key = key;
    last_vip = vip;
    if (text(frame).rfind("refuse", 0) == 0) return false;
    alive = true;
    return true;
  }
  void on_stream_closed(const rtce_flow_key&) override { closed++; }
  bool stream_flow_alive(const rtce_flow_key&) override { return alive; }

  std::vector<std::string> frames;
  rtce_flow_key last_key{};
  uint16_t last_vip = 0;
  bool alive = false;
  int closed = 0;
};

class TcpStreamsTest : public ::testing::Test {
 protected:
  void start_on_free_port(IceTcpOptions options = {}) {
    epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
    for (int attempt = 0; attempt < 20 && !streams_; attempt++) {
      // A free port: bind an ephemeral one, release it, take it (retry if another process
      // took it in between).
      UniqueFd probe(socket(AF_INET, SOCK_STREAM, 0));
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(bind(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
      socklen_t len = sizeof a;
      getsockname(probe.get(), reinterpret_cast<sockaddr*>(&a), &len);
      probe.reset();
      options.port = ntohs(a.sin_port);
      try {
        streams_ = std::make_unique<TcpStreams>(options, FlowLimits{},
                                                std::vector{*SocketAddress::parse("127.0.0.1:3478")}, 1,
                                                epoll_.get(), sink_);
        port_ = options.port;
      } catch (const std::exception&) {
      }
    }
    ASSERT_TRUE(streams_);
  }

  // receive_buffer > 0: SO_RCVBUF before connect, so the advertised window stays small.
  UniqueFd connect_client(int receive_buffer = 0) {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (receive_buffer > 0) setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{2, 0};
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }

  // Runs the epoll loop until `done` or 2 s pass.
  template <typename Done>
  bool pump(Done&& done, Nanos now = 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < deadline) {
      epoll_event events[16];
      const int n = epoll_wait(epoll_.get(), events, 16, 10);
      for (int i = 0; i < n; i++) streams_->on_event(events[i].data.u64, events[i].events, now);
      streams_->flush();
      if (done()) return true;
    }
    return done();
  }

  uint64_t closed(TcpCloseReason r) const {
    return streams_->counters().closed[static_cast<size_t>(r)].get();
  }

  // Reads until EOF or the 2 s receive timeout: the bytes, and whether EOF came.
  static std::pair<Bytes, bool> read_until_eof(int fd) {
    Bytes got;
    uint8_t buf[4096];
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n == 0) return {got, true};
      if (n < 0) return {got, false};
      got.insert(got.end(), buf, buf + n);
    }
  }

  RecordingSink sink_;
  UniqueFd epoll_;
  std::unique_ptr<TcpStreams> streams_;
  uint16_t port_ = 0;
};

TEST_F(TcpStreamsTest, FramesReachTheSinkAndRepliesComeBackAsFrames) {
  start_on_free_port();
  UniqueFd client = connect_client();
  Bytes stream = framed("binding");
  const Bytes second = framed("media");
  stream.insert(stream.end(), second.begin(), second.end());
  ASSERT_EQ(send(client.get(), stream.data(), stream.size(), 0), static_cast<ssize_t>(stream.size()));
  ASSERT_TRUE(pump([&] { return sink_.frames.size() == 2; }));
  EXPECT_EQ(sink_.frames, (std::vector<std::string>{"binding", "media"}));
  EXPECT_EQ(sink_.last_key.transport, RTCE_TRANSPORT_TCP);
  EXPECT_EQ(flow_vip(sink_.last_key).port(), port_);
  EXPECT_EQ(streams_->open_connections(), 1u);

  // Two replies in one flush: one send(), both frames.
  const std::string r1 = "reply-1", r2 = "reply-22";
  streams_->queue_reply(sink_.last_key, reinterpret_cast<const uint8_t*>(r1.data()), r1.size());
  streams_->queue_reply(sink_.last_key, reinterpret_cast<const uint8_t*>(r2.data()), r2.size());
  const uint64_t sends = streams_->counters().sends.get();
  streams_->flush();
  EXPECT_EQ(streams_->counters().sends.get(), sends + 1);
  Bytes expect = framed(r1);
  const Bytes f2 = framed(r2);
  expect.insert(expect.end(), f2.begin(), f2.end());
  Bytes got(expect.size());
  ASSERT_EQ(recv(client.get(), got.data(), got.size(), MSG_WAITALL), static_cast<ssize_t>(got.size()));
  EXPECT_EQ(got, expect);

  // A reply for a flow without a connection is counted, not sent anywhere.
  rtce_flow_key other = sink_.last_key;
  other.client_port_be ^= 1;
  streams_->queue_reply(other, reinterpret_cast<const uint8_t*>(r1.data()), r1.size());
  EXPECT_EQ(streams_->counters().reply_no_connection.get(), 1u);

  // The client closes: counted, and the sink forgets the flow.
  client.reset();
  ASSERT_TRUE(pump([&] { return streams_->open_connections() == 0; }));
  EXPECT_EQ(closed(TcpCloseReason::client_closed), 1u);
  EXPECT_EQ(sink_.closed, 1);
}

TEST_F(TcpStreamsTest, ARefusedFirstFrameClosesTheConnection) {
  start_on_free_port();
  UniqueFd client = connect_client();
  const Bytes f = framed("refuse-me");
  send(client.get(), f.data(), f.size(), 0);
  ASSERT_TRUE(pump([&] { return closed(TcpCloseReason::first_frame_refused) == 1; }));
  EXPECT_TRUE(read_until_eof(client.get()).second);
  EXPECT_EQ(sink_.closed, 0) << "no flow was made, none to forget";
}

TEST_F(TcpStreamsTest, AnOversizeLengthClosesTheConnection) {
  IceTcpOptions o;
  o.max_frame = 100;
  start_on_free_port(o);
  UniqueFd client = connect_client();
  const Bytes f = framed(std::string(101, 'x'));
  send(client.get(), f.data(), f.size(), 0);
  ASSERT_TRUE(pump([&] { return closed(TcpCloseReason::frame_too_large) == 1; }));
  EXPECT_TRUE(sink_.frames.empty());
  EXPECT_TRUE(read_until_eof(client.get()).second);
}

TEST_F(TcpStreamsTest, DeadlinesCloseSilentIdleAndOrphanedConnections) {
  IceTcpOptions o;
  o.first_frame_timeout = 5'000'000'000;
  o.idle_timeout = 30'000'000'000;
  start_on_free_port(o);
  const Nanos t0 = 1'000'000'000'000;
  UniqueFd silent = connect_client();
  ASSERT_TRUE(pump([&] { return streams_->open_connections() == 1; }, t0));
  streams_->expire(t0 + 4'999'000'000);
  EXPECT_EQ(streams_->open_connections(), 1u) << "not before its deadline";
  streams_->expire(t0 + 5'000'000'000);
  EXPECT_EQ(closed(TcpCloseReason::first_frame_timeout), 1u);
  EXPECT_TRUE(read_until_eof(silent.get()).second);

  UniqueFd talker = connect_client();
  const Bytes f = framed("binding");
  send(talker.get(), f.data(), f.size(), 0);
  ASSERT_TRUE(pump([&] { return sink_.frames.size() == 1; }, t0));
  streams_->expire(t0 + 29'000'000'000);
  EXPECT_EQ(streams_->open_connections(), 1u);
  streams_->expire(t0 + 30'000'000'000);
  EXPECT_EQ(closed(TcpCloseReason::idle), 1u);
  EXPECT_EQ(sink_.closed, 1);

  UniqueFd orphan = connect_client();
  send(orphan.get(), f.data(), f.size(), 0);
  ASSERT_TRUE(pump([&] { return sink_.frames.size() == 2; }, t0));
  sink_.alive = false;  // its flow ended in the core (endpoint gone, say)
  streams_->expire(t0 + 1);
  EXPECT_EQ(closed(TcpCloseReason::flow_gone), 1u);
}

TEST_F(TcpStreamsTest, LimitsCloseConnectionsAtAccept) {
  IceTcpOptions o;
  o.max_per_source_prefix = 2;
  start_on_free_port(o);
  UniqueFd a = connect_client(), b = connect_client(), c = connect_client();
  ASSERT_TRUE(pump([&] { return closed(TcpCloseReason::source_prefix) == 1; }));
  EXPECT_EQ(streams_->open_connections(), 2u);
  EXPECT_TRUE(read_until_eof(c.get()).second);
  EXPECT_EQ(streams_->counters().accepted.get(), 3u);
}

TEST_F(TcpStreamsTest, AClientThatDoesNotReadLosesRepliesNotMemory) {
  IceTcpOptions o;
  o.send_queue_bytes = 4096;
  start_on_free_port(o);
  UniqueFd client = connect_client(/*receive_buffer=*/4096);
  const Bytes f = framed("binding");
  send(client.get(), f.data(), f.size(), 0);
  ASSERT_TRUE(pump([&] { return sink_.frames.size() == 1; }));
  const std::string reply(1000, 'r');
  // More than the kernel's send buffer can hold (tcp_wmem's maximum is 4 MiB by default).
  constexpr int kReplies = 12000;
  for (int i = 0; i < kReplies; i++) {
    streams_->queue_reply(sink_.last_key, reinterpret_cast<const uint8_t*>(reply.data()), reply.size());
    streams_->flush();
  }
  const uint64_t overflow = streams_->counters().reply_overflow.get();
  EXPECT_GT(overflow, 0u) << "12 MB of replies to a client that reads nothing";
  EXPECT_LT(streams_->counters().frames_to_clients.get(), static_cast<uint64_t>(kReplies));
  EXPECT_EQ(streams_->open_connections(), 1u) << "a slow reader is not closed, it loses replies";
}

}  // namespace
