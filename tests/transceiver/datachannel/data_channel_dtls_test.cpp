// data_channel_dtls_test.cpp — data channels the way a session carries them: SCTP packets
// as application data of a real DTLS 1.2 pair (two DtlsTransports wired through in-memory
// queues, real certificates), the endpoint started on DTLS connected as the session does.
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "data_channel_endpoint.h"
#include "data_channel_test_link.h"
#include "transceiver/dtls/dtls_transport.h"

namespace rtce {
namespace {

struct Peer {
  std::unique_ptr<DtlsTransport> dtls;
  std::deque<std::vector<uint8_t>> datagrams;  // sent, not yet delivered
  bool dtls_connected = false;
  size_t largest_datagram = 0;
  testing::LinkSide sctp;
};

class DtlsLink {
 public:
  DtlsLink() {
    static std::shared_ptr<DtlsContext> client_ctx = DtlsContext::generate();
    static std::shared_ptr<DtlsContext> server_ctx = DtlsContext::generate();
    make(client, DtlsTransport::Role::client, client_ctx, server_ctx->fingerprint_sha256_bytes());
    make(server, DtlsTransport::Role::server, server_ctx, client_ctx->fingerprint_sha256_bytes());
  }

  bool run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      bool moved = deliver(client, server);
      moved = deliver(server, client) || moved;
      const Nanos now = monotonic_now();
      for (Peer* p : {&client, &server}) {
        p->dtls->on_timer(now);
        p->sctp.ep->pump(now);
      }
      if (!moved) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

  Peer client, server;

 private:
  void make(Peer& p, DtlsTransport::Role role, std::shared_ptr<DtlsContext> ctx,
            std::vector<uint8_t> expect) {
    DataChannelEndpoint::Config config;
    config.dtls_client = role == DtlsTransport::Role::client;
    config.remote_max_message_size = 262144;
    auto cb = p.sctp.callbacks();
    cb.send = [&p](std::span<const uint8_t> packet) { p.dtls->send_application_data(packet); };
    p.sctp.ep = std::make_unique<DataChannelEndpoint>(config, std::move(cb));
    DtlsTransport::Callbacks dc;
    dc.send = [&p](std::span<const uint8_t> d) {
      p.largest_datagram = std::max(p.largest_datagram, d.size());
      p.datagrams.emplace_back(d.begin(), d.end());
    };
    dc.on_connected = [&p](const SrtpKeys&) {
      p.dtls_connected = true;
      p.sctp.ep->start(monotonic_now());
    };
    dc.on_failed = [](std::string_view reason) { ADD_FAILURE() << "DTLS failed: " << reason; };
    dc.on_closed = [] {};
    dc.on_application_data = [&p](std::span<const uint8_t> data) {
      p.sctp.ep->handle_packet(data, monotonic_now());
    };
    p.dtls = std::make_unique<DtlsTransport>(std::move(ctx), role, std::move(expect), std::move(dc));
    p.dtls->start(monotonic_now());
  }

  static bool deliver(Peer& from, Peer& to) {
    if (from.datagrams.empty()) return false;
    std::deque<std::vector<uint8_t>> batch;
    batch.swap(from.datagrams);
    for (auto& d : batch) to.dtls->handle_datagram(d, monotonic_now());
    return true;
  }
};

TEST(DataChannelOverDtls, OpensCarriesTextAndALargeMessageBothWays) {
  DtlsLink link;
  using State = DataChannelEndpoint::State;
  ASSERT_TRUE(link.run_until([&] {
    return link.client.sctp.ep->state() == State::open && link.server.sctp.ep->state() == State::open;
  }));
  auto s = link.client.sctp.ep->open_channel("oai-events", "");
  ASSERT_TRUE(s);
  ASSERT_TRUE(
      link.run_until([&] { return !link.server.sctp.opened.empty() && !link.client.sctp.opened.empty(); }));
  EXPECT_EQ(std::get<1>(link.server.sctp.opened[0]), "oai-events");

  ASSERT_TRUE(link.server.sctp.ep->send_text(*s, R"({"type":"session.created","event_id":"e1"})"));
  ASSERT_TRUE(link.client.sctp.ep->send_text(*s, R"({"type":"session.update"})"));
  ASSERT_TRUE(link.run_until(
      [&] { return !link.client.sctp.messages.empty() && !link.server.sctp.messages.empty(); }));
  EXPECT_EQ(link.client.sctp.messages[0].text(), R"({"type":"session.created","event_id":"e1"})");
  EXPECT_EQ(link.server.sctp.messages[0].text(), R"({"type":"session.update"})");

  std::mt19937 rng(11);
  std::vector<uint8_t> big(200 * 1024);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  ASSERT_TRUE(link.client.sctp.ep->send_binary(*s, big));
  ASSERT_TRUE(link.run_until([&] { return link.server.sctp.messages.size() == 2; }));
  EXPECT_TRUE(link.server.sctp.messages[1].bytes == big);
  ASSERT_TRUE(link.server.sctp.ep->send_binary(*s, big));
  ASSERT_TRUE(link.run_until([&] { return link.client.sctp.messages.size() == 2; }));
  EXPECT_TRUE(link.client.sctp.messages[1].bytes == big);
  // Every SCTP packet fitted one DTLS record in one datagram of the DTLS MTU.
  EXPECT_LE(link.client.largest_datagram, DtlsTransport::Config{}.mtu);
  EXPECT_LE(link.server.largest_datagram, DtlsTransport::Config{}.mtu);
  for (Peer* p : {&link.client, &link.server}) {
    EXPECT_EQ(p->dtls->stats().bad_datagrams, 0u);
    for (auto d : p->sctp.ep->stats().drops) EXPECT_EQ(d, 0u);
  }
}

TEST(DataChannelOverDtls, AnAbortedAssociationFailsAloneAndDtlsStaysUp) {
  DtlsLink link;
  using State = DataChannelEndpoint::State;
  ASSERT_TRUE(link.run_until([&] {
    return link.client.sctp.ep->state() == State::open && link.server.sctp.ep->state() == State::open;
  }));
  link.client.sctp.ep->abort();
  ASSERT_TRUE(link.run_until([&] { return !link.server.sctp.failures.empty(); }));
  EXPECT_EQ(link.server.sctp.ep->state(), State::failed);
  // The session's audio rides on the same DTLS association (SRTP keys): it is untouched.
  EXPECT_EQ(link.client.dtls->state(), DtlsTransport::State::connected);
  EXPECT_EQ(link.server.dtls->state(), DtlsTransport::State::connected);
}

}  // namespace
}  // namespace rtce
