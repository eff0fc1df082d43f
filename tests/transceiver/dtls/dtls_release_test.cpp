// dtls_release_test.cpp — DtlsTransport with Config::release_after_handshake: the SSL is freed
// once connected, and what the association may still be asked for keeps working against a peer
// whose SSL is whole: our final flight again for a retransmitting client, close_notify both
// ways, the peer's records authenticated (every AEAD suite; forged and replayed ones dropped),
// a CBC suite keeping its SSL, and the memory that the release returns.
#include <gtest/gtest.h>
#include <malloc.h>
#include <openssl/ssl.h>

#include <memory>
#include <vector>

#include "dtls_test_pair.h"
#include "transceiver/dtls/dtls_transport.h"

namespace rtce {
namespace {

using testing::DtlsEndpoint;
using testing::DtlsPair;
using Side = DtlsPair::Side;
using State = DtlsTransport::State;
constexpr Nanos kStart = 1'000'000'000;

std::shared_ptr<DtlsContext> client_context() {
  static std::shared_ptr<DtlsContext> context = DtlsContext::generate();
  return context;
}
std::shared_ptr<DtlsContext> server_context() {
  static std::shared_ptr<DtlsContext> context = DtlsContext::generate();
  return context;
}

// A fresh identity that offers (or accepts) only `ciphers`.
std::shared_ptr<DtlsContext> context_with(const char* ciphers) {
  auto context = DtlsContext::generate();
  EXPECT_EQ(SSL_CTX_set_cipher_list(context->ssl_ctx(), ciphers), 1) << ciphers;
  return context;
}

DtlsTransport::Config releasing() {
  DtlsTransport::Config config;
  config.release_after_handshake = true;
  return config;
}

bool connect(DtlsPair& pair) {
  pair.start();
  return pair.run_until([&] { return pair.both_connected(); });
}

DtlsEndpoint& side(DtlsPair& pair, Side s) { return s == Side::client ? pair.client : pair.server; }

TEST(DtlsRelease, BothRolesReleaseOnceConnectedAndKeepTheirKeys) {
  DtlsPair pair(client_context(), server_context(), releasing(), releasing());
  ASSERT_TRUE(connect(pair)) << pair.client.failure << " / " << pair.server.failure;
  EXPECT_TRUE(pair.client.transport->ssl_released());
  EXPECT_TRUE(pair.server.transport->ssl_released());
  EXPECT_EQ(pair.client.keys->local_key_salt, pair.server.keys->remote_key_salt);
  EXPECT_EQ(pair.client.keys->remote_key_salt, pair.server.keys->local_key_salt);
  EXPECT_EQ(pair.client.transport->negotiated_profile(), SrtpProfile::aead_aes_128_gcm);
  EXPECT_EQ(pair.client.transport->state(), State::connected);
  EXPECT_FALSE(pair.client.transport->next_timeout(pair.now).has_value());
  // No application data without the SSL: an audio-only session has none to send.
  std::vector<uint8_t> data = {1, 2, 3};
  EXPECT_FALSE(pair.client.transport->send_application_data(data));
}

// The server's final flight (ChangeCipherSpec, Finished) is lost; the client retransmits its
// own final flight and must get the server's again, although the server has freed its SSL.
TEST(DtlsRelease, ReleasedServerResendsItsFinalFlightToARetransmittingClient) {
  DtlsPair pair(client_context(), server_context(), {}, releasing());
  size_t dropped = 0;
  pair.filter = [&](Side from, size_t, const std::vector<uint8_t>&) {
    if (from != Side::server || pair.now != kStart || pair.server.transport->state() != State::connected)
      return true;
    ++dropped;
    return false;
  };
  ASSERT_TRUE(connect(pair)) << pair.client.failure << " / " << pair.server.failure;
  EXPECT_GE(dropped, 1u);
  EXPECT_TRUE(pair.server.transport->ssl_released());
  EXPECT_EQ(pair.client.transport->stats().retransmit_timeouts, 1u);
  EXPECT_EQ(pair.server.transport->stats().final_flight_resends, 1u);
  EXPECT_EQ(pair.client.keys->local_key_salt, pair.server.keys->remote_key_salt);
  EXPECT_EQ(pair.server.failed_calls + pair.client.failed_calls, 0);
}

// A client's buffered flight is gone once the server's final flight arrived (OpenSSL clears
// it): a late copy of the server's Finished gets no answer, released or not.
TEST(DtlsRelease, ClientAnswersALateServerFinishedWithNothingReleasedOrNot) {
  for (bool release : {false, true}) {
    DtlsTransport::Config client_config;
    client_config.release_after_handshake = release;
    DtlsPair pair(client_context(), server_context(), client_config, {});
    std::vector<std::vector<uint8_t>> lost;
    pair.filter = [&](Side from, size_t, const std::vector<uint8_t>& datagram) {
      if (from != Side::server || pair.now != kStart || pair.server.transport->state() != State::connected)
        return true;
      lost.push_back(datagram);
      return false;
    };
    ASSERT_TRUE(connect(pair)) << release;
    ASSERT_FALSE(lost.empty());
    EXPECT_EQ(pair.client.transport->ssl_released(), release);
    const uint64_t sent = pair.client.transport->stats().datagrams_sent;
    for (const auto& datagram : lost) pair.inject(Side::client, datagram);
    EXPECT_EQ(pair.client.transport->stats().datagrams_sent, sent) << release;
    EXPECT_EQ(pair.client.transport->state(), State::connected) << release;
  }
}

// A connected pair whose GetParam() side released its SSL: `ours` is that side, `peer` the other.
class DtlsReleaseRole : public ::testing::TestWithParam<Side> {
 protected:
  void SetUp() override { ASSERT_TRUE(connect(pair)); }
  const Side released = GetParam();
  DtlsPair pair{client_context(), server_context(),
                released == Side::client ? releasing() : DtlsTransport::Config{},
                released == Side::server ? releasing() : DtlsTransport::Config{}};
  DtlsEndpoint& ours = side(pair, released);
  DtlsEndpoint& peer = side(pair, released == Side::client ? Side::server : Side::client);
};

TEST_P(DtlsReleaseRole, CloseFromTheReleasedSideReachesThePeer) {
  ASSERT_TRUE(ours.transport->ssl_released());
  ours.transport->close();
  EXPECT_EQ(ours.transport->state(), State::closed);
  pair.pump();
  EXPECT_EQ(peer.transport->state(), State::closed);
  EXPECT_EQ(peer.closed_calls, 1);
  EXPECT_EQ(ours.closed_calls, 0);
  EXPECT_EQ(pair.server.failed_calls + pair.client.failed_calls, 0);
}

TEST_P(DtlsReleaseRole, PeerCloseNotifyIsAuthenticatedAndAnswered) {
  peer.transport->close();
  ASSERT_EQ(peer.outbox.size(), 1u);
  std::vector<uint8_t> close_notify = peer.outbox.front();
  peer.outbox.clear();

  // A forged copy (one ciphertext bit) is dropped without a word.
  std::vector<uint8_t> forged = close_notify;
  forged.back() ^= 1;
  pair.inject(released, forged);
  EXPECT_EQ(ours.transport->state(), State::connected);
  EXPECT_TRUE(ours.outbox.empty());

  const uint64_t sent = ours.transport->stats().datagrams_sent;
  pair.inject(released, close_notify);
  EXPECT_EQ(ours.transport->state(), State::closed);
  EXPECT_EQ(ours.closed_calls, 1);
  EXPECT_EQ(ours.failed_calls, 0);
  EXPECT_EQ(ours.transport->stats().datagrams_sent, sent + 1);  // our close_notify, in answer
}

TEST_P(DtlsReleaseRole, PeerApplicationDataIsReadOnceAndForgeriesAreDropped) {
  const std::vector<uint8_t> message(700, 0x5a);
  ASSERT_TRUE(peer.transport->send_application_data(message));
  ASSERT_EQ(peer.outbox.size(), 1u);
  const std::vector<uint8_t> record = peer.outbox.front();
  pair.pump();
  ASSERT_EQ(ours.received_application_data.size(), 1u);
  EXPECT_EQ(ours.received_application_data[0], message);
  pair.inject(released, record);  // a replay
  std::vector<uint8_t> forged = record;
  forged[20] ^= 0x80;
  pair.inject(released, forged);
  EXPECT_EQ(ours.received_application_data.size(), 1u);
  EXPECT_EQ(ours.transport->state(), State::connected);
}

INSTANTIATE_TEST_SUITE_P(Roles, DtlsReleaseRole, ::testing::Values(Side::client, Side::server),
                         [](const auto& info) { return info.param == Side::client ? "client" : "server"; });

struct Suite {
  const char* name;
  const char* ciphers;
  bool released;
};

class DtlsReleaseSuite : public ::testing::TestWithParam<Suite> {};

// The key block is derived per suite (PRF hash, key and IV lengths, nonce construction): each
// AEAD suite reads the peer's records; a CBC suite keeps its SSL and still works.
TEST_P(DtlsReleaseSuite, ReadsThePeersRecordsOrKeepsTheSsl) {
  const Suite& suite = GetParam();
  DtlsPair pair(context_with(suite.ciphers), server_context(), {}, releasing());
  ASSERT_TRUE(connect(pair)) << pair.client.failure << " / " << pair.server.failure;
  EXPECT_EQ(pair.server.transport->ssl_released(), suite.released);
  const std::vector<uint8_t> message = {'o', 'a', 'i'};
  ASSERT_TRUE(pair.client.transport->send_application_data(message));
  pair.pump();
  ASSERT_EQ(pair.server.received_application_data.size(), 1u);
  EXPECT_EQ(pair.server.received_application_data[0], message);
  pair.client.transport->close();
  pair.pump();
  EXPECT_EQ(pair.server.closed_calls, 1);
  EXPECT_EQ(pair.server.failed_calls + pair.client.failed_calls, 0);
}

INSTANTIATE_TEST_SUITE_P(Suites, DtlsReleaseSuite,
                         ::testing::Values(Suite{"aes128gcm", "ECDHE-ECDSA-AES128-GCM-SHA256", true},
                                           Suite{"aes256gcm", "ECDHE-ECDSA-AES256-GCM-SHA384", true},
                                           Suite{"chacha20", "ECDHE-ECDSA-CHACHA20-POLY1305", true},
                                           Suite{"cbc", "ECDHE-ECDSA-AES128-SHA", false}),
                         [](const auto& info) { return info.param.name; });

// What one connected transport holds, released or not (the heap of this test's thread; the
// pairs are torn down one side at a time).
TEST(DtlsRelease, ReleasedTransportHoldsAFewKilobytes) {
  {
    const size_t before = mallinfo2().uordblks;
    auto probe = std::make_unique<std::vector<uint8_t>>(64 * 1024);
    static void* volatile sink;
    sink = probe->data();  // the allocation is observed: not elided
    if (sink == nullptr || mallinfo2().uordblks == before)
      GTEST_SKIP() << "mallinfo2 does not see this allocator (a sanitizer build)";
  }
  constexpr int kPairs = 20;
  double per_transport[2] = {};
  for (bool release : {false, true}) {
    DtlsTransport::Config config;
    config.release_after_handshake = release;
    std::vector<std::unique_ptr<DtlsPair>> pairs;
    for (int i = 0; i < kPairs; ++i) {
      pairs.push_back(
          std::make_unique<DtlsPair>(client_context(), server_context(), config, DtlsTransport::Config{}));
      ASSERT_TRUE(connect(*pairs.back()));
    }
    const size_t before = mallinfo2().uordblks;
    for (auto& pair : pairs) pair->client.transport.reset();
    per_transport[release] = static_cast<double>(before - mallinfo2().uordblks) / kPairs;
  }
  RecordProperty("kept_bytes", std::to_string(per_transport[false]));
  RecordProperty("released_bytes", std::to_string(per_transport[true]));
  EXPECT_GT(per_transport[false], 40.0 * 1024) << "an SSL after the handshake";
  EXPECT_LT(per_transport[true], 4.0 * 1024) << "released";
}

TEST(DtlsRelease, ApplicationDataLargerThanTheMtuIsRefused) {
  DtlsPair pair(client_context(), server_context());
  ASSERT_TRUE(connect(pair));
  std::vector<uint8_t> fits(1200, 1), too_large(1201, 1);
  EXPECT_TRUE(pair.client.transport->send_application_data(fits));
  EXPECT_FALSE(pair.client.transport->send_application_data(too_large));
  pair.pump();
  ASSERT_EQ(pair.server.received_application_data.size(), 1u);
  EXPECT_EQ(pair.client.transport->state(), State::connected);
}

}  // namespace
}  // namespace rtce
