// ephemeral_key.h — short-lived client keys ("ek_..."), which Realtime-style browser code
// needs: it refuses any key that does not start with `ek_`, and a page must never hold the
// server's API key.
//
// Stateless by design: a key carries its expiry and the session config it was minted for,
// signed with HMAC-SHA256 under one of the fleet's shared secrets, so that any transceiver
// pod verifies it without a lookup (the pod that minted it may be gone). Two or more secrets
// allow rotation: the first signs, every one verifies, as with the routing hint's keys.
//
//   ek_<base64url(claims)>.<base64url(HMAC-SHA256(secret[kid], "ek_" + base64url(claims)))>
//   claims = {"v":1,"kid":"<secret id>","iat":<unix s>,"exp":<unix s>,"session":{...},"own":"<principal>"}
//
// "own" names the server key that minted the key (its principal, call_access.h): that key may
// act on the calls this one creates. Keys minted before it was added lack it. "calls" is how
// many calls the key may create (1 when absent).
//
// A key can be replayed until it expires, as OpenAI's can; keep lifetimes short (60 s by
// default, 10 s to 2 h accepted).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vocab.h"

namespace rtce {

inline constexpr std::string_view kEphemeralKeyPrefix = "ek_";
inline constexpr int64_t kEphemeralKeyMinLifetime = 10;
inline constexpr int64_t kEphemeralKeyMaxLifetime = 7200;
inline constexpr int64_t kEphemeralKeyDefaultLifetime = 60;
// Bounds what a verifier decodes and parses: a session config is a few KiB at most.
inline constexpr size_t kEphemeralKeyMaxChars = 16384;
inline constexpr size_t kEphemeralSecretMinBytes = 32;

#define RTCE_EPHEMERAL_KEY_ERRORS(X)                                                         \
  X(malformed, "the key is not an ek_ key this server issues")                               \
  X(too_long, "the key is longer than any key this server issues")                           \
  X(bad_signature, "the key's signature does not verify under any secret this server holds") \
  X(expired, "the key has expired")

RTCE_DECLARE_MESSAGE_VOCAB(EphemeralKeyError, RTCE_EPHEMERAL_KEY_ERRORS, ephemeral_key_error_name,
                           ephemeral_key_error_message);

struct EphemeralSecret {
  std::string id;      // short, printable; names the secret inside each key
  std::string secret;  // at least kEphemeralSecretMinBytes bytes
};

struct MintedKey {
  std::string value;   // "ek_..."
  int64_t expires_at;  // unix seconds
};

struct VerifiedKey {
  std::optional<EphemeralKeyError> error;
  nlohmann::json session;  // the session config the key was minted with (an object)
  int64_t expires_at = 0;
  std::optional<std::string> minter;  // the "own" claim: the minting key's principal
  uint32_t max_calls = 1;             // the "calls" claim
};

class EphemeralKeyring {
 public:
  // The first secret signs; all verify. Throws ConfigError naming the problem: no secret,
  // a short secret, an empty or repeated id, an id with characters other than
  // [A-Za-z0-9_-].
  explicit EphemeralKeyring(std::vector<EphemeralSecret> secrets);

  // A key for `session` (must be an object) valid from now_unix for lifetime_s seconds
  // (clamped to [kEphemeralKeyMinLifetime, kEphemeralKeyMaxLifetime]); nullopt when the
  // session config would make the key longer than kEphemeralKeyMaxChars.
  // `minter`: the minting key's principal, carried as the "own" claim.
  std::optional<MintedKey> mint(const nlohmann::json& session, int64_t now_unix, int64_t lifetime_s,
                                const std::string& minter = {}, uint32_t max_calls = 1) const;

  // Checks the signature (against every secret, in constant time) before anything in the
  // key is decoded or parsed; then the expiry, against now_unix (a key whose exp equals
  // now has expired). A key signed with a retired secret fails as bad_signature.
  VerifiedKey verify(std::string_view key, int64_t now_unix) const;

 private:
  std::vector<EphemeralSecret> secrets_;
};

}  // namespace rtce
