// libsrtp_oracle.h — a direct libsrtp2 session (ssrc_any, 128-packet window, no repeated
// transmissions), the reference the OpenSSL SrtpSession backend is checked against. Separate
// from srtp_session_libsrtp.cpp so a test binary can hold both implementations at once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "transceiver/srtp/srtp_session.h"

struct srtp_ctx_t_;

namespace rtce::testing {

class LibsrtpOracle {
 public:
  // Returns libsrtp's srtp_err_status_t: 0 is ok.
  LibsrtpOracle(SrtpProfile profile, SrtpSession::Direction direction, std::span<const uint8_t> key_salt);
  ~LibsrtpOracle();
  LibsrtpOracle(const LibsrtpOracle&) = delete;
  LibsrtpOracle& operator=(const LibsrtpOracle&) = delete;

  // The packet grows or shrinks in place; the result is libsrtp's status (0 = ok).
  int protect_rtp(std::vector<uint8_t>& packet);
  int protect_rtcp(std::vector<uint8_t>& packet);
  int unprotect_rtp(std::vector<uint8_t>& packet);
  int unprotect_rtcp(std::vector<uint8_t>& packet);

 private:
  ::srtp_ctx_t_* session_ = nullptr;
};

}  // namespace rtce::testing
