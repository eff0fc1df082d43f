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

#include <optional>
#include <string>
#include <string_view>

namespace rtce {

inline constexpr std::string_view kServerPrincipalPrefix = "s:";
inline constexpr std::string_view kEphemeralPrincipalPrefix = "e:";

// prefix + the first 32 hex characters of SHA-256(key).
std::string key_principal(std::string_view prefix, std::string_view key);

struct CallAccess {
  std::string creator;                // the principal that created the call
  std::optional<std::string> minter;  // an ek_ key's call: the principal that minted the key

  bool allows(std::string_view requester) const {
    return requester == creator || (minter && requester == *minter);
  }
};

}  // namespace rtce
