// dtls_transport_test.cpp — DtlsTransport handshakes between two in-memory endpoints on the
// fake clock: keys, profiles, retransmission, MTU, fingerprints, timeouts, garbage, close.
#include "transceiver/dtls/dtls_transport.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "common/error.h"
#include "dtls_test_pair.h"
#include "transceiver/srtp/srtp_session.h"

namespace rtce {
namespace {

using testing::DtlsPair;
using State = DtlsTransport::State;
constexpr Nanos kMs = 1'000'000;

std::shared_ptr<DtlsContext> shared_context() {
  static std::shared_ptr<DtlsContext> context = DtlsContext::generate();
  return context;
}

// A second identity so that client and server present different certificates.
std::shared_ptr<DtlsContext> other_context() {
  static std::shared_ptr<DtlsContext> context = DtlsContext::generate();
  return context;
}

bool connect(DtlsPair& pair) {
  pair.start();
  return pair.run_until([&] { return pair.both_connected(); });
}

TEST(DtlsContext, FingerprintIsUppercaseColonSeparatedSha256) {
  std::string fingerprint = shared_context()->fingerprint_sha256();
  ASSERT_EQ(fingerprint.size(), 32u * 3 - 1);
  for (size_t i = 0; i < fingerprint.size(); ++i) {
    if (i % 3 == 2) {
      EXPECT_EQ(fingerprint[i], ':');
    } else {
      EXPECT_TRUE(std::isdigit(fingerprint[i]) || (fingerprint[i] >= 'A' && fingerprint[i] <= 'F'))
          << fingerprint;
    }
  }
  EXPECT_EQ(parse_fingerprint(fingerprint), shared_context()->fingerprint_sha256_bytes());
  EXPECT_NE(shared_context()->fingerprint_sha256(), other_context()->fingerprint_sha256());
  EXPECT_TRUE(parse_fingerprint("AB:C").empty());
  EXPECT_TRUE(parse_fingerprint("AB-CD").empty());
  EXPECT_TRUE(parse_fingerprint("").empty());
}

TEST(DtlsContext, LoadNamesTheFileThatIsMissing) {
  try {
    DtlsContext::load("/nonexistent/cert.pem", "/nonexistent/key.pem");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cert.pem"), std::string::npos) << e.what();
  }
}

TEST(DtlsTransport, HandshakeConnectsWithMirroredKeysAndPrefersGcm) {
  DtlsPair pair(other_context(), shared_context());
  ASSERT_TRUE(connect(pair)) << pair.client.failure << " / " << pair.server.failure;
  ASSERT_TRUE(pair.client.keys && pair.server.keys);
  EXPECT_EQ(pair.client.keys->profile, SrtpProfile::aead_aes_128_gcm);
  EXPECT_EQ(pair.server.keys->profile, SrtpProfile::aead_aes_128_gcm);
  EXPECT_EQ(pair.client.transport->negotiated_profile(), SrtpProfile::aead_aes_128_gcm);
  EXPECT_EQ(pair.client.keys->local_key_salt.size(), 16u + 12u);
  EXPECT_EQ(pair.client.keys->local_key_salt, pair.server.keys->remote_key_salt);
  EXPECT_EQ(pair.client.keys->remote_key_salt, pair.server.keys->local_key_salt);
  EXPECT_NE(pair.client.keys->local_key_salt, pair.client.keys->remote_key_salt);
  EXPECT_LE(pair.client.largest_datagram(), 1200u);
  EXPECT_LE(pair.server.largest_datagram(), 1200u);
  EXPECT_EQ(pair.client.transport->stats().retransmit_timeouts, 0u);
  EXPECT_EQ(pair.client.failed_calls + pair.server.failed_calls, 0);
  // Nothing is left to retransmit once the client has the server's Finished.
  EXPECT_FALSE(pair.client.transport->next_timeout(pair.now).has_value());
  EXPECT_FALSE(pair.server.transport->next_timeout(pair.now).has_value());
}

TEST(DtlsTransport, SameCertificateOnBothSidesAlsoConnects) {
  DtlsPair pair(shared_context(), shared_context());
  EXPECT_TRUE(connect(pair));
}

TEST(DtlsTransport, LostClientHelloIsRetransmittedWhenTheTimerFires) {
  DtlsPair pair(other_context(), shared_context());
  pair.filter = [](DtlsPair::Side from, size_t index, const std::vector<uint8_t>&) {
    return !(from == DtlsPair::Side::client && index == 0);
  };
  const Nanos started = pair.now;
  pair.start();
  pair.pump();
  EXPECT_EQ(pair.client.transport->state(), State::connecting);
  ASSERT_EQ(pair.client.transport->next_timeout(pair.now), started + 100 * kMs);
  ASSERT_TRUE(pair.run_until([&] { return pair.both_connected(); }));
  EXPECT_EQ(pair.client.transport->stats().retransmit_timeouts, 1u);
  EXPECT_EQ(pair.now, started + 100 * kMs);
}

TEST(DtlsTransport, LostServerFlightIsRecoveredByRetransmission) {
  DtlsPair pair(other_context(), shared_context());
  // Drop the server's whole first flight (ServerHello .. ServerHelloDone), all datagrams.
  size_t first_flight = 0;
  pair.filter = [&](DtlsPair::Side from, size_t, const std::vector<uint8_t>&) {
    if (from != DtlsPair::Side::server || pair.now != 1'000'000'000) return true;
    ++first_flight;
    return false;
  };
  ASSERT_TRUE(connect(pair)) << pair.client.failure << " / " << pair.server.failure;
  EXPECT_GE(first_flight, 1u);
  EXPECT_GE(
      pair.client.transport->stats().retransmit_timeouts + pair.server.transport->stats().retransmit_timeouts,
      1u);
}

TEST(DtlsTransport, LostFinalClientFlightIsRetransmitted) {
  DtlsPair pair(other_context(), shared_context());
  // Client datagrams after the ClientHello(s) at the start time carry its second flight.
  pair.filter = [&](DtlsPair::Side from, size_t index, const std::vector<uint8_t>&) {
    return !(from == DtlsPair::Side::client && index >= 1 && pair.now == 1'000'000'000);
  };
  ASSERT_TRUE(connect(pair));
  EXPECT_EQ(pair.client.transport->stats().retransmit_timeouts, 1u);
}

TEST(DtlsTransport, LostFinalServerFlightIsResentWhenTheClientRetransmits) {
  DtlsPair pair(other_context(), shared_context());
  size_t dropped = 0;
  pair.filter = [&](DtlsPair::Side from, size_t, const std::vector<uint8_t>&) {
    if (from != DtlsPair::Side::server || pair.now != 1'000'000'000) return true;
    if (pair.server.transport->state() != State::connected) return true;
    ++dropped;
    return false;
  };
  ASSERT_TRUE(connect(pair)) << pair.client.failure << " / " << pair.server.failure;
  EXPECT_GE(dropped, 1u);
  EXPECT_EQ(pair.client.transport->stats().retransmit_timeouts, 1u);
  EXPECT_EQ(pair.client.keys->local_key_salt, pair.server.keys->remote_key_salt);
}

TEST(DtlsTransport, RetransmissionBacksOffThenHandshakeTimesOut) {
  DtlsTransport::Config config;
  config.handshake_timeout = 10'000 * kMs;
  DtlsPair pair(other_context(), shared_context(), config);
  pair.filter = [](DtlsPair::Side, size_t, const std::vector<uint8_t>&) { return false; };
  const Nanos started = pair.now;
  pair.start();
  std::vector<Nanos> fire_times;
  while (pair.client.transport->state() == State::connecting && fire_times.size() < 100) {
    pair.pump();
    ASSERT_TRUE(pair.advance_to_next_timer());
    fire_times.push_back(pair.now - started);
  }
  EXPECT_EQ(pair.client.transport->state(), State::failed);
  EXPECT_EQ(pair.client.transport->failure_reason(), "handshake timeout");
  EXPECT_EQ(pair.client.failure, "handshake timeout");
  EXPECT_EQ(pair.client.failed_calls, 1);
  ASSERT_GE(fire_times.size(), 5u);
  // 100 ms, then doubling: 100, 300, 700, 1500, 3100, then capped at 4 s steps.
  EXPECT_EQ(fire_times[0], 100 * kMs);
  EXPECT_EQ(fire_times[1], 300 * kMs);
  EXPECT_EQ(fire_times[2], 700 * kMs);
  EXPECT_EQ(fire_times[3], 1500 * kMs);
  EXPECT_EQ(fire_times[4], 3100 * kMs);
  EXPECT_EQ(fire_times.back(), 10'000 * kMs);
  EXPECT_EQ(pair.server.transport->state(), State::failed);  // its deadline passed too
  EXPECT_FALSE(pair.client.transport->next_timeout(pair.now).has_value());
}

TEST(DtlsTransport, ClientFingerprintMismatchFailsBothSides) {
  std::vector<uint8_t> wrong(32, 0xAB);
  DtlsPair pair(other_context(), shared_context(), {}, {}, wrong);
  pair.start();
  pair.run_until([&] { return pair.client.failed_calls > 0 && pair.server.failed_calls > 0; });
  EXPECT_EQ(pair.client.transport->state(), State::failed);
  EXPECT_EQ(pair.client.failure, "fingerprint mismatch");
  EXPECT_FALSE(pair.client.keys.has_value());
  EXPECT_EQ(pair.server.transport->state(), State::failed);
  EXPECT_NE(pair.server.failure.find("bad certificate"), std::string::npos) << pair.server.failure;
  EXPECT_FALSE(pair.server.keys.has_value());
}

TEST(DtlsTransport, ServerFingerprintMismatchFails) {
  std::vector<uint8_t> wrong = shared_context()->fingerprint_sha256_bytes();
  wrong[0] ^= 1;
  DtlsPair pair(other_context(), shared_context(), {}, {}, std::nullopt, wrong);
  pair.start();
  pair.run_until([&] { return pair.server.failed_calls > 0 && pair.client.failed_calls > 0; });
  EXPECT_EQ(pair.server.failure, "fingerprint mismatch");
  EXPECT_FALSE(pair.server.keys.has_value());
  EXPECT_EQ(pair.client.transport->state(), State::failed);
  EXPECT_NE(pair.client.failure.find("alert"), std::string::npos) << pair.client.failure;
}

TEST(DtlsTransport, GarbageDatagramsAreCountedAndIgnored) {
  DtlsPair pair(other_context(), shared_context());
  std::mt19937 rng(7);
  auto garbage = [&](size_t size) {
    std::vector<uint8_t> d(size);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    d[0] = static_cast<uint8_t>(20 + rng() % 44);
    return d;
  };
  pair.start();
  // Before the handshake, in the middle of it and after it.
  pair.inject(DtlsPair::Side::server, garbage(40));
  pair.inject(DtlsPair::Side::server, {22, 0xfe, 0xfd, 0, 0});  // truncated record header
  pair.pump();
  pair.inject(DtlsPair::Side::client, garbage(300));
  ASSERT_TRUE(pair.run_until([&] { return pair.both_connected(); }));
  pair.inject(DtlsPair::Side::server, garbage(100));
  // Well framed application-data record in epoch 1 with a bogus payload: fails its AEAD check.
  std::vector<uint8_t> forged = {23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 99, 0, 40};
  forged.resize(13 + 40, 0x5a);
  pair.inject(DtlsPair::Side::server, forged);
  pair.inject(DtlsPair::Side::client, forged);
  EXPECT_TRUE(pair.both_connected());
  EXPECT_GE(pair.server.transport->stats().bad_datagrams, 3u);
  EXPECT_GE(pair.client.transport->stats().bad_datagrams, 1u);
  EXPECT_TRUE(pair.client.received_application_data.empty());
  EXPECT_TRUE(pair.server.received_application_data.empty());
}

TEST(DtlsTransport, ApplicationDataFlowsBothWays) {
  DtlsPair pair(other_context(), shared_context());
  ASSERT_TRUE(connect(pair));
  std::vector<uint8_t> hello = {1, 2, 3, 4, 5};
  std::vector<uint8_t> reply(1000, 0x42);
  EXPECT_TRUE(pair.client.transport->send_application_data(hello));
  EXPECT_TRUE(pair.server.transport->send_application_data(reply));
  pair.pump();
  ASSERT_EQ(pair.server.received_application_data.size(), 1u);
  EXPECT_EQ(pair.server.received_application_data[0], hello);
  ASSERT_EQ(pair.client.received_application_data.size(), 1u);
  EXPECT_EQ(pair.client.received_application_data[0], reply);
  EXPECT_LE(pair.server.largest_datagram(), 1200u);
}

TEST(DtlsTransport, SendBeforeConnectedIsRefused) {
  DtlsPair pair(other_context(), shared_context());
  std::vector<uint8_t> data = {1};
  EXPECT_FALSE(pair.client.transport->send_application_data(data));
}

TEST(DtlsTransport, CloseNotifyReachesThePeer) {
  DtlsPair pair(other_context(), shared_context());
  ASSERT_TRUE(connect(pair));
  pair.client.transport->close();
  EXPECT_EQ(pair.client.transport->state(), State::closed);
  pair.pump();
  EXPECT_EQ(pair.server.transport->state(), State::closed);
  EXPECT_EQ(pair.server.closed_calls, 1);
  EXPECT_EQ(pair.client.closed_calls, 0);  // our own close() does not call back
  EXPECT_EQ(pair.server.failed_calls + pair.client.failed_calls, 0);
  std::vector<uint8_t> data = {1};
  EXPECT_FALSE(pair.server.transport->send_application_data(data));
}

TEST(DtlsTransport, ClientOfferingOnlyCmSha1GetsCmSha1) {
  DtlsTransport::Config client_config;
  client_config.srtp_profiles = {SrtpProfile::aes128_cm_sha1_80};
  DtlsPair pair(other_context(), shared_context(), client_config);
  ASSERT_TRUE(connect(pair));
  EXPECT_EQ(pair.client.keys->profile, SrtpProfile::aes128_cm_sha1_80);
  EXPECT_EQ(pair.server.transport->negotiated_profile(), SrtpProfile::aes128_cm_sha1_80);
  EXPECT_EQ(pair.client.keys->local_key_salt.size(), 16u + 14u);
  EXPECT_EQ(pair.client.keys->local_key_salt, pair.server.keys->remote_key_salt);
}

TEST(DtlsTransport, ServerPreferenceWinsOverClientOrder) {
  DtlsTransport::Config client_config;
  client_config.srtp_profiles = {SrtpProfile::aes128_cm_sha1_80, SrtpProfile::aead_aes_128_gcm};
  DtlsPair pair(other_context(), shared_context(), client_config);
  ASSERT_TRUE(connect(pair));
  EXPECT_EQ(pair.client.keys->profile, SrtpProfile::aead_aes_128_gcm);
}

TEST(DtlsTransport, NoCommonSrtpProfileFails) {
  DtlsTransport::Config client_config, server_config;
  client_config.srtp_profiles = {SrtpProfile::aes128_cm_sha1_80};
  server_config.srtp_profiles = {SrtpProfile::aead_aes_128_gcm};
  DtlsPair pair(other_context(), shared_context(), client_config, server_config);
  pair.start();
  pair.run_until([&] { return pair.client.failed_calls > 0; });
  EXPECT_EQ(pair.client.transport->state(), State::failed);
  EXPECT_FALSE(pair.both_connected());
}

TEST(DtlsTransport, DtlsKeysDriveSrtpBothWays) {
  DtlsPair pair(other_context(), shared_context());
  ASSERT_TRUE(connect(pair));
  const SrtpKeys& c = *pair.client.keys;
  const SrtpKeys& s = *pair.server.keys;
  SrtpSession client_out(c.profile, SrtpSession::Direction::outbound, c.local_key_salt);
  SrtpSession client_in(c.profile, SrtpSession::Direction::inbound, c.remote_key_salt);
  SrtpSession server_out(s.profile, SrtpSession::Direction::outbound, s.local_key_salt);
  SrtpSession server_in(s.profile, SrtpSession::Direction::inbound, s.remote_key_salt);
  auto round_trip = [](SrtpSession& out, SrtpSession& in, uint16_t seq) {
    std::vector<uint8_t> packet = {0x80,
                                   111,
                                   static_cast<uint8_t>(seq >> 8),
                                   static_cast<uint8_t>(seq),
                                   0,
                                   0,
                                   0,
                                   1,
                                   0xca,
                                   0xfe,
                                   0xba,
                                   0xbe,
                                   'o',
                                   'p',
                                   'u',
                                   's'};
    std::vector<uint8_t> buffer = packet;
    buffer.resize(packet.size() + SrtpSession::max_trailer);
    size_t len = packet.size();
    EXPECT_EQ(out.protect_rtp(buffer.data(), len, buffer.size()), SrtpError::ok);
    EXPECT_EQ(in.unprotect_rtp(buffer.data(), len), SrtpError::ok);
    buffer.resize(len);
    return buffer == packet;
  };
  EXPECT_TRUE(round_trip(client_out, server_in, 1));
  EXPECT_TRUE(round_trip(server_out, client_in, 1));
  // The directions use different keys: a client-to-server packet fails the client's inbound.
  std::vector<uint8_t> buffer = {0x80, 111, 0, 9, 0, 0, 0, 1, 0xca, 0xfe, 0xba, 0xbe, 1, 2, 3, 4};
  size_t len = buffer.size();
  buffer.resize(len + SrtpSession::max_trailer);
  ASSERT_EQ(client_out.protect_rtp(buffer.data(), len, buffer.size()), SrtpError::ok);
  EXPECT_EQ(client_in.unprotect_rtp(buffer.data(), len), SrtpError::auth_failed);
}

// A certificate far larger than one datagram: flights must still be cut at the MTU.
class LargeCertificate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rtce_dtls_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    ASSERT_TRUE(key && cert);
    X509_set_version(cert, X509_VERSION_3);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 12345);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("big"), -1,
                               -1, 0);
    X509_set_issuer_name(cert, name);
    X509_set_pubkey(cert, key);
    std::string san;
    for (int i = 0; i < 150; ++i) {
      if (i) san += ",";
      san += "DNS:host-" + std::to_string(i) + ".a-rather-long-subdomain.example.test";
    }
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, san.c_str());
    ASSERT_NE(ext, nullptr);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    ASSERT_GT(X509_sign(cert, key, EVP_sha256()), 0);
    cert_path_ = (dir_ / "cert.pem").string();
    key_path_ = (dir_ / "key.pem").string();
    FILE* f = std::fopen(cert_path_.c_str(), "w");
    PEM_write_X509(f, cert);
    std::fclose(f);
    f = std::fopen(key_path_.c_str(), "w");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    der_size_ = i2d_X509(cert, nullptr);
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string cert_path_, key_path_;
  int der_size_ = 0;
};

TEST_F(LargeCertificate, EveryDatagramFitsTheMtu) {
  ASSERT_GT(der_size_, 4000);
  auto big = DtlsContext::load(cert_path_, key_path_);
  for (size_t mtu : {1200u, 576u}) {
    DtlsTransport::Config client_config, server_config;
    client_config.mtu = server_config.mtu = mtu;
    // Big certificates on both sides: both the server's and the client's flight fragment.
    DtlsPair pair(big, big, client_config, server_config);
    ASSERT_TRUE(connect(pair)) << "mtu " << mtu << ": " << pair.client.failure << " / "
                               << pair.server.failure;
    EXPECT_LE(pair.client.largest_datagram(), mtu);
    EXPECT_LE(pair.server.largest_datagram(), mtu);
    EXPECT_GT(pair.server.sent_sizes.size(), static_cast<size_t>(der_size_) / mtu);
    EXPECT_GT(pair.client.sent_sizes.size(), static_cast<size_t>(der_size_) / mtu);
  }
}

TEST_F(LargeCertificate, RetransmittedFragmentedFlightFitsTheMtu) {
  auto big = DtlsContext::load(cert_path_, key_path_);
  DtlsPair pair(other_context(), big);
  // Lose every other server datagram of the first flight.
  pair.filter = [&](DtlsPair::Side from, size_t index, const std::vector<uint8_t>&) {
    return !(from == DtlsPair::Side::server && pair.now == 1'000'000'000 && index % 2 == 1);
  };
  ASSERT_TRUE(connect(pair));
  EXPECT_LE(pair.server.largest_datagram(), 1200u);
  EXPECT_GE(pair.client.transport->stats().retransmit_timeouts, 1u);
}

TEST(DtlsTransport, RejectsUnusableConfig) {
  DtlsTransport::Config config;
  config.mtu = 100;
  EXPECT_THROW(DtlsTransport(shared_context(), DtlsTransport::Role::server, {}, {}, config),
               std::invalid_argument);
  config = {};
  config.srtp_profiles.clear();
  EXPECT_THROW(DtlsTransport(shared_context(), DtlsTransport::Role::server, {}, {}, config),
               std::invalid_argument);
}

TEST(DtlsTransport, IsMovable) {
  DtlsPair pair(other_context(), shared_context());
  DtlsTransport moved = std::move(*pair.server.transport);
  *pair.server.transport = std::move(moved);
  EXPECT_TRUE(connect(pair));
}

}  // namespace
}  // namespace rtce
