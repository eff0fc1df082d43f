// fuzz_dcep.cc — libFuzzer over the DCEP parser: every accepted OPEN re-encodes to the
// same bytes, and label/protocol views stay inside the input.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dcep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto m = rtce::parse_dcep(std::span(data, size));
  if (m.error || m.type != rtce::kDcepOpen) return 0;
  std::vector<uint8_t> out(size);
  if (rtce::write_dcep_open(m.open, out) != size) abort();
  if (std::memcmp(out.data(), data, size) != 0) abort();
  return 0;
}
