// srtp_session_openssl.cpp — the default SrtpSession backend (RTCE_SRTP_BACKEND=openssl),
// written on OpenSSL libcrypto: RFC 3711 key derivation, AES_CM_128_HMAC_SHA1_80 SRTP and
// SRTCP, RFC 7714 AEAD_AES_128_GCM / AEAD_AES_256_GCM SRTP and SRTCP, index estimation and a
// 128-packet replay window per SSRC. Every cipher context (RTP and RTCP, one direction) is
// keyed once when the session is built (openssl_cipher.h); a packet only sets an IV, feeds
// the bytes and gets or sets the tag, so nothing allocates or takes a lock per packet. The
// per-SSRC state mirrors libsrtp's ssrc_any streams so the two backends interoperate packet
// for packet (tests/transceiver/srtp/srtp_interop_test.cpp checks it).

// HMAC-SHA1 runs on the low-level SHA1_* functions (deprecated in OpenSSL 3, still shipped):
// copying a precomputed SHA_CTX is a memcpy, whereas EVP_MAC_init / EVP_MD_CTX_copy_ex
// allocate a fresh provider context per packet (docs/benchmarks.md, "SRTP backend cost").
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <array>
#include <climits>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "common/byte_order.h"
#include "transceiver/srtp/openssl_cipher.h"
#include "transceiver/srtp/srtp_session.h"

namespace rtce {
namespace {

constexpr size_t kRtpHeaderLength = 12;
constexpr size_t kRtcpHeaderLength = 8;
constexpr size_t kCmTagLength = 10;
constexpr size_t kGcmTagLength = 16;
constexpr size_t kSrtcpIndexLength = 4;
constexpr size_t kMaxSessionKeyLength = 32;  // AES-256
constexpr size_t kCmSaltLength = 14;
constexpr size_t kGcmSaltLength = 12;
constexpr size_t kAuthKeyLength = 20;
constexpr uint32_t kSrtcpEncryptedFlag = 0x80000000u;
constexpr uint32_t kMaxSrtcpIndex = 0x7fffffffu;
// Streams a session tracks, like libsrtp's ssrc_any: a voice call uses one or two SSRCs per
// direction (media, RTCP-only reporter); a packet from one more SSRC is a bad_packet.
constexpr size_t kMaxSsrcs = 8;
constexpr int64_t kReplayWindow = 128;

// RFC 3711 §4.3.1 labels.
enum Label : uint8_t {
  kRtpEncryption = 0,
  kRtpAuthentication = 1,
  kRtpSalt = 2,
  kRtcpEncryption = 3,
  kRtcpAuthentication = 4,
  kRtcpSalt = 5
};

// XORs the low `bytes` bytes of v, big-endian, into p.
void xor_be(uint8_t* p, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[bytes - 1 - i] ^= static_cast<uint8_t>(v >> (8 * i));
}

using srtp_openssl::CipherContext;

// RFC 3711 §4.3.1 with key_derivation_rate 0: AES-CM under the master key (AES-256 for a 256-bit
// master key, RFC 6188 §5), IV = (master salt XOR label << 48) || 0x0000. RFC 7714 §11 uses it
// unchanged; its 96-bit salt is zero-padded.
class KeyDerivation {
 public:
  KeyDerivation(std::span<const uint8_t> master_key, std::span<const uint8_t> master_salt)
      : ctx_(srtp_openssl::aes_ctr(master_key.size()), master_key.data(), true), salt_(master_salt) {}

  void derive(Label label, uint8_t* out, size_t length) {
    uint8_t iv[16] = {};
    std::memcpy(iv, salt_.data(), salt_.size());
    iv[7] ^= label;
    std::memset(out, 0, length);
    if (!ctx_.set_iv(iv) || !ctx_.crypt(out, length)) throw std::runtime_error("SRTP key derivation failed");
  }

 private:
  CipherContext ctx_;
  std::span<const uint8_t> salt_;
};

// HMAC-SHA1 (RFC 2104) with the key's inner and outer pad blocks absorbed once.
class HmacSha1 {
 public:
  void set_key(const uint8_t* key, size_t length) {
    uint8_t pad[SHA_CBLOCK];
    std::memset(pad, 0x36, sizeof(pad));
    for (size_t i = 0; i < length; ++i) pad[i] ^= key[i];
    SHA1_Init(&inner_);
    SHA1_Update(&inner_, pad, sizeof(pad));
    std::memset(pad, 0x5c, sizeof(pad));
    for (size_t i = 0; i < length; ++i) pad[i] ^= key[i];
    SHA1_Init(&outer_);
    SHA1_Update(&outer_, pad, sizeof(pad));
    OPENSSL_cleanse(pad, sizeof(pad));
  }

  // MAC of data || suffix.
  void mac(const uint8_t* data, size_t length, const uint8_t* suffix, size_t suffix_length,
           uint8_t out[SHA_DIGEST_LENGTH]) const {
    SHA_CTX ctx = inner_;
    SHA1_Update(&ctx, data, length);
    if (suffix_length != 0) SHA1_Update(&ctx, suffix, suffix_length);
    uint8_t inner_digest[SHA_DIGEST_LENGTH];
    SHA1_Final(inner_digest, &ctx);
    ctx = outer_;
    SHA1_Update(&ctx, inner_digest, sizeof(inner_digest));
    SHA1_Final(out, &ctx);
  }

  void wipe() {
    OPENSSL_cleanse(&inner_, sizeof(inner_));
    OPENSSL_cleanse(&outer_, sizeof(outer_));
  }

 private:
  SHA_CTX inner_{};
  SHA_CTX outer_{};
};

// The 128-packet sliding window of RFC 3711 §3.3.2, as libsrtp keeps it: `highest` is the
// largest index accepted so far, bit k of `seen` says whether highest - k was.
struct ReplayWindow {
  uint64_t highest = 0;
  unsigned __int128 seen = 0;

  bool is_replay(int64_t delta) const {
    if (delta > 0) return false;
    if (-delta >= kReplayWindow) return true;
    return ((seen >> -delta) & 1) != 0;
  }

  void accept(int64_t delta) {
    if (delta > 0) {
      seen = delta >= kReplayWindow ? 0 : seen << delta;
      seen |= 1;
      highest += static_cast<uint64_t>(delta);
    } else {
      seen |= static_cast<unsigned __int128>(1) << -delta;
    }
  }
};

// RFC 3711 Appendix A index estimation with libsrtp's start-up rule: until the stream has
// passed sequence number 32768 the ROC is taken as 0, so a stream starting at a high
// sequence number is not guessed into ROC 2^32 - 1. Returns index - highest.
int64_t estimate_rtp_index(uint64_t highest, uint16_t seq, uint64_t& index) {
  if (highest <= 32768) {
    index = seq;
    return int64_t{seq} - static_cast<int64_t>(highest);
  }
  const uint64_t roc = highest >> 16;
  const int32_t s_l = static_cast<int32_t>(highest & 0xffff);
  const int32_t s = seq;
  uint64_t guess_roc = roc;
  int64_t delta = s - s_l;
  if (s_l < 32768) {
    if (s - s_l > 32768) {
      guess_roc = roc - 1;
      delta -= 65536;
    }
  } else if (s_l - 32768 > s) {
    guess_roc = roc + 1;
    delta += 65536;
  }
  index = guess_roc << 16 | seq;
  return delta;
}

struct SsrcState {
  uint32_t ssrc = 0;
  bool in_use = false;
  ReplayWindow rtp;
  ReplayWindow rtcp;            // inbound
  uint32_t last_rtcp_sent = 0;  // outbound: the first SRTCP packet carries index 1, as in libsrtp
};

// RTP header length including CSRCs and the extension, or 0 when it does not fit in `len`.
size_t rtp_header_length(const uint8_t* buf, size_t len) {
  size_t header = kRtpHeaderLength + 4 * size_t{buf[0] & 0x0fu};
  if ((buf[0] & 0x10) != 0) {
    if (header + 4 > len) return 0;
    header += 4 + 4 * size_t{load_be16(buf + header + 2)};
  }
  return header <= len ? header : 0;
}

bool plausible(const uint8_t* buf, size_t len, size_t min_len) {
  return buf != nullptr && len >= min_len && len <= INT_MAX && (buf[0] >> 6) == 2;
}

}  // namespace

struct SrtpSession::Impl {
  bool gcm;
  bool outbound;
  CipherContext rtp_cipher;  // GCM: encrypt or decrypt by direction; AES-CM: always encrypt
  CipherContext rtcp_cipher;
  HmacSha1 rtp_auth;  // AES-CM only
  HmacSha1 rtcp_auth;
  uint8_t rtp_salt[kCmSaltLength] = {};
  uint8_t rtcp_salt[kCmSaltLength] = {};
  std::array<SsrcState, kMaxSsrcs> streams{};

  Impl(SrtpProfile profile, Direction direction, std::span<const uint8_t> key_salt)
      : gcm(profile != SrtpProfile::aes128_cm_sha1_80), outbound(direction == Direction::outbound) {
    const size_t key_length = srtp_master_key_length(profile);  // session keys are as long
    KeyDerivation kdf(key_salt.first(key_length), key_salt.subspan(key_length));
    const size_t salt_length = gcm ? kGcmSaltLength : kCmSaltLength;
    const srtp_openssl::CipherAlgorithm& cipher =
        gcm ? srtp_openssl::aes_gcm(key_length) : srtp_openssl::aes_ctr(key_length);
    uint8_t key[kMaxSessionKeyLength];
    static_assert(kMaxSessionKeyLength >= kAuthKeyLength);
    kdf.derive(kRtpEncryption, key, key_length);
    rtp_cipher = CipherContext(cipher, key, outbound || !gcm);
    kdf.derive(kRtcpEncryption, key, key_length);
    rtcp_cipher = CipherContext(cipher, key, outbound || !gcm);
    if (!gcm) {
      kdf.derive(kRtpAuthentication, key, kAuthKeyLength);
      rtp_auth.set_key(key, kAuthKeyLength);
      kdf.derive(kRtcpAuthentication, key, kAuthKeyLength);
      rtcp_auth.set_key(key, kAuthKeyLength);
    }
    OPENSSL_cleanse(key, sizeof(key));
    kdf.derive(kRtpSalt, rtp_salt, salt_length);
    kdf.derive(kRtcpSalt, rtcp_salt, salt_length);
  }

  ~Impl() {
    rtp_auth.wipe();
    rtcp_auth.wipe();
    OPENSSL_cleanse(rtp_salt, sizeof(rtp_salt));
    OPENSSL_cleanse(rtcp_salt, sizeof(rtcp_salt));
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  SsrcState* find(uint32_t ssrc) {
    for (SsrcState& s : streams)
      if (s.in_use && s.ssrc == ssrc) return &s;
    return nullptr;
  }
  bool has_free_slot() const {
    for (const SsrcState& s : streams)
      if (!s.in_use) return true;
    return false;
  }
  // A fresh state for `ssrc` in a free slot, or nullptr when every slot is taken.
  SsrcState* claim(uint32_t ssrc) {
    for (SsrcState& s : streams) {
      if (s.in_use) continue;
      s = SsrcState{};
      s.ssrc = ssrc;
      s.in_use = true;
      return &s;
    }
    return nullptr;
  }

  // RFC 7714 AEAD seal: ciphertext in place, 16-byte tag to `tag`. Per packet: the IV, the
  // associated data, the payload, final, the tag; the context was keyed when the session was built.
  static bool gcm_seal(CipherContext& ctx, const uint8_t* salt, uint32_t ssrc, uint64_t index48,
                       const uint8_t* aad, size_t aad_length, const uint8_t* aad2, size_t aad2_length,
                       uint8_t* data, size_t length, uint8_t* tag) {
    uint8_t iv[kGcmSaltLength];
    gcm_iv(salt, ssrc, index48, iv);
    return ctx.set_iv(iv) && ctx.aad(aad, aad_length) && ctx.aad(aad2, aad2_length) &&
           ctx.crypt(data, length) && ctx.finish() && ctx.get_tag(tag, kGcmTagLength);
  }

  // False when the tag does not match (the payload is then already decrypted in place).
  static bool gcm_open(CipherContext& ctx, const uint8_t* salt, uint32_t ssrc, uint64_t index48,
                       const uint8_t* aad, size_t aad_length, const uint8_t* aad2, size_t aad2_length,
                       uint8_t* data, size_t length, const uint8_t* tag) {
    uint8_t iv[kGcmSaltLength];
    gcm_iv(salt, ssrc, index48, iv);
    return ctx.set_iv(iv) && ctx.set_tag(tag, kGcmTagLength) && ctx.aad(aad, aad_length) &&
           ctx.aad(aad2, aad2_length) && ctx.crypt(data, length) && ctx.finish();
  }

  // RFC 3711 §4.1.1: IV = (k_s << 16) XOR (SSRC << 64) XOR (index << 16).
  static void cm_iv(const uint8_t* salt, uint32_t ssrc, uint64_t index, uint8_t iv[16]) {
    std::memcpy(iv, salt, kCmSaltLength);
    iv[14] = iv[15] = 0;
    xor_be(iv + 4, ssrc, 4);
    xor_be(iv + 8, index, 6);
  }
  // AES-CM of `data` in place with the keystream of (salt, ssrc, index).
  static bool cm_xor(CipherContext& ctx, const uint8_t* salt, uint32_t ssrc, uint64_t index, uint8_t* data,
                     size_t length) {
    uint8_t iv[16];
    cm_iv(salt, ssrc, index, iv);
    return ctx.set_iv(iv) && ctx.crypt(data, length);
  }
  // RFC 3711 §4.2: the SRTP tag authenticates the packet followed by the ROC.
  void rtp_mac(const uint8_t* buf, size_t length, uint64_t index, uint8_t tag[SHA_DIGEST_LENGTH]) {
    uint8_t roc[4];
    store_be32(roc, static_cast<uint32_t>(index >> 16));
    rtp_auth.mac(buf, length, roc, sizeof(roc), tag);
  }

  // RFC 7714 §8.1 / §9.1: IV = salt XOR (0x0000 || SSRC || ROC-or-0x0000 || SEQ-or-index).
  static void gcm_iv(const uint8_t* salt, uint32_t ssrc, uint64_t index48, uint8_t iv[12]) {
    std::memcpy(iv, salt, kGcmSaltLength);
    xor_be(iv + 2, ssrc, 4);
    xor_be(iv + 6, index48, 6);
  }

  SrtpError protect_rtp(uint8_t* buf, size_t& len, size_t capacity) {
    const size_t header = rtp_header_length(buf, len);
    if (header == 0) return SrtpError::bad_packet;
    const size_t trailer = gcm ? kGcmTagLength : kCmTagLength;
    if (capacity < len || capacity - len < trailer || len + trailer > INT_MAX) return SrtpError::no_space;
    const uint32_t ssrc = load_be32(buf + 8);
    SsrcState* stream = find(ssrc);
    if (stream == nullptr) stream = claim(ssrc);
    if (stream == nullptr) return SrtpError::bad_packet;
    uint64_t index = 0;
    const int64_t delta = estimate_rtp_index(stream->rtp.highest, load_be16(buf + 2), index);
    if (stream->rtp.is_replay(delta)) return SrtpError::replay;
    stream->rtp.accept(delta);

    uint8_t* payload = buf + header;
    const size_t payload_length = len - header;
    if (gcm) {
      if (!gcm_seal(rtp_cipher, rtp_salt, ssrc, index, buf, header, nullptr, 0, payload, payload_length,
                    buf + len))
        return SrtpError::other;
    } else {
      if (!cm_xor(rtp_cipher, rtp_salt, ssrc, index, payload, payload_length)) return SrtpError::other;
      uint8_t tag[SHA_DIGEST_LENGTH];
      rtp_mac(buf, len, index, tag);
      std::memcpy(buf + len, tag, kCmTagLength);
    }
    len += trailer;
    return SrtpError::ok;
  }

  SrtpError unprotect_rtp(uint8_t* buf, size_t& len) {
    const size_t trailer = gcm ? kGcmTagLength : kCmTagLength;
    const size_t body = len - trailer;  // callers checked len >= 12 + trailer
    const size_t header = rtp_header_length(buf, body);
    if (header == 0) return SrtpError::bad_packet;
    const uint32_t ssrc = load_be32(buf + 8);
    SsrcState* stream = find(ssrc);
    SsrcState fresh;  // a new SSRC takes a slot only once a packet authenticates
    if (stream == nullptr && !has_free_slot()) return SrtpError::bad_packet;
    const ReplayWindow& window = stream != nullptr ? stream->rtp : fresh.rtp;
    uint64_t index = 0;
    const int64_t delta = estimate_rtp_index(window.highest, load_be16(buf + 2), index);
    if (window.is_replay(delta)) return SrtpError::replay;

    uint8_t* payload = buf + header;
    const size_t payload_length = body - header;
    if (gcm) {
      if (!gcm_open(rtp_cipher, rtp_salt, ssrc, index, buf, header, nullptr, 0, payload, payload_length,
                    buf + body))
        return SrtpError::auth_failed;
    } else {
      uint8_t tag[SHA_DIGEST_LENGTH];
      rtp_mac(buf, body, index, tag);
      if (CRYPTO_memcmp(tag, buf + body, kCmTagLength) != 0) return SrtpError::auth_failed;
      if (!cm_xor(rtp_cipher, rtp_salt, ssrc, index, payload, payload_length)) return SrtpError::other;
    }
    if (stream == nullptr) stream = claim(ssrc);  // a slot was free above
    stream->rtp.accept(delta);
    len = body;
    return SrtpError::ok;
  }

  SrtpError protect_rtcp(uint8_t* buf, size_t& len, size_t capacity) {
    const size_t trailer = gcm ? kGcmTagLength + kSrtcpIndexLength : kSrtcpIndexLength + kCmTagLength;
    if (capacity < len || capacity - len < trailer || len + trailer > INT_MAX) return SrtpError::no_space;
    const uint32_t ssrc = load_be32(buf + 4);
    SsrcState* stream = find(ssrc);
    if (stream == nullptr) stream = claim(ssrc);
    if (stream == nullptr) return SrtpError::bad_packet;
    if (stream->last_rtcp_sent >= kMaxSrtcpIndex) return SrtpError::other;  // needs rekeying
    const uint32_t index = ++stream->last_rtcp_sent;
    uint8_t e_index[kSrtcpIndexLength];
    store_be32(e_index, kSrtcpEncryptedFlag | index);

    uint8_t* encrypted = buf + kRtcpHeaderLength;
    const size_t encrypted_length = len - kRtcpHeaderLength;
    if (gcm) {
      if (!gcm_seal(rtcp_cipher, rtcp_salt, ssrc, index, buf, kRtcpHeaderLength, e_index, sizeof(e_index),
                    encrypted, encrypted_length, buf + len))
        return SrtpError::other;
      std::memcpy(buf + len + kGcmTagLength, e_index, sizeof(e_index));
    } else {
      if (!cm_xor(rtcp_cipher, rtcp_salt, ssrc, index, encrypted, encrypted_length)) return SrtpError::other;
      std::memcpy(buf + len, e_index, sizeof(e_index));
      uint8_t tag[SHA_DIGEST_LENGTH];
      rtcp_auth.mac(buf, len + sizeof(e_index), nullptr, 0, tag);
      std::memcpy(buf + len + sizeof(e_index), tag, kCmTagLength);
    }
    len += trailer;
    return SrtpError::ok;
  }

  SrtpError unprotect_rtcp(uint8_t* buf, size_t& len) {
    const size_t trailer = gcm ? kGcmTagLength + kSrtcpIndexLength : kSrtcpIndexLength + kCmTagLength;
    const size_t body = len - trailer;  // callers checked len >= 8 + trailer
    const uint8_t* e_index = gcm ? buf + len - kSrtcpIndexLength : buf + body;
    const uint32_t e_and_index = load_be32(e_index);
    const bool encrypted = (e_and_index & kSrtcpEncryptedFlag) != 0;
    const uint32_t index = e_and_index & kMaxSrtcpIndex;
    const uint32_t ssrc = load_be32(buf + 4);
    SsrcState* stream = find(ssrc);
    SsrcState fresh;
    if (stream == nullptr && !has_free_slot()) return SrtpError::bad_packet;
    const ReplayWindow& window = stream != nullptr ? stream->rtcp : fresh.rtcp;
    const int64_t delta = int64_t{index} - static_cast<int64_t>(window.highest);
    if (window.is_replay(delta)) return SrtpError::replay;

    if (gcm) {
      // RFC 7714 §9.2: without the E flag the whole packet is associated data.
      const size_t aad_length = encrypted ? kRtcpHeaderLength : body;
      if (!gcm_open(rtcp_cipher, rtcp_salt, ssrc, index, buf, aad_length, e_index, kSrtcpIndexLength,
                    buf + aad_length, body - aad_length, buf + body))
        return SrtpError::auth_failed;
    } else {
      uint8_t tag[SHA_DIGEST_LENGTH];
      rtcp_auth.mac(buf, body + kSrtcpIndexLength, nullptr, 0, tag);
      if (CRYPTO_memcmp(tag, buf + body + kSrtcpIndexLength, kCmTagLength) != 0)
        return SrtpError::auth_failed;
      if (encrypted) {
        if (!cm_xor(rtcp_cipher, rtcp_salt, ssrc, index, buf + kRtcpHeaderLength, body - kRtcpHeaderLength))
          return SrtpError::other;
      }
    }
    if (stream == nullptr) stream = claim(ssrc);  // a slot was free above
    stream->rtcp.accept(delta);
    len = body;
    return SrtpError::ok;
  }
};

SrtpSession::SrtpSession(SrtpProfile profile, Direction direction, std::span<const uint8_t> key_salt)
    : profile_(profile), direction_(direction) {
  check_srtp_key_material(profile, key_salt.size());
  impl_ = std::make_unique<Impl>(profile, direction, key_salt);
}

SrtpSession::~SrtpSession() = default;
SrtpSession::SrtpSession(SrtpSession&& other) noexcept = default;
SrtpSession& SrtpSession::operator=(SrtpSession&& other) noexcept = default;

SrtpError SrtpSession::protect_rtp(uint8_t* buf, size_t& len, size_t capacity) {
  if (impl_ == nullptr || direction_ != Direction::outbound) return SrtpError::other;
  if (!plausible(buf, len, kRtpHeaderLength)) return SrtpError::bad_packet;
  return impl_->protect_rtp(buf, len, capacity);
}

SrtpError SrtpSession::protect_rtcp(uint8_t* buf, size_t& len, size_t capacity) {
  if (impl_ == nullptr || direction_ != Direction::outbound) return SrtpError::other;
  if (!plausible(buf, len, kRtcpHeaderLength)) return SrtpError::bad_packet;
  return impl_->protect_rtcp(buf, len, capacity);
}

SrtpError SrtpSession::unprotect_rtp(uint8_t* buf, size_t& len) {
  if (impl_ == nullptr || direction_ != Direction::inbound) return SrtpError::other;
  if (!plausible(buf, len, kRtpHeaderLength + srtp_rtp_trailer_length(profile_)))
    return SrtpError::bad_packet;
  return impl_->unprotect_rtp(buf, len);
}

SrtpError SrtpSession::unprotect_rtcp(uint8_t* buf, size_t& len) {
  if (impl_ == nullptr || direction_ != Direction::inbound) return SrtpError::other;
  if (!plausible(buf, len, kRtcpHeaderLength + srtp_rtcp_trailer_length(profile_)))
    return SrtpError::bad_packet;
  return impl_->unprotect_rtcp(buf, len);
}

}  // namespace rtce
