// call_access.h — who may act on a call (GET, PATCH, DELETE, hangup): the key that created it,
// and for a call an ek_ key created, the server key that minted that key. Everyone else gets
// the 404 of an unknown id, so a key learns nothing about calls it does not own.
//
// A key is known by its principal: a one-way name of the key ("s:" + 32 hex characters of
// SHA-256 for a server key, "e:" + the same for an ek_ key), so neither the key nor anything
// that verifies it is kept with the call. A server without http.api_keys takes requests
// without a key: their principal is "" (everyone), as before. An ek_ key names the principal
// that minted it in its claims ("own"); a key minted before it did owns only the calls it
// creates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace rtce {

inline constexpr std::string_view kServerPrincipalPrefix = "s:";
inline constexpr std::string_view kEphemeralPrincipalPrefix = "e:";

// prefix + the first 32 hex characters of SHA-256(key).
std::string key_principal(std::string_view prefix, std::string_view key);

struct CallAccess {
  std::string creator;                // the principal that created the call
  std::optional<std::string> minter;  // an ek_ key's call: the principal that minted the key
  // A call no key created (a phone call its provider placed): every server key owns it.
  bool any_server_key = false;

  bool allows(std::string_view requester) const {
    return requester == creator || (minter && requester == *minter) ||
           (any_server_key && requester.starts_with(kServerPrincipalPrefix));
  }
};

// How many calls each ek_ key has created on this pod: a key makes at most the max_calls it
// was minted with (1 unless the minter asked for more), counted until it expires. A refused
// offer gives its call back. Bounded: at capacity, expired keys are forgotten first, and a
// table still full refuses (never forgets a live key, which would let it call again).
// Thread-safe: offers are refused from worker threads.
class KeyCallBudget {
 public:
  enum class Take { ok, exhausted, full };
  explicit KeyCallBudget(size_t capacity = 65536) : capacity_(capacity) {}
  Take take(const std::string& principal, uint32_t max_calls, int64_t expires_at, int64_t now_unix);
  void give_back(const std::string& principal);
  size_t size() const;

 private:
  struct Entry {
    uint32_t used = 0;
    int64_t expires_at = 0;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  size_t capacity_;
};

}  // namespace rtce
