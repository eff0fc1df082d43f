// srtp_session.h — one direction of SRTP/SRTCP for a DTLS-SRTP session, keyed with a master
// key || master salt from the DTLS key exporter. Packets are transformed in place; nothing
// allocates per packet. Two backends implement it, chosen by the CMake option
// RTCE_SRTP_BACKEND: srtp_session_openssl.cpp (default, OpenSSL libcrypto) and
// srtp_session_libsrtp.cpp (libsrtp2, kept as the reference the tests compare against).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/vocab.h"

namespace rtce {

// The DTLS-SRTP protection profiles SrtpSession implements (RFC 5764, RFC 7714):
// X(enumerator, name in the DTLS use_srtp extension). Which of them DTLS offers is its own
// configuration (DtlsConfig::srtp_profiles).
#define RTCE_SRTP_PROFILES(X)                  \
  X(aes128_cm_sha1_80, SRTP_AES128_CM_SHA1_80) \
  X(aead_aes_128_gcm, SRTP_AEAD_AES_128_GCM)   \
  X(aead_aes_256_gcm, SRTP_AEAD_AES_256_GCM)
enum class SrtpProfile { RTCE_SRTP_PROFILES(RTCE_VOCAB_ENUMERATOR) };

size_t srtp_master_key_length(SrtpProfile profile);
size_t srtp_master_salt_length(SrtpProfile profile);
// The name used by the DTLS use_srtp extension, e.g. "SRTP_AES128_CM_SHA1_80".
const char* srtp_profile_name(SrtpProfile profile);
// Bytes protect_rtp / protect_rtcp append to a packet with this profile.
size_t srtp_rtp_trailer_length(SrtpProfile profile);
size_t srtp_rtcp_trailer_length(SrtpProfile profile);
// For the backends: throws std::runtime_error unless `size` is the profile's master key +
// master salt length.
void check_srtp_key_material(SrtpProfile profile, size_t size);

#define RTCE_SRTP_ERRORS(X) X(ok) X(auth_failed) X(replay) X(bad_packet) X(no_space) X(other)
enum class SrtpError { RTCE_SRTP_ERRORS(RTCE_VOCAB_ENUMERATOR) };
const char* srtp_error_name(SrtpError error);

class SrtpSession {
 public:
  enum class Direction { inbound, outbound };

  // key_salt = master key || master salt; throws std::runtime_error on a bad length or a
  // crypto library failure. Replay protection uses a 128-packet window per SSRC. Outbound
  // sessions refuse to protect a sequence number twice (SrtpError::replay): with GCM a
  // repeated index under different bytes would reuse the nonce.
  SrtpSession(SrtpProfile profile, Direction direction, std::span<const uint8_t> key_salt);
  ~SrtpSession();
  SrtpSession(SrtpSession&& other) noexcept;
  SrtpSession& operator=(SrtpSession&& other) noexcept;
  SrtpSession(const SrtpSession&) = delete;
  SrtpSession& operator=(const SrtpSession&) = delete;

  // In place: len grows by the trailer; capacity (bytes usable from buf) must leave room for
  // it, else no_space and the packet is untouched.
  SrtpError protect_rtp(uint8_t* buf, size_t& len, size_t capacity);
  SrtpError protect_rtcp(uint8_t* buf, size_t& len, size_t capacity);
  // In place: on ok, len shrinks to the plain packet. On an error the bytes are unspecified
  // (an AEAD packet that fails authentication has already been decrypted in place).
  SrtpError unprotect_rtp(uint8_t* buf, size_t& len);
  SrtpError unprotect_rtcp(uint8_t* buf, size_t& len);

  SrtpProfile profile() const { return profile_; }
  Direction direction() const { return direction_; }

  // The largest trailer of any supported profile: AEAD_AES_*_GCM on SRTCP appends a
  // 16-byte tag and the 4-byte E flag + SRTCP index (AES-CM: 4 + 10 for SRTCP, 10 for SRTP).
  static constexpr size_t max_trailer = 16 + 4;

 private:
  struct Impl;  // the backend's keys, contexts and per-SSRC state
  std::unique_ptr<Impl> impl_;
  SrtpProfile profile_;
  Direction direction_;
};

}  // namespace rtce
