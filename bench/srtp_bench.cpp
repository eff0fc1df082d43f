// srtp_bench.cpp — what an SRTP packet costs. First a Markdown table (per-packet CPU time of
// protect + unprotect against the raw AES-GCM floor measured in the same run, in alternating
// rounds, medians; the machine described), then SrtpSession cost as the number of live
// sessions grows (round-robin over N outbound/inbound pairs, every profile), HMAC-SHA1
// context reuse, creation time and heap bytes per session. Built once per backend
// (rtce_srtp_bench_openssl, rtce_srtp_bench_libsrtp); figures in docs/benchmarks.md
// ("SRTP backend cost"). Flags: --table-only, --no-table, --rounds=N; the rest go to
// Google Benchmark.
#define OPENSSL_SUPPRESS_DEPRECATED  // SHA1_* for the HMAC comparison below
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <srtp2/srtp.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transceiver/srtp/libsrtp_policy.h"
#include "transceiver/srtp/openssl_cipher.h"
#include "transceiver/srtp/srtp_session.h"

namespace {

using rtce::SrtpError;
using rtce::SrtpProfile;
using rtce::SrtpSession;
using Clock = std::chrono::steady_clock;

// unique_ptr deleters for the OpenSSL objects below.
template <auto Free>
struct OpenSslFree {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
template <typename T, auto Free>
using OpenSslPtr = std::unique_ptr<T, OpenSslFree<Free>>;
using CipherPtr = OpenSslPtr<EVP_CIPHER, EVP_CIPHER_free>;
using CipherCtxPtr = OpenSslPtr<EVP_CIPHER_CTX, EVP_CIPHER_CTX_free>;
using MacPtr = OpenSslPtr<EVP_MAC, EVP_MAC_free>;
using MacCtxPtr = OpenSslPtr<EVP_MAC_CTX, EVP_MAC_CTX_free>;
using MdPtr = OpenSslPtr<EVP_MD, EVP_MD_free>;
using MdCtxPtr = OpenSslPtr<EVP_MD_CTX, EVP_MD_CTX_free>;
using HmacCtxPtr = OpenSslPtr<HMAC_CTX, HMAC_CTX_free>;

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

constexpr SrtpProfile kProfiles[] = {SrtpProfile::aes128_cm_sha1_80, SrtpProfile::aead_aes_128_gcm,
                                     SrtpProfile::aead_aes_256_gcm};

void BM_ProtectUnprotect(benchmark::State& state) {
  const SrtpProfile profile = kProfiles[state.range(0)];
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
BENCHMARK(BM_ProtectUnprotect)->ArgsProduct({{0, 1, 2}, {1, 100, 1000, 3000}})->Unit(benchmark::kMicrosecond);

// HMAC-SHA1-80 over a 112-byte packet + ROC, five ways of reusing a keyed context: why the
// OpenSSL backend absorbs the pads into SHA_CTX copies instead of using EVP_MAC or HMAC_CTX.
const uint8_t kAuthKey[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};

// A keyed EVP_MAC HMAC-SHA1 context.
MacCtxPtr keyed_hmac(const MacPtr& mac) {
  MacCtxPtr ctx(EVP_MAC_CTX_new(mac.get()));
  char sha1[] = "SHA1";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, sha1, 0),
                         OSSL_PARAM_construct_end()};
  EVP_MAC_init(ctx.get(), kAuthKey, sizeof(kAuthKey), params);
  return ctx;
}

void BM_HmacEvpMacReinit(benchmark::State& state) {
  MacPtr mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  MacCtxPtr ctx = keyed_hmac(mac);
  uint8_t data[kRtpLength + 4] = {}, out[20];
  for (auto _ : state) {
    size_t out_length = 0;
    EVP_MAC_init(ctx.get(), nullptr, 0, nullptr);  // same key: restarts from the cached pad state
    EVP_MAC_update(ctx.get(), data, sizeof(data));
    EVP_MAC_final(ctx.get(), out, &out_length, sizeof(out));
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_HmacEvpMacReinit);

void BM_HmacEvpMacDup(benchmark::State& state) {
  MacPtr mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  MacCtxPtr keyed = keyed_hmac(mac);
  uint8_t data[kRtpLength + 4] = {}, out[20];
  for (auto _ : state) {
    size_t out_length = 0;
    MacCtxPtr ctx(EVP_MAC_CTX_dup(keyed.get()));
    EVP_MAC_update(ctx.get(), data, sizeof(data));
    EVP_MAC_final(ctx.get(), out, &out_length, sizeof(out));
    benchmark::DoNotOptimize(out);
  }
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

void BM_HmacLegacyReinit(benchmark::State& state) {
  HmacCtxPtr ctx(HMAC_CTX_new());
  HMAC_Init_ex(ctx.get(), kAuthKey, sizeof(kAuthKey), EVP_sha1(), nullptr);
  uint8_t data[kRtpLength + 4] = {}, out[20];
  for (auto _ : state) {
    unsigned out_length = 0;
    HMAC_Init_ex(ctx.get(), nullptr, 0, nullptr, nullptr);  // same key: copies the keyed pad digests back
    HMAC_Update(ctx.get(), data, sizeof(data));
    HMAC_Final(ctx.get(), out, &out_length);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_HmacLegacyReinit);

// Keyed inner/outer EVP_MD_CTXs copied into a preallocated context, twice per MAC.
void BM_HmacMdCtxCopy(benchmark::State& state) {
  MdPtr sha1(EVP_MD_fetch(nullptr, "SHA1", nullptr));
  MdCtxPtr inner(EVP_MD_CTX_new()), outer(EVP_MD_CTX_new()), work(EVP_MD_CTX_new());
  uint8_t pad[64];
  std::memset(pad, 0x36, sizeof(pad));
  for (size_t i = 0; i < sizeof(kAuthKey); ++i) pad[i] ^= kAuthKey[i];
  EVP_DigestInit_ex(inner.get(), sha1.get(), nullptr);
  EVP_DigestUpdate(inner.get(), pad, sizeof(pad));
  std::memset(pad, 0x5c, sizeof(pad));
  for (size_t i = 0; i < sizeof(kAuthKey); ++i) pad[i] ^= kAuthKey[i];
  EVP_DigestInit_ex(outer.get(), sha1.get(), nullptr);
  EVP_DigestUpdate(outer.get(), pad, sizeof(pad));
  EVP_DigestInit_ex(work.get(), sha1.get(), nullptr);
  uint8_t data[kRtpLength + 4] = {}, digest[20], out[20];
  for (auto _ : state) {
    unsigned length = 0;
    EVP_MD_CTX_copy_ex(work.get(), inner.get());
    EVP_DigestUpdate(work.get(), data, sizeof(data));
    EVP_DigestFinal_ex(work.get(), digest, &length);
    EVP_MD_CTX_copy_ex(work.get(), outer.get());
    EVP_DigestUpdate(work.get(), digest, sizeof(digest));
    EVP_DigestFinal_ex(work.get(), out, &length);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_HmacMdCtxCopy);

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

// ---- The per-packet table ----
// Every row does the same packet: a 12-byte RTP header and a 100-byte payload, protected and
// unprotected (the raw rows: sealed and opened with the same AAD and IV). Rows run in rounds,
// each round in a rotated order, for about kBatchNs of CPU each; ratios are taken within a
// round, so a neighbour's build slows numerator and denominator alike, then the median of
// the rounds is reported.

constexpr size_t kHeader = 12;
constexpr double kBatchNs = 8e6;

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// The 12-byte IV (GCM) or the 16-byte counter block (CTR) of the n-th packet.
void packet_iv(uint8_t* iv, size_t length, uint32_t n) {
  std::memset(iv, 0x5a, length);
  for (int i = 0; i < 4; ++i)
    iv[length - (length == 16 ? 6 : 4) + i] ^= static_cast<uint8_t>(n >> (24 - 8 * i));
}

CipherPtr fetch_cipher(const char* name) {
  CipherPtr cipher(EVP_CIPHER_fetch(nullptr, name, nullptr));
  if (!cipher) std::abort();
  return cipher;
}

CipherCtxPtr keyed_evp(const CipherPtr& cipher, const uint8_t* key, bool encrypt) {
  CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  if (!ctx || EVP_CipherInit_ex(ctx.get(), cipher.get(), nullptr, key, nullptr, encrypt ? 1 : 0) != 1)
    std::abort();
  return ctx;
}

// Raw AES-GCM with plain EVP, keyed once, one IV per packet: the floor the backend is held to.
// The tag goes through EVP_CIPHER_CTX_ctrl or, with `params`, EVP_CIPHER_CTX_get/set_params.
class RawGcmEvp {
 public:
  RawGcmEvp(const char* name, size_t key_length, bool params) : cipher_(fetch_cipher(name)), params_(params) {
    std::vector<uint8_t> key(key_length, 0x42);
    seal_ = keyed_evp(cipher_, key.data(), true);
    open_ = keyed_evp(cipher_, key.data(), false);
  }

  bool packet() {
    uint8_t iv[12];
    packet_iv(iv, sizeof(iv), ++n_);
    uint8_t* tag = buf_ + kRtpLength;
    uint8_t none[16];
    int w = 0;
    if (EVP_EncryptInit_ex(seal_.get(), nullptr, nullptr, nullptr, iv) != 1 ||
        EVP_EncryptUpdate(seal_.get(), nullptr, &w, buf_, kHeader) != 1 ||
        EVP_EncryptUpdate(seal_.get(), buf_ + kHeader, &w, buf_ + kHeader, kPayload) != 1 ||
        EVP_EncryptFinal_ex(seal_.get(), none, &w) != 1 || !tag_io(seal_.get(), tag, false))
      return false;
    return EVP_DecryptInit_ex(open_.get(), nullptr, nullptr, nullptr, iv) == 1 &&
           tag_io(open_.get(), tag, true) &&
           EVP_DecryptUpdate(open_.get(), nullptr, &w, buf_, kHeader) == 1 &&
           EVP_DecryptUpdate(open_.get(), buf_ + kHeader, &w, buf_ + kHeader, kPayload) == 1 &&
           EVP_DecryptFinal_ex(open_.get(), none, &w) == 1;
  }

 private:
  bool tag_io(EVP_CIPHER_CTX* ctx, uint8_t* tag, bool set) {
    if (!params_)
      return EVP_CIPHER_CTX_ctrl(ctx, set ? EVP_CTRL_AEAD_SET_TAG : EVP_CTRL_AEAD_GET_TAG, 16, tag) == 1;
    OSSL_PARAM p[] = {OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, 16), OSSL_PARAM_END};
    return (set ? EVP_CIPHER_CTX_set_params(ctx, p) : EVP_CIPHER_CTX_get_params(ctx, p)) == 1;
  }

  CipherPtr cipher_;
  bool params_;
  CipherCtxPtr seal_, open_;
  uint32_t n_ = 0;
  uint8_t buf_[kRtpLength + 16] = {};
};

// The same through the backend's CipherContext on the provider's functions (openssl_cipher.h).
class RawGcmProvider {
 public:
  explicit RawGcmProvider(size_t key_length) {
    std::vector<uint8_t> key(key_length, 0x42);
    const rtce::srtp_openssl::CipherAlgorithm& gcm = rtce::srtp_openssl::aes_gcm(key_length);
    rtce::srtp_openssl::set_cipher_path(rtce::srtp_openssl::CipherPath::provider);
    seal_ = rtce::srtp_openssl::CipherContext(gcm, key.data(), true);
    open_ = rtce::srtp_openssl::CipherContext(gcm, key.data(), false);
  }
  bool packet() {
    uint8_t iv[12];
    packet_iv(iv, sizeof(iv), ++n_);
    uint8_t* tag = buf_ + kRtpLength;
    return seal_.set_iv(iv) && seal_.aad(buf_, kHeader) && seal_.crypt(buf_ + kHeader, kPayload) &&
           seal_.finish() && seal_.get_tag(tag, 16) && open_.set_iv(iv) && open_.set_tag(tag, 16) &&
           open_.aad(buf_, kHeader) && open_.crypt(buf_ + kHeader, kPayload) && open_.finish();
  }

 private:
  rtce::srtp_openssl::CipherContext seal_, open_;
  uint32_t n_ = 0;
  uint8_t buf_[kRtpLength + 16] = {};
};

// AES-128-GCM over 16 KiB per IV, reported per 2 x 112 bytes: the AES and GHASH work of one
// seal + open with no per-call cost at all.
class BulkGcm {
 public:
  static constexpr size_t kBytes = 16384;
  static constexpr double kScale = 2.0 * kRtpLength / kBytes;
  BulkGcm() : cipher_(fetch_cipher("AES-128-GCM")), buf_(kBytes) {
    const uint8_t key[16] = {0x42};
    ctx_ = keyed_evp(cipher_, key, true);
  }
  bool packet() {
    uint8_t iv[12], tag[16];
    packet_iv(iv, sizeof(iv), ++n_);
    int w = 0;
    return EVP_EncryptInit_ex(ctx_.get(), nullptr, nullptr, nullptr, iv) == 1 &&
           EVP_EncryptUpdate(ctx_.get(), buf_.data(), &w, buf_.data(), kBytes) == 1 &&
           EVP_EncryptFinal_ex(ctx_.get(), tag, &w) == 1;
  }

 private:
  CipherPtr cipher_;
  CipherCtxPtr ctx_;
  std::vector<uint8_t> buf_;
  uint32_t n_ = 0;
};

// Raw AES_CM_128_HMAC_SHA1_80 work with EVP, keyed once: AES-128-CTR with one IV per packet
// and HMAC-SHA1 from precomputed pad states, over the packet + ROC, on both sides.
class RawCmEvp {
 public:
  RawCmEvp() : cipher_(fetch_cipher("AES-128-CTR")) {
    const uint8_t key[16] = {0x42};
    ctx_ = keyed_evp(cipher_, key, true);
    uint8_t pad[64];
    std::memset(pad, 0x36, sizeof(pad));
    for (size_t i = 0; i < sizeof(kAuthKey); ++i) pad[i] ^= kAuthKey[i];
    SHA1_Init(&inner_);
    SHA1_Update(&inner_, pad, sizeof(pad));
    std::memset(pad, 0x5c, sizeof(pad));
    for (size_t i = 0; i < sizeof(kAuthKey); ++i) pad[i] ^= kAuthKey[i];
    SHA1_Init(&outer_);
    SHA1_Update(&outer_, pad, sizeof(pad));
  }

  bool packet() {
    uint8_t iv[16];
    packet_iv(iv, sizeof(iv), ++n_);
    uint8_t tag[20];
    if (!ctr(iv)) return false;
    mac(tag);
    std::memcpy(buf_ + kRtpLength, tag, 10);
    mac(tag);
    return CRYPTO_memcmp(tag, buf_ + kRtpLength, 10) == 0 && ctr(iv);
  }

 private:
  bool ctr(const uint8_t* iv) {
    int w = 0;
    return EVP_EncryptInit_ex(ctx_.get(), nullptr, nullptr, nullptr, iv) == 1 &&
           EVP_EncryptUpdate(ctx_.get(), buf_ + kHeader, &w, buf_ + kHeader, kPayload) == 1;
  }
  void mac(uint8_t out[20]) {
    const uint8_t roc[4] = {};
    uint8_t digest[20];
    SHA_CTX ctx = inner_;
    SHA1_Update(&ctx, buf_, kRtpLength);
    SHA1_Update(&ctx, roc, sizeof(roc));
    SHA1_Final(digest, &ctx);
    ctx = outer_;
    SHA1_Update(&ctx, digest, sizeof(digest));
    SHA1_Final(out, &ctx);
  }

  CipherPtr cipher_;
  CipherCtxPtr ctx_;
  SHA_CTX inner_{}, outer_{};
  uint32_t n_ = 0;
  uint8_t buf_[kRtpLength + 10] = {};
};

// A fresh RTP packet with sequence number `seq` in `buf`.
void fill_rtp(uint8_t* buf, uint16_t seq) {
  const uint8_t header[kHeader] = {
      0x80, 111, static_cast<uint8_t>(seq >> 8), static_cast<uint8_t>(seq), 0, 0, 0x10, 0, 0x12, 0x34,
      0x56, 0x78};
  std::memcpy(buf, header, kHeader);
  for (size_t i = kHeader; i < kRtpLength; ++i) buf[i] = static_cast<uint8_t>(i);
}

// SrtpSession protect + unprotect, with the cipher path in force when it was built.
class BackendPair {
 public:
  explicit BackendPair(SrtpProfile profile)
      : sender_(profile, SrtpSession::Direction::outbound, key_salt_for(profile, 7)),
        receiver_(profile, SrtpSession::Direction::inbound, key_salt_for(profile, 7)) {}
  bool packet() {
    fill_rtp(buf_, ++seq_);
    size_t len = kRtpLength;
    return sender_.protect_rtp(buf_, len, sizeof(buf_)) == SrtpError::ok &&
           receiver_.unprotect_rtp(buf_, len) == SrtpError::ok && len == kRtpLength;
  }

 private:
  SrtpSession sender_, receiver_;
  uint16_t seq_ = 0;
  uint8_t buf_[kRtpLength + SrtpSession::max_trailer] = {};
};

// libsrtp2 itself (the policy the libsrtp backend and the tests' oracle use).
class LibsrtpPair {
 public:
  explicit LibsrtpPair(SrtpProfile profile) {
    // Once; in the libsrtp-backend binary the backend has already called it, and a second
    // srtp_init reports an error there, so only srtp_create's status counts.
    [[maybe_unused]] static const srtp_err_status_t init = srtp_init();
    std::vector<uint8_t> key = key_salt_for(profile, 7);
    srtp_policy_t out = rtce::libsrtp_policy(profile, SrtpSession::Direction::outbound, key);
    srtp_policy_t in = rtce::libsrtp_policy(profile, SrtpSession::Direction::inbound, key);
    srtp_t sender = nullptr, receiver = nullptr;
    if (srtp_create(&sender, &out) != srtp_err_status_ok || srtp_create(&receiver, &in) != srtp_err_status_ok)
      std::abort();
    sender_.reset(sender);
    receiver_.reset(receiver);
  }
  bool packet() {
    fill_rtp(buf_, ++seq_);
    int len = static_cast<int>(kRtpLength);
    return srtp_protect(sender_.get(), buf_, &len) == srtp_err_status_ok &&
           srtp_unprotect(receiver_.get(), buf_, &len) == srtp_err_status_ok &&
           len == static_cast<int>(kRtpLength);
  }

 private:
  struct Dealloc {
    void operator()(srtp_t s) const { srtp_dealloc(s); }
  };
  std::unique_ptr<srtp_ctx_t_, Dealloc> sender_, receiver_;
  uint16_t seq_ = 0;
  uint8_t buf_[kRtpLength + SRTP_MAX_TRAILER_LEN] = {};
};

struct Row {
  Row(std::string n, std::function<bool()> p, double s = 1.0)
      : name(std::move(n)), packet(std::move(p)), scale(s) {}
  std::string name;
  std::function<bool()> packet;
  double scale = 1.0;  // per call -> per packet
  size_t batch = 0;
  std::vector<double> ns, vs_floor, vs_bulk;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Shared so the closures outlive nothing: every row's state lives until the table is printed.
template <typename T, typename... Args>
std::function<bool()> row_of(std::vector<std::shared_ptr<void>>& keep, Args&&... args) {
  auto object = std::make_shared<T>(std::forward<Args>(args)...);
  keep.push_back(object);
  return [object] { return object->packet(); };
}

std::string first_line_with(const char* path, const char* key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "?";
}

// The 1, 5 and 15 minute load averages: the other builds on a shared machine show here.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

void print_table(int rounds) {
  using rtce::srtp_openssl::CipherPath;
  using rtce::srtp_openssl::set_cipher_path;
  std::vector<std::shared_ptr<void>> keep;
  std::vector<Row> rows;
  // rows[0] is the floor, rows[1] the bulk work: the two ratios' denominators.
  rows.push_back({"raw AES-128-GCM seal + open, EVP keyed once, IV per packet, tag by ctrl (**the floor**)",
                  row_of<RawGcmEvp>(keep, "AES-128-GCM", size_t{16}, false)});
  rows.push_back({"AES-128-GCM bulk rate for 2 × 112 bytes (16 KiB per IV: no per-call cost)",
                  row_of<BulkGcm>(keep), BulkGcm::kScale});
  rows.push_back({"raw AES-128-GCM seal + open, EVP, tag by EVP_CIPHER_CTX_get/set_params",
                  row_of<RawGcmEvp>(keep, "AES-128-GCM", size_t{16}, true)});
  rows.push_back({"raw AES-128-GCM seal + open, provider functions (openssl_cipher.h)",
                  row_of<RawGcmProvider>(keep, size_t{16})});
  const bool openssl_backend = RTCE_SRTP_BENCH_OPENSSL_BACKEND != 0;
  const char* backend = openssl_backend ? "OpenSSL backend" : "libsrtp backend";
  for (SrtpProfile profile :
       {SrtpProfile::aead_aes_128_gcm, SrtpProfile::aead_aes_256_gcm, SrtpProfile::aes128_cm_sha1_80}) {
    const std::string name = rtce::srtp_profile_name(profile) + 5;
    if (profile == SrtpProfile::aead_aes_256_gcm) {
      rows.push_back({"raw AES-256-GCM seal + open, EVP keyed once, IV per packet, tag by ctrl",
                      row_of<RawGcmEvp>(keep, "AES-256-GCM", size_t{32}, false)});
    } else if (profile == SrtpProfile::aes128_cm_sha1_80) {
      rows.push_back(
          {"raw AES-128-CTR + HMAC-SHA1 both ways, EVP keyed once, IV per packet", row_of<RawCmEvp>(keep)});
    }
    set_cipher_path(CipherPath::provider);
    rows.push_back({std::string(backend) + " " + name + " protect + unprotect" +
                        (openssl_backend ? " (provider functions: the default)" : ""),
                    row_of<BackendPair>(keep, profile)});
    if (openssl_backend) {
      set_cipher_path(CipherPath::evp);
      rows.push_back({std::string(backend) + " " + name +
                          " protect + unprotect (EVP path: the calls before this change)",
                      row_of<BackendPair>(keep, profile)});
      set_cipher_path(CipherPath::provider);
    }
    rows.push_back({std::string(srtp_get_version_string()) + " " + name + " protect + unprotect",
                    row_of<LibsrtpPair>(keep, profile)});
  }

  // Batch sizes: about kBatchNs of CPU per row per round.
  for (Row& row : rows) {
    const double start = thread_cpu_ns();
    for (int i = 0; i < 2000; ++i)
      if (!row.packet()) std::abort();
    const double per_call = (thread_cpu_ns() - start) / 2000;
    row.batch = static_cast<size_t>(std::max(200.0, kBatchNs / per_call));
  }
  const std::string load_before = load_average();
  for (int round = 0; round < rounds; ++round) {
    std::vector<double> ns(rows.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      Row& row = rows[(k + static_cast<size_t>(round)) % rows.size()];
      const double start = thread_cpu_ns();
      for (size_t i = 0; i < row.batch; ++i)
        if (!row.packet()) std::abort();
      ns[static_cast<size_t>(&row - rows.data())] =
          (thread_cpu_ns() - start) / static_cast<double>(row.batch) * row.scale;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].ns.push_back(ns[i]);
      rows[i].vs_floor.push_back(ns[i] / ns[0]);
      rows[i].vs_bulk.push_back(ns[i] / ns[1]);
    }
  }

  utsname uts{};
  uname(&uts);
  std::printf(
      "\n### SRTP per-packet cost: protect + unprotect of one RTP packet (12-byte header, %zu-byte "
      "payload)\n\n",
      kPayload);
  std::printf(
      "Machine: %s, %ld CPUs, kernel %s; load average %s at start, %s at the end; %s; %s; SrtpSession "
      "backend: %s.\n",
      first_line_with("/proc/cpuinfo", "model name").c_str(), sysconf(_SC_NPROCESSORS_ONLN), uts.release,
      load_before.c_str(), load_average().c_str(), OpenSSL_version(OPENSSL_VERSION),
      srtp_get_version_string(), openssl_backend ? "openssl" : "libsrtp");
  std::printf(
      "Thread CPU time; %d rounds, each running every row for ~%.0f ms in a rotated order; medians over "
      "rounds, ratios taken within each round.\n\n",
      rounds, kBatchNs / 1e6);
  std::printf("| what | ns/packet | × floor | × bulk AES-GCM work |\n|---|---:|---:|---:|\n");
  for (const Row& row : rows)
    std::printf("| %s | %.0f | %.2f | %.2f |\n", row.name.c_str(), median(row.ns), median(row.vs_floor),
                median(row.vs_bulk));
  for (const Row& row : rows) {
    if (row.name.find(" backend AEAD_AES_128_GCM") == std::string::npos) continue;
    std::printf("\nTarget ≤ 3× raw AES-GCM, %s: %.2f× the floor (%s), %.2f× the bulk AES-GCM work (%s).",
                row.name.c_str(), median(row.vs_floor), median(row.vs_floor) <= 3 ? "met" : "not met",
                median(row.vs_bulk), median(row.vs_bulk) <= 3 ? "met" : "not met");
  }
  std::printf("\n\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool table = true, rest = true;
  int rounds = 21;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--table-only") {
      rest = false;
    } else if (arg == "--no-table") {
      table = false;
    } else if (arg.rfind("--rounds=", 0) == 0) {
      rounds = std::max(1, std::atoi(arg.c_str() + 9));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (table) print_table(rounds);
  if (!rest) return 0;
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
  report_creation(SrtpProfile::aead_aes_256_gcm, false);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
