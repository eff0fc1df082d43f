// random.cpp — see random.h.
#include "random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace rtce {

void fill_random(void* out, size_t len) {
  auto* p = static_cast<uint8_t*>(out);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

std::string random_hex(size_t bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::vector<uint8_t> raw(bytes);
  fill_random(raw.data(), raw.size());
  std::string out;
  out.reserve(bytes * 2);
  for (uint8_t b : raw) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace rtce
