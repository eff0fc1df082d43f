// srtp_session_libsrtp.cpp — the libsrtp2 backend of SrtpSession (RTCE_SRTP_BACKEND=libsrtp):
// policy setup and the per-packet calls with their error mapping. Debian's libsrtp2 is built
// on NSS, whose per-context cost grows with the number of live contexts (docs/benchmarks.md,
// "SRTP backend cost"), so the default backend is srtp_session_openssl.cpp; this one stays as
// the reference.
#include <srtp2/srtp.h>

#include <climits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "transceiver/srtp/libsrtp_policy.h"
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

// One libsrtp call in place: len becomes the new length on success.
SrtpError transform(srtp_err_status_t (*call)(srtp_t, void*, int*), srtp_t session, uint8_t* buf,
                    size_t& len) {
  int length = static_cast<int>(len);
  const SrtpError error = map_status(call(session, buf, &length));
  if (error == SrtpError::ok) len = static_cast<size_t>(length);
  return error;
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
  check_srtp_key_material(profile, key_salt.size());
  init_libsrtp_once();

  srtp_policy_t policy = libsrtp_policy(profile, direction, key_salt);

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
  return transform(srtp_protect, impl_->session, buf, len);
}

SrtpError SrtpSession::protect_rtcp(uint8_t* buf, size_t& len, size_t capacity) {
  if (impl_ == nullptr || direction_ != Direction::outbound) return SrtpError::other;
  if (!plausible_rtp(buf, len, kRtcpHeaderLength)) return SrtpError::bad_packet;
  if (capacity < len || capacity - len < srtp_rtcp_trailer_length(profile_)) return SrtpError::no_space;
  return transform(srtp_protect_rtcp, impl_->session, buf, len);
}

SrtpError SrtpSession::unprotect_rtp(uint8_t* buf, size_t& len) {
  if (impl_ == nullptr || direction_ != Direction::inbound) return SrtpError::other;
  if (!plausible_rtp(buf, len, kRtpHeaderLength + srtp_rtp_trailer_length(profile_))) {
    return SrtpError::bad_packet;
  }
  return transform(srtp_unprotect, impl_->session, buf, len);
}

SrtpError SrtpSession::unprotect_rtcp(uint8_t* buf, size_t& len) {
  if (impl_ == nullptr || direction_ != Direction::inbound) return SrtpError::other;
  if (!plausible_rtp(buf, len, kRtcpHeaderLength + srtp_rtcp_trailer_length(profile_))) {
    return SrtpError::bad_packet;
  }
  return transform(srtp_unprotect_rtcp, impl_->session, buf, len);
}

}  // namespace rtce
