// phone_provider.h — the phone providers whose media streams rtcedge speaks: one vocabulary
// for the webhook and stream routes, the codecs, the metrics' provider label and the docs.
#pragma once

#include <cstdint>
#include <string_view>

#include "vocab.h"

namespace rtce {

// Append only: the names are routes (/v1/telephony/<name>) and metric labels.
#define RTCE_PHONE_PROVIDERS(X)                                                          \
  X(twilio) /* Media Streams, TwiML <Connect><Stream>, X-Twilio-Signature (HMAC-SHA1) */ \
  X(telnyx) /* media streaming, TeXML <Start><Stream bidirectionalMode="rtp">, Ed25519 webhooks */

enum class PhoneProvider : uint8_t { RTCE_PHONE_PROVIDERS(RTCE_VOCAB_ENUMERATOR) count };
inline constexpr const char* kPhoneProviderNames[] = {RTCE_PHONE_PROVIDERS(RTCE_VOCAB_LABEL)};
inline constexpr size_t kPhoneProviderCount = static_cast<size_t>(PhoneProvider::count);
inline const char* phone_provider_name(PhoneProvider provider) {
  return vocab_name(kPhoneProviderNames, provider);
}

}  // namespace rtce
