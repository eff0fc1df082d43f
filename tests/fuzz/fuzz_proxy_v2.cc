// fuzz_proxy_v2.cc — libFuzzer target for the PROXY v2 framing parser (wire/rtce_proxy_v2.h).
// Invariants: the payload offset stays inside the datagram, whatever parses re-encodes to a
// header that parses back to the same flow, and padding it (a NOOP TLV, as the relay does
// for GSO) keeps the flow and moves the payload by exactly the padding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "rtce_proxy_v2.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65535) return 0;
  rtce_flow_key flow{};
  uint32_t off = 0;
  if (rtce_pp2_parse_key(data, static_cast<uint32_t>(size), &flow, &off) != RTCE_PP2_OK) return 0;
  if (off > size || off < RTCE_PP2_FIXED_LEN) abort();
  uint8_t again[RTCE_PP2_LEN_V6];
  const uint32_t n = rtce_pp2_write_key(again, sizeof again, &flow);
  if (n == 0) abort();
  rtce_flow_key back{};
  uint32_t off2 = 0;
  if (rtce_pp2_parse_key(again, n, &back, &off2) != RTCE_PP2_OK || off2 != n) abort();
  if (std::memcmp(&flow, &back, sizeof flow) != 0) abort();

  // Padding, by an amount the input chooses (its last byte), written to a buffer that holds
  // the padded header and the payload.
  static uint8_t padded[65535 + 1024];
  const uint32_t pad = size > 0 ? (data[size - 1] < 3 ? 0 : data[size - 1]) : 0;
  const uint32_t h = rtce_pp2_write_padded(padded, sizeof padded, data, static_cast<uint32_t>(size), pad);
  if (h == 0) return 0;  // a header whose length field cannot grow by pad
  if (h != off + pad) abort();
  std::memcpy(padded + h, data + off, size - off);
  uint32_t off3 = 0;
  if (rtce_pp2_parse_key(padded, static_cast<uint32_t>(h + size - off), &back, &off3) != RTCE_PP2_OK) abort();
  if (off3 != h || std::memcmp(&flow, &back, sizeof flow) != 0) abort();
  return 0;
}
