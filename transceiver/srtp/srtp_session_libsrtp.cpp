// srtp_session_libsrtp.cpp — the libsrtp2 backend of SrtpSession (RTCE_SRTP_BACKEND=libsrtp):
// policy setup and the per-packet calls with their error mapping. Debian's libsrtp2 is built
// on NSS, whose per-context cost grows with the number of live contexts (docs/benchmarks-srtp.md),
// so the default backend is srtp_session_openssl.cpp; this one stays as the reference.
#include <srtp2/srtp.h>

#include <climits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "transceiver/srtp/srtp_session.h"

namespace rtce {
namespace {

void init_libsrtp_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (srtp_err_status_t status = srtp_init(); status != srtp_err_status_ok) {
      throw std::runtime_error("srtp_init failed: status " + std::to_string(status));
    }
  });
}

SrtpError map_status(srtp_err_status_t status) {
  switch (status) {
    case srtp_err_status_ok: return SrtpError::ok;
    case srtp_err_status_auth_fail: return SrtpError::auth_failed;
    case srtp_err_status_replay_fail:
    case srtp_err_status_replay_old: return SrtpError::replay;
    case srtp_err_status_bad_param:
    case srtp_err_status_parse_err:
    case srtp_err_status_bad_mki: return SrtpError::bad_packet;
    default: return SrtpError::other;
  }
}

constexpr size_t kRtpHeaderLength = 12;
constexpr size_t kRtcpHeaderLength = 8;

// libsrtp reads the header before authenticating; reject what is not RTP version 2 early.
bool plausible_rtp(const uint8_t* buf, size_t len, size_t min_len) {
  return buf != nullptr && len >= min_len && len <= INT_MAX && (buf[0] >> 6) == 2;
}

}  // namespace

struct SrtpSession::Impl {
  srtp_t session = nullptr;
  explicit Impl(srtp_t s) : session(s) {}
  ~Impl() { srtp_dealloc(session); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

SrtpSession::SrtpSession(SrtpProfile profile, Direction direction, std::span<const uint8_t> key_salt)
    : profile_(profile), direction_(direction) {
  const size_t expected = srtp_master_key_length(profile) + srtp_master_salt_length(profile);
  if (key_salt.size() != expected) {
    throw std::runtime_error(std::string("SRTP key material for ") + srtp_profile_name(profile) +
                             " must be " + std::to_string(expected) + " bytes, got " +
                             std::to_string(key_salt.size()));
  }
  init_libsrtp_once();

  srtp_policy_t policy{};
  if (profile == SrtpProfile::aead_aes_128_gcm) {
    srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp);
    srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp);
  } else {
    srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp);
    srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp);
  }
  policy.ssrc.type = direction == Direction::inbound ? ssrc_any_inbound : ssrc_any_outbound;
  policy.ssrc.value = 0;
  // libsrtp copies the key during srtp_create; it only needs to be readable here.
  policy.key = const_cast<unsigned char*>(key_salt.data());
  policy.window_size = 0;  // libsrtp's default window of 128 packets
  policy.allow_repeat_tx = 0;
  policy.next = nullptr;

  srtp_t session = nullptr;
  if (srtp_err_status_t status = srtp_create(&session, &policy); status != srtp_err_status_ok) {
    throw std::runtime_error("srtp_create failed: status " + std::to_string(status));
  }
  impl_ = std::make_unique<Impl>(session);
}

SrtpSession::~SrtpSession() = default;
SrtpSession::SrtpSession(SrtpSession&& other) noexcept = default;
SrtpSession& SrtpSession::operator=(SrtpSession&& other) noexcept = default;

SrtpError SrtpSession::protect_rtp(uint8_t* buf, size_t& len, size_t capacity) {
  if (impl_ == nullptr || direction_ != Direction::outbound) return SrtpError::other;
  if (!plausible_rtp(buf, len, kRtpHeaderLength)) return SrtpError::bad_packet;
  if (capacity < len || capacity - len < srtp_rtp_trailer_length(profile_)) return SrtpError::no_space;
  int length = static_cast<int>(len);
  SrtpError error = map_status(srtp_protect(impl_->session, buf, &length));
  if (error == SrtpError::ok) len = static_cast<size_t>(length);
  return error;
}

SrtpError SrtpSession::protect_rtcp(uint8_t* buf, size_t& len, size_t capacity) {
  if (impl_ == nullptr || direction_ != Direction::outbound) return SrtpError::other;
  if (!plausible_rtp(buf, len, kRtcpHeaderLength)) return SrtpError::bad_packet;
  if (capacity < len || capacity - len < srtp_rtcp_trailer_length(profile_)) return SrtpError::no_space;
  int length = static_cast<int>(len);
  SrtpError error = map_status(srtp_protect_rtcp(impl_->session, buf, &length));
  if (error == SrtpError::ok) len = static_cast<size_t>(length);
  return error;
}

SrtpError SrtpSession::unprotect_rtp(uint8_t* buf, size_t& len) {
  if (impl_ == nullptr || direction_ != Direction::inbound) return SrtpError::other;
  if (!plausible_rtp(buf, len, kRtpHeaderLength + srtp_rtp_trailer_length(profile_))) {
    return SrtpError::bad_packet;
  }
  int length = static_cast<int>(len);
  SrtpError error = map_status(srtp_unprotect(impl_->session, buf, &length));
  if (error == SrtpError::ok) len = static_cast<size_t>(length);
  return error;
}

SrtpError SrtpSession::unprotect_rtcp(uint8_t* buf, size_t& len) {
  if (impl_ == nullptr || direction_ != Direction::inbound) return SrtpError::other;
  if (!plausible_rtp(buf, len, kRtcpHeaderLength + srtp_rtcp_trailer_length(profile_))) {
    return SrtpError::bad_packet;
  }
  int length = static_cast<int>(len);
  SrtpError error = map_status(srtp_unprotect_rtcp(impl_->session, buf, &length));
  if (error == SrtpError::ok) len = static_cast<size_t>(length);
  return error;
}

}  // namespace rtce
