// random.h — cryptographically strong random bytes (getrandom(2)) for keys and nonces.
#pragma once

#include <cstddef>

namespace rtce {

void fill_random(void* out, size_t len);

}  // namespace rtce
