// srtp_profile.cpp — facts about the negotiated SRTP protection profiles and error names,
// shared by both SrtpSession backends (srtp_session_openssl.cpp, srtp_session_libsrtp.cpp).
#include <stdexcept>
#include <string>

#include "common/vocab.h"
#include "transceiver/srtp/srtp_session.h"

namespace rtce {
namespace {

#define RTCE_SRTP_LABEL_(name, label) #label,
constexpr const char* kSrtpProfileNames[] = {RTCE_SRTP_PROFILES(RTCE_SRTP_LABEL_)};
#undef RTCE_SRTP_LABEL_
constexpr const char* kSrtpErrorNames[] = {RTCE_SRTP_ERRORS(RTCE_VOCAB_LABEL)};

}  // namespace

size_t srtp_master_key_length(SrtpProfile profile) {
  return profile == SrtpProfile::aead_aes_256_gcm ? 32 : 16;
}

size_t srtp_master_salt_length(SrtpProfile profile) {
  return profile == SrtpProfile::aes128_cm_sha1_80 ? 14 : 12;
}

const char* srtp_profile_name(SrtpProfile profile) { return vocab_name(kSrtpProfileNames, profile); }

size_t srtp_rtp_trailer_length(SrtpProfile profile) {
  return profile == SrtpProfile::aes128_cm_sha1_80 ? 10 : 16;
}

size_t srtp_rtcp_trailer_length(SrtpProfile profile) {
  return profile == SrtpProfile::aes128_cm_sha1_80 ? 4 + 10 : 16 + 4;
}

void check_srtp_key_material(SrtpProfile profile, size_t size) {
  const size_t expected = srtp_master_key_length(profile) + srtp_master_salt_length(profile);
  if (size != expected) {
    throw std::runtime_error(std::string("SRTP key material for ") + srtp_profile_name(profile) +
                             " must be " + std::to_string(expected) + " bytes, got " + std::to_string(size));
  }
}

const char* srtp_error_name(SrtpError error) { return vocab_name(kSrtpErrorNames, error); }

}  // namespace rtce
