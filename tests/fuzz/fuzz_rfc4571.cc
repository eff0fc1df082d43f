// fuzz_rfc4571.cc — libFuzzer target for the ICE-TCP framing (loader/userspace/rfc4571.h), the
// bytes an ICE-TCP client sends the relay. The input is cut into reads of sizes it chooses
// (its first byte); invariants: no frame is ever longer than the maximum, the frames read are
// exactly those a whole-buffer parse finds, and re-framing them (append_frame) gives back the
// consumed bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rfc4571.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = 1 + data[0] % 97;
  const size_t max_frame = 64 + (size > 1 ? data[1] : 0) * 8;
  data += 1;
  size -= 1;
  rtce::FrameReader reader(max_frame);
  std::vector<uint8_t> reframed;
  size_t fed = 0;
  while (fed < size && !reader.too_large()) {
    auto space = reader.space();
    if (space.empty()) abort();  // a whole frame always fits while the stream is usable
    const size_t n = std::min({piece, space.size(), size - fed});
    std::memcpy(space.data(), data + fed, n);
    reader.commit(n);
    fed += n;
    while (auto frame = reader.next()) {
      if (frame->size() > max_frame) abort();
      if (!rtce::append_frame(reframed, 1 << 20, *frame)) abort();
    }
  }
  // What was framed is a prefix of the input, byte for byte.
  if (reframed.size() > size ||
      (!reframed.empty() && std::memcmp(reframed.data(), data, reframed.size()) != 0))
    abort();
  return 0;
}
