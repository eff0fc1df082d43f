// fuzz_stun.cc — libFuzzer target for the relay's STUN walk (wire/rtce_stun.h).
// Invariants: never reads out of bounds (ASan), and an OK result names a non-empty ufrag
// inside the datagram that contains no ':'.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "rtce_stun.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65535) return 0;
  uint32_t off = 0, len = 0;
  if (rtce_stun_server_ufrag(data, static_cast<uint32_t>(size), &off, &len) == RTCE_STUN_OK) {
    if (len == 0 || off < RTCE_STUN_HEADER_LEN || off + len > size) abort();
    if (std::memchr(data + off, ':', len) != nullptr) abort();
    if (data[off + len] != ':') abort();
  }
  return 0;
}
