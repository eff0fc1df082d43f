// session_id.h — the id of a session (and of its Realtime call, "rtc_" + id): 32 hex digits
// naming the media endpoint that owns it, sealed with the fleet's routing-hint key, so that
// any transceiver pod can tell where a request for it belongs without asking anyone, and a
// forged or mistyped id is refused without a lookup.
//
//   bytes 0      version (high nibble, = 2: not a ufrag hint) | hint key id (low nibble)
//   bytes 1-2    owning endpoint id (big-endian; the worker's, as in the ufrag hint)
//   bytes 3-11   random (72 bits: ids are not guessable)
//   bytes 12-15  MAC = low 32 bits of SipHash-2-4(hint key[key id], bytes 0..11)
//
// See docs/realtime.md ("Any pod answers for any call").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hint_keys.h"

namespace rtce {

inline constexpr size_t kSessionIdChars = 32;

std::string mint_session_id(const HintKeys& keys, uint16_t endpoint_id);
// The endpoint that owns `id`, when it is a well-formed id sealed by one of `keys`.
std::optional<uint16_t> session_id_owner(const HintKeys& keys, std::string_view id);

}  // namespace rtce
