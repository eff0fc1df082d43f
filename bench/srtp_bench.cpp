// srtp_bench.cpp — SrtpSession cost as the number of live sessions grows: protect + unprotect
// of one 100-byte-payload RTP packet, round-robin over N outbound/inbound pairs, both
// profiles; plus creation time (first and steady state) and heap bytes per session. Built
// once per backend (rtce_srtp_bench_openssl, rtce_srtp_bench_libsrtp); see
// docs/benchmarks-srtp.md for the figures.
#define OPENSSL_SUPPRESS_DEPRECATED  // SHA1_* for the HMAC comparison below
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "transceiver/srtp/srtp_session.h"

namespace {

using rtce::SrtpError;
using rtce::SrtpProfile;
using rtce::SrtpSession;
using Clock = std::chrono::steady_clock;

constexpr size_t kPayload = 100;
constexpr size_t kRtpLength = 12 + kPayload;

// Distinct keys per session so that no backend can share key schedules between them.
std::vector<uint8_t> key_salt_for(SrtpProfile profile, uint32_t id) {
  std::vector<uint8_t> key(rtce::srtp_master_key_length(profile) + rtce::srtp_master_salt_length(profile));
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(id * 131 + i * 7 + (id >> 8));
  return key;
}

struct Pool {
  SrtpProfile profile;
  size_t size;
  std::vector<SrtpSession> senders;
  std::vector<SrtpSession> receivers;
  std::vector<uint16_t> next_seq;
};

// One pool alive at a time: benchmark functions are re-entered while the iteration count is
// calibrated, and 3000 libsrtp pairs take seconds to build.
Pool& pool_for(SrtpProfile profile, size_t size) {
  static std::unique_ptr<Pool> pool;
  if (!pool || pool->profile != profile || pool->size != size) {
    pool.reset();
    pool = std::make_unique<Pool>(Pool{profile, size, {}, {}, std::vector<uint16_t>(size, 1)});
    pool->senders.reserve(size);
    pool->receivers.reserve(size);
    for (uint32_t i = 0; i < size; ++i) {
      std::vector<uint8_t> key = key_salt_for(profile, i);
      pool->senders.emplace_back(profile, SrtpSession::Direction::outbound, key);
      pool->receivers.emplace_back(profile, SrtpSession::Direction::inbound, key);
    }
  }
  return *pool;
}

void BM_ProtectUnprotect(benchmark::State& state) {
  const SrtpProfile profile =
      state.range(0) == 0 ? SrtpProfile::aes128_cm_sha1_80 : SrtpProfile::aead_aes_128_gcm;
  const size_t sessions = static_cast<size_t>(state.range(1));
  Pool& pool = pool_for(profile, sessions);
  uint8_t buf[kRtpLength + SrtpSession::max_trailer] = {0x80, 111, 0,    0,    0,    0,
                                                        0x10, 0,   0x12, 0x34, 0x56, 0x78};
  for (size_t i = 12; i < kRtpLength; ++i) buf[i] = static_cast<uint8_t>(i);
  size_t next = 0;
  for (auto _ : state) {
    const size_t k = next;
    next = next + 1 == sessions ? 0 : next + 1;
    const uint16_t seq = pool.next_seq[k]++;
    buf[2] = static_cast<uint8_t>(seq >> 8);
    buf[3] = static_cast<uint8_t>(seq);
    size_t len = kRtpLength;
    if (pool.senders[k].protect_rtp(buf, len, sizeof(buf)) != SrtpError::ok ||
        pool.receivers[k].unprotect_rtp(buf, len) != SrtpError::ok || len != kRtpLength) {
      state.SkipWithError("protect/unprotect failed");
      break;
    }
    benchmark::DoNotOptimize(buf);
  }
  state.SetLabel(rtce::srtp_profile_name(profile));
}
BENCHMARK(BM_ProtectUnprotect)->ArgsProduct({{0, 1}, {1, 100, 1000, 3000}})->Unit(benchmark::kMicrosecond);

// HMAC-SHA1-80 over a 112-byte packet + ROC, three ways of reusing a keyed context: why the
// OpenSSL backend absorbs the pads into SHA_CTX copies instead of using EVP_MAC.
const uint8_t kAuthKey[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};

void BM_HmacEvpMacReinit(benchmark::State& state) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  char sha1[] = "SHA1";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, sha1, 0),
                         OSSL_PARAM_construct_end()};
  EVP_MAC_init(ctx, kAuthKey, sizeof(kAuthKey), params);
  uint8_t data[kRtpLength + 4] = {}, out[20];
  for (auto _ : state) {
    size_t out_length = 0;
    EVP_MAC_init(ctx, nullptr, 0, nullptr);  // same key: restarts from the cached pad state
    EVP_MAC_update(ctx, data, sizeof(data));
    EVP_MAC_final(ctx, out, &out_length, sizeof(out));
    benchmark::DoNotOptimize(out);
  }
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
}
BENCHMARK(BM_HmacEvpMacReinit);

void BM_HmacEvpMacDup(benchmark::State& state) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* keyed = EVP_MAC_CTX_new(mac);
  char sha1[] = "SHA1";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, sha1, 0),
                         OSSL_PARAM_construct_end()};
  EVP_MAC_init(keyed, kAuthKey, sizeof(kAuthKey), params);
  uint8_t data[kRtpLength + 4] = {}, out[20];
  for (auto _ : state) {
    size_t out_length = 0;
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(keyed);
    EVP_MAC_update(ctx, data, sizeof(data));
    EVP_MAC_final(ctx, out, &out_length, sizeof(out));
    EVP_MAC_CTX_free(ctx);
    benchmark::DoNotOptimize(out);
  }
  EVP_MAC_CTX_free(keyed);
  EVP_MAC_free(mac);
}
BENCHMARK(BM_HmacEvpMacDup);

void BM_HmacShaCtxCopy(benchmark::State& state) {
  uint8_t pad[64];
  SHA_CTX inner, outer;
  std::memset(pad, 0x36, sizeof(pad));
  for (size_t i = 0; i < sizeof(kAuthKey); ++i) pad[i] ^= kAuthKey[i];
  SHA1_Init(&inner);
  SHA1_Update(&inner, pad, sizeof(pad));
  std::memset(pad, 0x5c, sizeof(pad));
  for (size_t i = 0; i < sizeof(kAuthKey); ++i) pad[i] ^= kAuthKey[i];
  SHA1_Init(&outer);
  SHA1_Update(&outer, pad, sizeof(pad));
  uint8_t data[kRtpLength + 4] = {}, digest[20], out[20];
  for (auto _ : state) {
    SHA_CTX ctx = inner;
    SHA1_Update(&ctx, data, sizeof(data));
    SHA1_Final(digest, &ctx);
    ctx = outer;
    SHA1_Update(&ctx, digest, sizeof(digest));
    SHA1_Final(out, &ctx);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_HmacShaCtxCopy);

size_t heap_in_use() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// Creation cost and heap bytes per SrtpSession (one direction; a media session needs two).
void report_creation(SrtpProfile profile, bool first) {
  constexpr size_t kCount = 1000;
  std::vector<SrtpSession> sessions;
  sessions.reserve(kCount);
  const size_t heap_before = heap_in_use();
  const auto start = Clock::now();
  for (uint32_t i = 0; i < kCount; ++i)
    sessions.emplace_back(profile, i % 2 ? SrtpSession::Direction::inbound : SrtpSession::Direction::outbound,
                          key_salt_for(profile, i));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const size_t heap_after = heap_in_use();
  std::printf("%-24s create: %8.2f us/session%s, heap: %8zu bytes/session\n",
              rtce::srtp_profile_name(profile), seconds * 1e6 / kCount, first ? " (first profile run)" : "",
              (heap_after - heap_before) / kCount);
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = Clock::now();
  {
    SrtpSession first(SrtpProfile::aes128_cm_sha1_80, SrtpSession::Direction::outbound,
                      key_salt_for(SrtpProfile::aes128_cm_sha1_80, 4242));
  }
  std::printf("first session in the process: %.2f ms\n",
              std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  report_creation(SrtpProfile::aes128_cm_sha1_80, true);
  report_creation(SrtpProfile::aes128_cm_sha1_80, false);
  report_creation(SrtpProfile::aead_aes_128_gcm, false);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
