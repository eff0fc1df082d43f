// fuzz_hint.cc — libFuzzer target for the routing-hint decoder (wire/rtce_hint.h).
// Invariants: 16 alphabet characters decode and re-encode to the same characters; a hint
// that opens re-seals, under the key that opened it, to the same ufrag.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "rtce_hint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1024) return 0;
  rtce_hint_keyset ks{};
  const uint8_t k0[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  ks.keys[0].id = 1;
  ks.keys[0].in_use = 1;
  rtce_siphash_key_from_bytes(&ks.keys[0].key, k0);
  rtce_hint hint{};
  const rtce_hint_result r = rtce_hint_open(data, static_cast<uint32_t>(size), &ks, &hint);
  if (size != RTCE_HINT_CHARS) {
    if (r != RTCE_HINT_BAD_LENGTH) abort();
    return 0;
  }
  uint8_t raw[RTCE_HINT_RAW_BYTES];
  if (rtce_hint_decode_chars(data, raw) == 0) {
    uint8_t chars[RTCE_HINT_CHARS];
    rtce_hint_encode_chars(raw, chars);
    if (std::memcmp(chars, data, RTCE_HINT_CHARS) != 0) abort();
  }
  if (r == RTCE_HINT_OK) {
    uint8_t resealed[RTCE_HINT_CHARS];
    rtce_hint copy = hint;
    rtce_hint_seal(&copy, &ks.keys[0], resealed);
    if (std::memcmp(resealed, data, RTCE_HINT_CHARS) != 0) abort();
  }
  return 0;
}
