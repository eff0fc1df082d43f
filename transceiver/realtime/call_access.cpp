// call_access.cpp — see call_access.h.
#include "call_access.h"

#include <openssl/evp.h>

#include <array>

namespace rtce {

std::string key_principal(std::string_view prefix, std::string_view key) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int len = 0;
  EVP_Digest(key.data(), key.size(), digest.data(), &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(prefix);
  for (unsigned int i = 0; i < 16 && i < len; i++) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

}  // namespace rtce
