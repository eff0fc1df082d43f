// webrtc_client_test.cpp — a Pion-profile WebRtcClient on a real loopback socket against a
// scripted ICE-lite peer built from the transceiver's own IceLiteSession: the client answers
// the peer's Binding request and nominates at once (not on its 200 ms tick), and drops DTLS
// that arrives before its ICE is connected. Time is passed in explicitly, so "at once" is
// exact; every receive waits on poll() with a deadline.
#include "webrtc_client.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

#include "dtls/dtls_certificate.h"
#include "ice/ice_client.h"
#include "ice/ice_lite.h"

namespace rtce::loadgen {
namespace {

constexpr Nanos kMs = 1'000'000;

// The "server": one UDP socket on 127.0.0.1 and the transceiver's ICE-lite state machine.
class LitePeer {
 public:
  LitePeer(const ClientOffer& offer)
      : ice_({"srvUfrag", "server-password-0123456789", offer.ice_ufrag, offer.ice_pwd}, {}) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    address_ = *SocketAddress::parse("127.0.0.1:0");
    if (fd_ < 0 || ::bind(fd_, address_.sa(), address_.len()) != 0) throw std::runtime_error("bind");
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len);
    address_ = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  }
  ~LitePeer() { ::close(fd_); }
  const SocketAddress& address() const { return address_; }
  IceLiteSession& ice() { return ice_; }

  // The next datagram within 2 s; empty on timeout.
  std::vector<uint8_t> receive(SocketAddress& from) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 2000) != 1) return {};
    std::vector<uint8_t> buf(2048);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const ssize_t n = ::recvfrom(fd_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&ss), &len);
    if (n <= 0) return {};
    buf.resize(static_cast<size_t>(n));
    from = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
    return buf;
  }
  void send(std::span<const uint8_t> d, const SocketAddress& to) {
    ASSERT_EQ(::sendto(fd_, d.data(), d.size(), 0, to.sa(), to.len()), static_cast<ssize_t>(d.size()));
  }

 private:
  IceLiteSession ice_;
  int fd_ = -1;
  SocketAddress address_;
};

// Feeds the client every datagram waiting on its socket (polls with a deadline first).
void deliver_to_client(WebRtcClient& client, Nanos now) {
  pollfd p{client.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1) << "nothing reached the client";
  uint8_t buf[2048];
  for (ssize_t n; (n = ::recv(client.fd(), buf, sizeof buf, MSG_DONTWAIT)) > 0;)
    client.handle_datagram({buf, static_cast<size_t>(n)}, now, now);
}

struct PionCall : ::testing::Test {
  ClientConfig config;
  ClientOffer offer = make_client_offer();
  LitePeer peer{offer};
  std::unique_ptr<WebRtcClient> client;
  SocketAddress client_address;

  void SetUp() override {
    config.dtls = DtlsContext::generate();
    config.profile = ClientProfile::pion;
    config.consent = ConsentChecks::none;
    ParsedAnswer answer;
    answer.ice_ufrag = "srvUfrag";
    answer.ice_pwd = "server-password-0123456789";
    answer.fingerprint = DtlsContext::generate()->fingerprint_sha256_bytes();
    answer.setup = "active";
    answer.candidate = peer.address();
    client = std::make_unique<WebRtcClient>(0, config, offer, answer, "/v1/sessions/x", 0, 0,
                                            *SocketAddress::parse("127.0.0.1:0"));
  }

  // The peer takes one check from the client, answers it, and says whether it nominated.
  bool answer_one_check(Nanos now) {
    auto check = peer.receive(client_address);
    EXPECT_FALSE(check.empty()) << "no check from the client";
    std::vector<uint8_t> reply(kIceReplyBufferSize);
    auto r = peer.ice().handle_request(check, client_address, reply, now);
    EXPECT_EQ(r.outcome, IceLiteSession::Outcome::success);
    peer.send({reply.data(), r.reply_len}, client_address);
    return r.nominated;
  }
};

TEST_F(PionCall, AnswersTheServersCheckAndNominatesAtOnce) {
  client->start(0);
  EXPECT_FALSE(answer_one_check(0)) << "pion's first check must not nominate";
  deliver_to_client(*client, 1 * kMs);
  EXPECT_NE(client->ice_ok_at(), 0);
  EXPECT_EQ(client->ice_connected_at(), 0);

  // The server checks the pair, as a full agent's peer would: USERNAME "client:server",
  // keyed with the client's pwd from the offer.
  IceClientChecker server_check(offer.ice_ufrag, offer.ice_pwd, "srvUfrag");
  uint8_t request[512];
  IceClientChecker::RequestOptions options;
  options.use_candidate = false;
  options.controlling = false;  // a lite server is controlled
  const size_t len = server_check.build_request(request, options);
  ASSERT_GT(len, 0u);
  peer.send({request, len}, client_address);
  deliver_to_client(*client, 2 * kMs);  // long before the 200 ms tick
  EXPECT_EQ(client->stats().stun_requests_answered, 1u);

  // Two datagrams come back: the success response (signed with the client's pwd) and the
  // nominating check, in either order.
  bool got_response = false, got_nomination = false;
  for (int i = 0; i < 2; ++i) {
    SocketAddress from;
    auto d = peer.receive(from);
    ASSERT_FALSE(d.empty());
    if (IceBindingResponder::is_request(d)) {
      std::vector<uint8_t> reply(kIceReplyBufferSize);
      auto r = peer.ice().handle_request(d, from, reply, 2 * kMs);
      EXPECT_TRUE(r.nominated);
      got_nomination = r.nominated;
      peer.send({reply.data(), r.reply_len}, from);
    } else {
      EXPECT_EQ(server_check.process_response(d).verdict, IceClientChecker::Verdict::success);
      got_response = true;
    }
  }
  EXPECT_TRUE(got_response);
  EXPECT_TRUE(got_nomination);
  deliver_to_client(*client, 3 * kMs);
  EXPECT_EQ(client->ice_connected_at(), 3 * kMs);
  EXPECT_EQ(peer.ice().state(), IceLiteSession::State::connected);
}

TEST_F(PionCall, DropsDtlsBeforeIceIsConnected) {
  client->start(0);
  answer_one_check(0);
  deliver_to_client(*client, 1 * kMs);
  // A ClientHello-shaped record (content type 22) while only the first, non-nominating
  // check has succeeded: Pion is not listening yet.
  const uint8_t record[] = {22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0};
  peer.send(record, client_address);
  deliver_to_client(*client, 2 * kMs);
  EXPECT_EQ(client->stats().dtls_dropped_before_ice, 1u);
  // The 200 ms tick nominates; after its success the same record goes to DTLS.
  client->on_timer(200 * kMs);
  EXPECT_TRUE(answer_one_check(200 * kMs));
  deliver_to_client(*client, 201 * kMs);
  EXPECT_EQ(client->ice_connected_at(), 201 * kMs);
  peer.send(record, client_address);
  deliver_to_client(*client, 202 * kMs);
  EXPECT_EQ(client->stats().dtls_dropped_before_ice, 1u);
}

}  // namespace
}  // namespace rtce::loadgen
