// srtp_interop_test.cpp — the OpenSSL SrtpSession backend against libsrtp2 (LibsrtpOracle),
// for every profile and both cipher paths (the provider's functions, plain EVP:
// openssl_cipher.h): byte-identical output for the same input, each side unprotecting the
// other's packets across sequence-number wraps (ROC increments) and reordering, the same
// accept/reject verdict for replays, stale, tampered and wrongly keyed packets, and no
// OpenSSL allocation per packet.
#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <srtp2/srtp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "libsrtp_oracle.h"
#include "transceiver/srtp/openssl_cipher.h"
#include "transceiver/srtp/srtp_session.h"

namespace rtce {
namespace {

using Direction = SrtpSession::Direction;
using testing::LibsrtpOracle;

std::vector<uint8_t> key_salt_for(SrtpProfile profile, uint8_t seed = 1) {
  std::vector<uint8_t> key;
  for (size_t i = 0; i < srtp_master_key_length(profile) + srtp_master_salt_length(profile); ++i)
    key.push_back(static_cast<uint8_t>(seed * 37 + i * 11));
  return key;
}

std::vector<uint8_t> rtp_packet(uint16_t seq, uint32_t ssrc, size_t payload = 100, bool extension = false) {
  std::vector<uint8_t> p = {static_cast<uint8_t>(extension ? 0x91 : 0x80),  // one CSRC with the extension
                            111,
                            static_cast<uint8_t>(seq >> 8),
                            static_cast<uint8_t>(seq),
                            0,
                            1,
                            2,
                            3,
                            static_cast<uint8_t>(ssrc >> 24),
                            static_cast<uint8_t>(ssrc >> 16),
                            static_cast<uint8_t>(ssrc >> 8),
                            static_cast<uint8_t>(ssrc)};
  if (extension) {
    for (uint8_t b : {0xca, 0xfe, 0xba, 0xbe, 0xbe, 0xde, 0x00, 0x01, 0x10, 0xff, 0x00, 0x00}) p.push_back(b);
  }
  for (size_t i = 0; i < payload; ++i) p.push_back(static_cast<uint8_t>(i * 13 + seq + ssrc));
  return p;
}

std::vector<uint8_t> rtcp_packet(uint32_t ssrc, uint8_t variant) {
  std::vector<uint8_t> p = {0x81,
                            200,
                            0,
                            6,
                            static_cast<uint8_t>(ssrc >> 24),
                            static_cast<uint8_t>(ssrc >> 16),
                            static_cast<uint8_t>(ssrc >> 8),
                            static_cast<uint8_t>(ssrc)};
  for (int i = 0; i < 20; ++i) p.push_back(static_cast<uint8_t>(i + variant));
  return p;
}

// Verdicts both implementations can be compared on.
enum class Verdict { ok, replay, auth_failed, other };
Verdict verdict(SrtpError e) {
  switch (e) {
    case SrtpError::ok: return Verdict::ok;
    case SrtpError::replay: return Verdict::replay;
    case SrtpError::auth_failed: return Verdict::auth_failed;
    default: return Verdict::other;
  }
}
Verdict verdict(int status) {
  switch (status) {
    case srtp_err_status_ok: return Verdict::ok;
    case srtp_err_status_replay_fail:
    case srtp_err_status_replay_old: return Verdict::replay;
    case srtp_err_status_auth_fail: return Verdict::auth_failed;
    default: return Verdict::other;
  }
}

// SrtpSession calls on vectors.
SrtpError protect(SrtpSession& s, std::vector<uint8_t>& p, bool rtcp) {
  size_t len = p.size();
  p.resize(len + SrtpSession::max_trailer);
  SrtpError e = rtcp ? s.protect_rtcp(p.data(), len, p.size()) : s.protect_rtp(p.data(), len, p.size());
  p.resize(len);
  return e;
}
SrtpError unprotect(SrtpSession& s, std::vector<uint8_t>& p, bool rtcp) {
  size_t len = p.size();
  SrtpError e = rtcp ? s.unprotect_rtcp(p.data(), len) : s.unprotect_rtp(p.data(), len);
  if (e == SrtpError::ok) p.resize(len);
  return e;
}

using srtp_openssl::CipherPath;

// Sessions built while this lives take `path`; the first base of the fixture, so it is set
// before the fixture's own sessions are built.
struct UsingCipherPath {
  explicit UsingCipherPath(CipherPath path) { srtp_openssl::set_cipher_path(path); }
  ~UsingCipherPath() { srtp_openssl::set_cipher_path(CipherPath::provider); }
  UsingCipherPath(const UsingCipherPath&) = delete;
  UsingCipherPath& operator=(const UsingCipherPath&) = delete;
};

class SrtpInterop : public ::testing::TestWithParam<std::tuple<SrtpProfile, CipherPath>>,
                    public UsingCipherPath {
 protected:
  SrtpInterop() : UsingCipherPath(std::get<1>(GetParam())) {}
  static SrtpProfile param_profile() { return std::get<0>(GetParam()); }
  SrtpProfile profile() const { return param_profile(); }
  std::vector<uint8_t> key = key_salt_for(param_profile());
  SrtpSession ours_out{param_profile(), Direction::outbound, key};
  SrtpSession ours_in{param_profile(), Direction::inbound, key};
  LibsrtpOracle theirs_out{param_profile(), Direction::outbound, key};
  LibsrtpOracle theirs_in{param_profile(), Direction::inbound, key};
};

TEST_P(SrtpInterop, RtpIsByteIdenticalAcrossTwoSequenceWraps) {
  // From 65000 through ROC 1 into ROC 2, with two SSRCs and header extensions interleaved.
  uint16_t seq = 65000;
  for (int n = 0; n < 2 * 65536 + 1000; ++n, ++seq) {
    const uint32_t ssrc = n % 3 == 0 ? 0xdecafbad : 0x01020304;
    const std::vector<uint8_t> plain = rtp_packet(seq, ssrc, 40 + n % 60, n % 5 == 0);
    std::vector<uint8_t> a = plain, b = plain;
    ASSERT_EQ(protect(ours_out, a, false), SrtpError::ok) << n;
    ASSERT_EQ(theirs_out.protect_rtp(b), srtp_err_status_ok) << n;
    ASSERT_EQ(a, b) << "packet " << n << " seq " << seq;
    // Each side unprotects the other's packet.
    ASSERT_EQ(theirs_in.unprotect_rtp(a), srtp_err_status_ok) << n;
    ASSERT_EQ(unprotect(ours_in, b, false), SrtpError::ok) << n;
    ASSERT_EQ(a, plain);
    ASSERT_EQ(b, plain);
  }
}

TEST_P(SrtpInterop, RtcpIsByteIdenticalAndUnprotectsBothWays) {
  for (int n = 0; n < 300; ++n) {
    const std::vector<uint8_t> plain = rtcp_packet(n % 2 ? 0x11111111 : 0x22222222, static_cast<uint8_t>(n));
    std::vector<uint8_t> a = plain, b = plain;
    ASSERT_EQ(protect(ours_out, a, true), SrtpError::ok);
    ASSERT_EQ(theirs_out.protect_rtcp(b), srtp_err_status_ok);
    ASSERT_EQ(a, b) << n;
    ASSERT_EQ(a.size(), plain.size() + srtp_rtcp_trailer_length(profile()));
    ASSERT_EQ(theirs_in.unprotect_rtcp(a), srtp_err_status_ok) << n;
    ASSERT_EQ(unprotect(ours_in, b, true), SrtpError::ok) << n;
    ASSERT_EQ(a, plain);
    ASSERT_EQ(b, plain);
  }
}

// A sender's packets in a shuffled order with duplicates, stale packets and corruption: both
// receivers must reach the same verdict on every packet and the same plaintext on success.
void expect_same_verdicts(SrtpSession& ours_in, LibsrtpOracle& theirs_in,
                          const std::vector<std::vector<uint8_t>>& sent, bool rtcp, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<size_t> order;
  for (size_t i = 0; i < sent.size(); ++i) order.push_back(i);
  // Reorder within blocks of 40 (inside the 128 window), then add late copies and strays.
  for (size_t i = 0; i + 40 <= order.size(); i += 40)
    std::shuffle(order.begin() + i, order.begin() + i + 40, rng);
  std::vector<std::pair<size_t, bool>> deliveries;  // index, corrupt
  for (size_t k = 0; k < order.size(); ++k) {
    deliveries.emplace_back(order[k], false);
    if (rng() % 10 == 0) deliveries.emplace_back(order[k], false);  // duplicate
    // Late by 1..250 deliveries: straddles the 128-packet window edge.
    if (rng() % 6 == 0 && k > 250) deliveries.emplace_back(order[k - 1 - rng() % 250], false);
    if (rng() % 20 == 0) deliveries.emplace_back(order[k], true);  // tampered
  }
  int accepted = 0;
  for (size_t d = 0; d < deliveries.size(); ++d) {
    auto [index, corrupt] = deliveries[d];
    std::vector<uint8_t> a = sent[index];
    if (corrupt) a[a.size() / 2] ^= 0x20;
    std::vector<uint8_t> b = a;
    const Verdict ours = verdict(unprotect(ours_in, a, rtcp));
    const Verdict theirs = verdict(rtcp ? theirs_in.unprotect_rtcp(b) : theirs_in.unprotect_rtp(b));
    ASSERT_EQ(ours, theirs) << "delivery " << d << " of packet " << index << (corrupt ? " (tampered)" : "");
    if (ours == Verdict::ok) {
      ASSERT_EQ(a, b);
      ++accepted;
    }
  }
  EXPECT_GT(accepted, static_cast<int>(sent.size()) * 9 / 10);
}

// `count` packets (make(n) is the n-th), protected by our sender and then by libsrtp's, and
// delivered reordered (expect_same_verdicts) to both receivers.
void expect_same_verdicts_reordered(SrtpProfile profile, const std::vector<uint8_t>& key, bool rtcp,
                                    int count, const std::function<std::vector<uint8_t>(int)>& make,
                                    uint32_t seed) {
  for (bool from_ours : {true, false}) {
    SCOPED_TRACE(from_ours ? "protected by OpenSSL" : "protected by libsrtp");
    SrtpSession sender_ours(profile, Direction::outbound, key);
    LibsrtpOracle sender_theirs(profile, Direction::outbound, key);
    SrtpSession receiver_ours(profile, Direction::inbound, key);
    LibsrtpOracle receiver_theirs(profile, Direction::inbound, key);
    std::vector<std::vector<uint8_t>> sent;
    for (int n = 0; n < count; ++n) {
      std::vector<uint8_t> p = make(n);
      if (from_ours) {
        ASSERT_EQ(protect(sender_ours, p, rtcp), SrtpError::ok);
      } else {
        ASSERT_EQ(rtcp ? sender_theirs.protect_rtcp(p) : sender_theirs.protect_rtp(p), srtp_err_status_ok);
      }
      sent.push_back(std::move(p));
    }
    expect_same_verdicts(receiver_ours, receiver_theirs, sent, rtcp, seed + (from_ours ? 0 : 1));
  }
}

TEST_P(SrtpInterop, ReorderedRtpAcrossTheWrapGetsTheSameVerdicts) {
  // Sequence numbers 64000.. cross 65535 -> 0 (ROC 0 -> 1).
  expect_same_verdicts_reordered(
      profile(), key, false, 3000,
      [](int n) { return rtp_packet(static_cast<uint16_t>(64000 + n), 0x5eed0001); }, 7);
}

TEST_P(SrtpInterop, ReorderedRtcpGetsTheSameVerdicts) {
  expect_same_verdicts_reordered(
      profile(), key, true, 1000, [](int n) { return rtcp_packet(0x5eed0002, static_cast<uint8_t>(n)); }, 9);
}

TEST_P(SrtpInterop, TheReplayWindowEdgeIs127Behind) {
  for (bool rtcp : {false, true}) {
    SCOPED_TRACE(rtcp ? "SRTCP" : "SRTP");
    SrtpSession receiver(profile(), Direction::inbound, key);
    LibsrtpOracle receiver_theirs(profile(), Direction::inbound, key);
    LibsrtpOracle sender(profile(), Direction::outbound, key);
    std::vector<std::vector<uint8_t>> sent;
    for (int n = 0; n <= 300; ++n) {  // SRTCP indices 1..301, RTP sequence numbers 1000..1300
      std::vector<uint8_t> p = rtcp ? rtcp_packet(99, static_cast<uint8_t>(n)) : rtp_packet(1000 + n, 99);
      ASSERT_EQ(rtcp ? sender.protect_rtcp(p) : sender.protect_rtp(p), srtp_err_status_ok);
      sent.push_back(std::move(p));
    }
    auto deliver = [&](size_t n) {
      std::vector<uint8_t> a = sent[n], b = sent[n];
      const Verdict ours = verdict(unprotect(receiver, a, rtcp));
      EXPECT_EQ(ours, verdict(rtcp ? receiver_theirs.unprotect_rtcp(b) : receiver_theirs.unprotect_rtp(b)))
          << n;
      return ours;
    };
    for (size_t n = 0; n <= 300; ++n)
      if (n != 300 - 127 && n != 300 - 128) ASSERT_EQ(deliver(n), Verdict::ok) << n;
    EXPECT_EQ(deliver(300 - 127), Verdict::ok);
    EXPECT_EQ(deliver(300 - 128), Verdict::replay);
    EXPECT_EQ(deliver(300 - 127), Verdict::replay);
  }
}

TEST_P(SrtpInterop, StreamsStartingAtAnySequenceNumberInteroperate) {
  // libsrtp assumes ROC 0 until the stream passes 32768; a high first sequence number must
  // not be guessed into the previous ROC, on either side.
  for (uint16_t first :
       {uint16_t{0}, uint16_t{1}, uint16_t{32767}, uint16_t{32768}, uint16_t{40000}, uint16_t{65535}}) {
    SCOPED_TRACE(first);
    SrtpSession sender(profile(), Direction::outbound, key);
    LibsrtpOracle sender_theirs(profile(), Direction::outbound, key);
    SrtpSession receiver(profile(), Direction::inbound, key);
    LibsrtpOracle receiver_theirs(profile(), Direction::inbound, key);
    uint16_t seq = first;
    for (int n = 0; n < 70000; n += (n < 100 ? 1 : 997), seq = static_cast<uint16_t>(first + n)) {
      std::vector<uint8_t> a = rtp_packet(seq, 42), b = a;
      const Verdict ours = verdict(protect(sender, a, false));
      const Verdict theirs = verdict(sender_theirs.protect_rtp(b));
      ASSERT_EQ(ours, theirs) << n;
      if (ours != Verdict::ok) continue;
      ASSERT_EQ(a, b) << n;
      std::vector<uint8_t> c = a;
      ASSERT_EQ(verdict(unprotect(receiver, a, false)), verdict(receiver_theirs.unprotect_rtp(c))) << n;
    }
  }
}

TEST_P(SrtpInterop, OutboundRefusalsMatchLibsrtp) {
  std::mt19937 rng(11);
  uint16_t seq = 100;
  for (int n = 0; n < 5000; ++n) {
    const int step = static_cast<int>(rng() % 8) - 2;  // mostly forward, sometimes back or repeated
    seq = static_cast<uint16_t>(seq + (rng() % 50 == 0 ? -200 : step));
    std::vector<uint8_t> a = rtp_packet(seq, 7), b = a;
    const Verdict ours = verdict(protect(ours_out, a, false));
    ASSERT_EQ(ours, verdict(theirs_out.protect_rtp(b))) << n << " seq " << seq;
    if (ours == Verdict::ok) ASSERT_EQ(a, b);
  }
}

TEST_P(SrtpInterop, ANewSsrcBeyondTheSlotsIsABadPacketAndDoesNotDisturbOthers) {
  // Unauthenticated packets never take a slot.
  for (uint32_t ssrc = 1; ssrc <= 100; ++ssrc) {
    std::vector<uint8_t> p = rtp_packet(1, ssrc);
    ASSERT_EQ(protect(ours_out, p, false), ssrc <= 8 ? SrtpError::ok : SrtpError::bad_packet) << ssrc;
    if (ssrc <= 8) {
      std::vector<uint8_t> forged = p;
      forged.back() ^= 1;
      ASSERT_EQ(unprotect(ours_in, forged, false), SrtpError::auth_failed);
    }
  }
  for (uint32_t ssrc = 1; ssrc <= 9; ++ssrc) {
    std::vector<uint8_t> p = rtp_packet(2, ssrc);
    std::vector<uint8_t> q = p;
    ASSERT_EQ(theirs_out.protect_rtp(q), srtp_err_status_ok);
    ASSERT_EQ(unprotect(ours_in, q, false), ssrc <= 8 ? SrtpError::ok : SrtpError::bad_packet) << ssrc;
  }
}

TEST_P(SrtpInterop, TamperedAndWronglyKeyedPacketsGetTheSameVerdicts) {
  std::vector<uint8_t> other_key = key;
  other_key[srtp_master_key_length(profile()) - 1] ^= 0x55;
  SrtpSession stranger_ours(profile(), Direction::inbound, other_key);
  LibsrtpOracle stranger_theirs(profile(), Direction::inbound, other_key);
  for (bool rtcp : {false, true}) {
    SCOPED_TRACE(rtcp ? "SRTCP" : "SRTP");
    std::vector<uint8_t> sent = rtcp ? rtcp_packet(0xabcdef01, 3) : rtp_packet(500, 0xabcdef01);
    ASSERT_EQ(protect(ours_out, sent, rtcp), SrtpError::ok);
    // Every byte of the trailer (tag; SRTCP also E flag and index), one bit at a time.
    const size_t trailer = rtcp ? srtp_rtcp_trailer_length(profile()) : srtp_rtp_trailer_length(profile());
    for (size_t back = 1; back <= trailer; ++back) {
      for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
        std::vector<uint8_t> a = sent;
        a[a.size() - back] ^= bit;
        std::vector<uint8_t> b = a;
        const Verdict ours = verdict(unprotect(ours_in, a, rtcp));
        const Verdict theirs = verdict(rtcp ? theirs_in.unprotect_rtcp(b) : theirs_in.unprotect_rtp(b));
        EXPECT_NE(ours, Verdict::ok) << "byte " << back << " from the end, bit " << int{bit};
        // One known difference: AES-CM SRTCP with the E flag cleared is libsrtp's cant_check
        // (the policy encrypts), ours an authentication failure (the MAC covers the flag).
        const bool e_flag =
            rtcp && bit == 0x80 && back == (profile() == SrtpProfile::aes128_cm_sha1_80 ? 14u : 4u);
        if (!(e_flag && profile() == SrtpProfile::aes128_cm_sha1_80))
          EXPECT_EQ(ours, theirs) << "byte " << back << " from the end, bit " << int{bit};
        EXPECT_NE(theirs, Verdict::ok);
      }
    }
    std::vector<uint8_t> a = sent, b = sent;
    EXPECT_EQ(verdict(unprotect(stranger_ours, a, rtcp)), Verdict::auth_failed);
    EXPECT_EQ(verdict(rtcp ? stranger_theirs.unprotect_rtcp(b) : stranger_theirs.unprotect_rtp(b)),
              Verdict::auth_failed);
    // The genuine packet still passes on both: no failure moved a window.
    a = sent;
    b = sent;
    EXPECT_EQ(verdict(unprotect(ours_in, a, rtcp)), Verdict::ok);
    EXPECT_EQ(verdict(rtcp ? theirs_in.unprotect_rtcp(b) : theirs_in.unprotect_rtp(b)), Verdict::ok);
  }
}

TEST_P(SrtpInterop, SrtcpIndicesMatchLibsrtpPerSsrc) {
  // Each SSRC counts its own SRTCP index from 1; libsrtp's packets carry the same indices.
  for (int n = 0; n < 40; ++n) {
    const uint32_t ssrc = n % 4 == 0 ? 0x0a0a0a0a : 0x0b0b0b0b;
    std::vector<uint8_t> a = rtcp_packet(ssrc, static_cast<uint8_t>(n)), b = a;
    ASSERT_EQ(protect(ours_out, a, true), SrtpError::ok);
    ASSERT_EQ(theirs_out.protect_rtcp(b), srtp_err_status_ok);
    ASSERT_EQ(a, b) << n;
  }
}

// Counts OpenSSL's allocations (CRYPTO_malloc and friends) once the hooks are in, which only
// works before OpenSSL's first allocation in the process: hence a static initialiser.
std::atomic<long> g_openssl_allocations{0};
void* counting_malloc(size_t n, const char*, int) {
  g_openssl_allocations.fetch_add(1, std::memory_order_relaxed);
  return malloc(n);
}
void* counting_realloc(void* p, size_t n, const char*, int) {
  g_openssl_allocations.fetch_add(1, std::memory_order_relaxed);
  return realloc(p, n);
}
void plain_free(void* p, const char*, int) { free(p); }
const bool g_counting = CRYPTO_set_mem_functions(counting_malloc, counting_realloc, plain_free) == 1;

TEST_P(SrtpInterop, NoOpenSslAllocationPerPacket) {
  if (!g_counting) GTEST_SKIP() << "OpenSSL allocated before the hooks could be set";
  std::vector<uint8_t> rtp(12 + 160 + SrtpSession::max_trailer), rtcp(28 + SrtpSession::max_trailer);
  auto round_trip = [&](uint16_t seq) {
    const std::vector<uint8_t> plain_rtp = rtp_packet(seq, 77, 160);
    const std::vector<uint8_t> plain_rtcp = rtcp_packet(77, static_cast<uint8_t>(seq));
    std::copy(plain_rtp.begin(), plain_rtp.end(), rtp.begin());
    std::copy(plain_rtcp.begin(), plain_rtcp.end(), rtcp.begin());
    size_t len = plain_rtp.size();
    const long before = g_openssl_allocations.load();
    bool ok = ours_out.protect_rtp(rtp.data(), len, rtp.size()) == SrtpError::ok &&
              ours_in.unprotect_rtp(rtp.data(), len) == SrtpError::ok;
    len = plain_rtcp.size();
    ok = ok && ours_out.protect_rtcp(rtcp.data(), len, rtcp.size()) == SrtpError::ok &&
         ours_in.unprotect_rtcp(rtcp.data(), len) == SrtpError::ok;
    return std::pair(ok, g_openssl_allocations.load() - before);
  };
  const long before_session = g_openssl_allocations.load();
  { SrtpSession fresh(profile(), Direction::outbound, key); }
  ASSERT_GT(g_openssl_allocations.load(), before_session) << "the hooks count nothing";
  round_trip(1);  // the first packet of an SSRC claims its slot (no allocation either)
  for (uint16_t seq = 2; seq < 1000; ++seq) {
    auto [ok, allocations] = round_trip(seq);
    ASSERT_TRUE(ok) << seq;
    ASSERT_EQ(allocations, 0) << seq;
  }
}

TEST(SrtpCipherPath, ProviderFunctionsAreFoundForEveryCipher) {
  // The fast path needs them; the EVP path is only a fallback.
  for (size_t key_length : {size_t{16}, size_t{32}}) {
    EXPECT_TRUE(srtp_openssl::aes_gcm(key_length).has_provider_functions()) << key_length;
    EXPECT_TRUE(srtp_openssl::aes_ctr(key_length).has_provider_functions()) << key_length;
  }
  SrtpSession session(SrtpProfile::aead_aes_128_gcm, Direction::outbound,
                      key_salt_for(SrtpProfile::aead_aes_128_gcm));
  EXPECT_EQ(srtp_openssl::cipher_path(), CipherPath::provider);
}

INSTANTIATE_TEST_SUITE_P(Profiles, SrtpInterop,
                         ::testing::Combine(::testing::Values(SrtpProfile::aes128_cm_sha1_80,
                                                              SrtpProfile::aead_aes_128_gcm,
                                                              SrtpProfile::aead_aes_256_gcm),
                                            ::testing::Values(CipherPath::provider, CipherPath::evp)),
                         [](const auto& info) {
                           return std::string(srtp_profile_name(std::get<0>(info.param))).substr(5) +
                                  (std::get<1>(info.param) == CipherPath::provider ? "_provider" : "_evp");
                         });

}  // namespace
}  // namespace rtce
