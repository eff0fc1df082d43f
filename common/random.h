// random.h — cryptographically strong random bytes (getrandom(2)) for keys and nonces.
#pragma once

#include <cstddef>
#include <string>

namespace rtce {

void fill_random(void* out, size_t len);

// `bytes` random bytes as 2 * bytes lowercase hex digits (ids, CNAMEs, local secrets).
std::string random_hex(size_t bytes);

}  // namespace rtce
