// libsrtp_policy.h — the libsrtp2 policy of one SrtpSession direction: the profile's crypto
// for SRTP and SRTCP, any SSRC, libsrtp's default 128-packet window, no repeated
// transmissions. Shared by the libsrtp backend (srtp_session_libsrtp.cpp) and the tests'
// libsrtp oracle, so the reference is keyed exactly like the backend. Needs <srtp2/srtp.h>.
#pragma once

#include <srtp2/srtp.h>

#include <cstdint>
#include <span>

#include "transceiver/srtp/srtp_session.h"

namespace rtce {

// libsrtp copies the key during srtp_create; `key_salt` only needs to outlive that call.
inline srtp_policy_t libsrtp_policy(SrtpProfile profile, SrtpSession::Direction direction,
                                    std::span<const uint8_t> key_salt) {
  srtp_policy_t policy{};
  switch (profile) {
    case SrtpProfile::aes128_cm_sha1_80:
      srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp);
      srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp);
      break;
    case SrtpProfile::aead_aes_128_gcm:
      srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp);
      srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp);
      break;
    case SrtpProfile::aead_aes_256_gcm:
      srtp_crypto_policy_set_aes_gcm_256_16_auth(&policy.rtp);
      srtp_crypto_policy_set_aes_gcm_256_16_auth(&policy.rtcp);
      break;
  }
  policy.ssrc.type = direction == SrtpSession::Direction::inbound ? ssrc_any_inbound : ssrc_any_outbound;
  policy.ssrc.value = 0;
  policy.key = const_cast<unsigned char*>(key_salt.data());
  policy.window_size = 0;  // libsrtp's default window of 128 packets
  policy.allow_repeat_tx = 0;
  policy.next = nullptr;
  return policy;
}

}  // namespace rtce
