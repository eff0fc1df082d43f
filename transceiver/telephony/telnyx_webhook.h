// telnyx_webhook.h — the HTTP side of a Telnyx TeXML call, socket-free: checking that a
// webhook came from Telnyx (an Ed25519 signature over "timestamp|body", OpenSSL), and the
// TeXML that answers it by starting a bidirectional media stream to our WebSocket
// (twiml_reject in twilio_webhook.h rejects a Telnyx call too: TeXML's <Reject> is TwiML's).
// Telnyx's scheme: headers telnyx-signature-ed25519 (base64 of the 64-byte signature) and
// telnyx-timestamp (unix seconds); the key is the account's public key (Mission Control →
// Keys & Credentials), base64 of its raw 32 bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "twilio_webhook.h"  // TwimlStream, xml_attribute_escape

namespace rtce {

// How far a webhook's telnyx-timestamp may be from our clock, either way: Telnyx's own
// libraries allow 300 s. Older (or later) signed requests are refused as replays.
inline constexpr int64_t kTelnyxSignatureToleranceSeconds = 300;

// The account's public key from its base64 text (RFC 4648, padded; ASCII whitespace around
// it, as a pasted config value carries, is ignored); nullopt unless it is exactly 32 bytes.
std::optional<std::array<uint8_t, 32>> telnyx_public_key_from_base64(std::string_view text);

// Whether `signature_b64` (the telnyx-signature-ed25519 header) is `public_key`'s Ed25519
// signature of timestamp + "|" + raw_body, and `timestamp` (the telnyx-timestamp header:
// decimal digits only, at most 18) is within ±tolerance_s of `now_unix`. The body is the
// bytes as received: any re-encoding breaks the signature.
bool telnyx_signature_valid(const std::array<uint8_t, 32>& public_key, std::string_view timestamp,
                            std::string_view raw_body, std::string_view signature_b64, int64_t now_unix,
                            int64_t tolerance_s = kTelnyxSignatureToleranceSeconds);

// RFC 8032 Ed25519 (pure, no context): whether `signature` signs `message` under
// `public_key`. A key that is not a curve point verifies nothing.
bool ed25519_verify(const std::array<uint8_t, 32>& public_key, std::string_view message,
                    std::span<const uint8_t, 64> signature);

// <?xml version="1.0" encoding="UTF-8"?><Response><Start><Stream url=".." track="inbound_track"
// codec="PCMU" bidirectionalMode="rtp" bidirectionalCodec="PCMU"><Parameter name=".."
// value=".."/>...</Stream></Start><Pause length="N"/></Response>, every attribute escaped.
// A <Start>ed stream runs beside the TeXML rather than in place of it (TeXML's <Connect>
// takes no <Stream>), so the <Pause> is what keeps the call up: for `max_call_seconds`
// (at least 1), after which the TeXML ends and Telnyx hangs up. codec="PCMU" asks Telnyx to
// transcode a PCMA call rather than stream A-law, which the codec refuses (bad_start); RTP
// mode with PCMU is what our media messages carry.
std::string texml_start_stream(const TwimlStream& stream, int max_call_seconds);

}  // namespace rtce
