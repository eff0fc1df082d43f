// srtp_profile.cpp — facts about the negotiated SRTP protection profiles and error names,
// shared by both SrtpSession backends (srtp_session_openssl.cpp, srtp_session_libsrtp.cpp).
#include "transceiver/srtp/srtp_session.h"

namespace rtce {

size_t srtp_master_key_length(SrtpProfile) { return 16; }

size_t srtp_master_salt_length(SrtpProfile profile) {
  return profile == SrtpProfile::aead_aes_128_gcm ? 12 : 14;
}

const char* srtp_profile_name(SrtpProfile profile) {
  return profile == SrtpProfile::aead_aes_128_gcm ? "SRTP_AEAD_AES_128_GCM" : "SRTP_AES128_CM_SHA1_80";
}

size_t srtp_rtp_trailer_length(SrtpProfile profile) {
  return profile == SrtpProfile::aead_aes_128_gcm ? 16 : 10;
}

size_t srtp_rtcp_trailer_length(SrtpProfile profile) {
  return profile == SrtpProfile::aead_aes_128_gcm ? 16 + 4 : 4 + 10;
}

const char* srtp_error_name(SrtpError error) {
  switch (error) {
    case SrtpError::ok: return "ok";
    case SrtpError::auth_failed: return "auth_failed";
    case SrtpError::replay: return "replay";
    case SrtpError::bad_packet: return "bad_packet";
    case SrtpError::no_space: return "no_space";
    case SrtpError::other: return "other";
  }
  return "other";
}

}  // namespace rtce
