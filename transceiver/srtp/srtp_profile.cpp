// srtp_profile.cpp — facts about the negotiated SRTP protection profiles and error names,
// shared by both SrtpSession backends (srtp_session_openssl.cpp, srtp_session_libsrtp.cpp).
#include "common/vocab.h"
#include "transceiver/srtp/srtp_session.h"

namespace rtce {
namespace {

#define RTCE_SRTP_LABEL_(name, label) #label,
constexpr const char* kSrtpProfileNames[] = {RTCE_SRTP_PROFILES(RTCE_SRTP_LABEL_)};
#undef RTCE_SRTP_LABEL_
#define RTCE_SRTP_LABEL_(name) #name,
constexpr const char* kSrtpErrorNames[] = {RTCE_SRTP_ERRORS(RTCE_SRTP_LABEL_)};
#undef RTCE_SRTP_LABEL_

}  // namespace

size_t srtp_master_key_length(SrtpProfile) { return 16; }

size_t srtp_master_salt_length(SrtpProfile profile) {
  return profile == SrtpProfile::aead_aes_128_gcm ? 12 : 14;
}

const char* srtp_profile_name(SrtpProfile profile) { return vocab_name(kSrtpProfileNames, profile); }

size_t srtp_rtp_trailer_length(SrtpProfile profile) {
  return profile == SrtpProfile::aead_aes_128_gcm ? 16 : 10;
}

size_t srtp_rtcp_trailer_length(SrtpProfile profile) {
  return profile == SrtpProfile::aead_aes_128_gcm ? 16 + 4 : 4 + 10;
}

const char* srtp_error_name(SrtpError error) { return vocab_name(kSrtpErrorNames, error); }

}  // namespace rtce
