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

KeyCallBudget::Take KeyCallBudget::take(const std::string& principal, uint32_t max_calls, int64_t expires_at,
                                        int64_t now_unix) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(principal);
  if (it == entries_.end()) {
    if (entries_.size() >= capacity_)
      std::erase_if(entries_, [&](const auto& e) { return e.second.expires_at <= now_unix; });
    if (entries_.size() >= capacity_) return Take::full;
    it = entries_.emplace(principal, Entry{0, expires_at}).first;
  }
  if (it->second.used >= max_calls) return Take::exhausted;
  ++it->second.used;
  return Take::ok;
}

void KeyCallBudget::give_back(const std::string& principal) {
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(principal); it != entries_.end() && it->second.used > 0) --it->second.used;
}

size_t KeyCallBudget::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace rtce
