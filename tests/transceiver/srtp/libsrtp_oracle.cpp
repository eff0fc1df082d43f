// libsrtp_oracle.cpp — libsrtp2 policy setup for LibsrtpOracle, the same policy the libsrtp
// backend of SrtpSession uses.
#include "libsrtp_oracle.h"

#include <srtp2/srtp.h>

#include <stdexcept>

#include "transceiver/srtp/libsrtp_policy.h"

namespace rtce::testing {

LibsrtpOracle::LibsrtpOracle(SrtpProfile profile, SrtpSession::Direction direction,
                             std::span<const uint8_t> key_salt) {
  static const srtp_err_status_t init = srtp_init();
  if (init != srtp_err_status_ok) throw std::runtime_error("srtp_init failed");
  srtp_policy_t policy = libsrtp_policy(profile, direction, key_salt);
  if (srtp_create(&session_, &policy) != srtp_err_status_ok) throw std::runtime_error("srtp_create failed");
}

LibsrtpOracle::~LibsrtpOracle() { srtp_dealloc(session_); }

namespace {

template <typename Call>
int in_place(std::vector<uint8_t>& packet, size_t room, Call call) {
  const size_t plain = packet.size();
  packet.resize(plain + room);
  int len = static_cast<int>(plain);
  const int status = call(packet.data(), &len);
  packet.resize(status == srtp_err_status_ok ? static_cast<size_t>(len) : plain);
  return status;
}

}  // namespace

int LibsrtpOracle::protect_rtp(std::vector<uint8_t>& packet) {
  return in_place(packet, SRTP_MAX_TRAILER_LEN,
                  [&](uint8_t* p, int* len) { return srtp_protect(session_, p, len); });
}
int LibsrtpOracle::protect_rtcp(std::vector<uint8_t>& packet) {
  return in_place(packet, SRTP_MAX_TRAILER_LEN,
                  [&](uint8_t* p, int* len) { return srtp_protect_rtcp(session_, p, len); });
}
int LibsrtpOracle::unprotect_rtp(std::vector<uint8_t>& packet) {
  return in_place(packet, 0, [&](uint8_t* p, int* len) { return srtp_unprotect(session_, p, len); });
}
int LibsrtpOracle::unprotect_rtcp(std::vector<uint8_t>& packet) {
  return in_place(packet, 0, [&](uint8_t* p, int* len) { return srtp_unprotect_rtcp(session_, p, len); });
}

}  // namespace rtce::testing
