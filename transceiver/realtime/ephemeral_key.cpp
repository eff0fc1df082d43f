// ephemeral_key.cpp — see ephemeral_key.h.
#include "ephemeral_key.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>

#include "error.h"

namespace rtce {
namespace {

constexpr const char* kErrorNames[] = {RTCE_EPHEMERAL_KEY_ERRORS(RTCE_VOCAB_MESSAGE_LABEL)};
constexpr const char* kErrorMessages[] = {RTCE_EPHEMERAL_KEY_ERRORS(RTCE_VOCAB_MESSAGE_TEXT)};

using Mac = std::array<unsigned char, 32>;

Mac hmac_sha256(std::string_view secret, std::string_view data) {
  Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac.data(), &len);
  return mac;
}

// RFC 4648 §5 base64url without padding, through OpenSSL's base64.
std::string base64url_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string padded(text);
  for (char& c : padded) {
    if (c == '-') {
      c = '+';
    } else if (c == '_') {
      c = '/';
    } else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return std::nullopt;  // also refuses '+', '/' and '=': the key is base64url, unpadded
    }
  }
  const size_t padding = (4 - padded.size() % 4) % 4;
  padded.append(padding, '=');
  std::string out(padded.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(padded.data()), static_cast<int>(padded.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<size_t>(n) - padding);
  // The last character's unused low bits are ignored by the decoder: without this, four
  // spellings of every key verify (a flipped last signature character could still pass).
  if (base64url_encode(out) != text) return std::nullopt;
  return out;
}

bool valid_secret_id(std::string_view id) {
  return !id.empty() && id.size() <= 32 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

}  // namespace

std::string_view ephemeral_key_error_name(EphemeralKeyError error) { return vocab_name(kErrorNames, error); }
std::string_view ephemeral_key_error_message(EphemeralKeyError error) {
  return vocab_name(kErrorMessages, error);
}

EphemeralKeyring::EphemeralKeyring(std::vector<EphemeralSecret> secrets) : secrets_(std::move(secrets)) {
  if (secrets_.empty()) throw ConfigError("ephemeral keys: no secret configured");
  for (size_t i = 0; i < secrets_.size(); i++) {
    const auto& s = secrets_[i];
    if (!valid_secret_id(s.id))
      throw ConfigError("ephemeral keys: secret id '" + s.id + "' must be 1-32 characters of [A-Za-z0-9_-]");
    if (s.secret.size() < kEphemeralSecretMinBytes)
      throw ConfigError("ephemeral keys: secret '" + s.id + "' is " + std::to_string(s.secret.size()) +
                        " bytes; at least " + std::to_string(kEphemeralSecretMinBytes) + " are needed");
    for (size_t j = 0; j < i; j++)
      if (secrets_[j].id == s.id) throw ConfigError("ephemeral keys: secret id '" + s.id + "' appears twice");
  }
}

std::optional<MintedKey> EphemeralKeyring::mint(const nlohmann::json& session, int64_t now_unix,
                                                int64_t lifetime_s, const std::string& minter,
                                                uint32_t max_calls) const {
  const int64_t lifetime = std::clamp(lifetime_s, kEphemeralKeyMinLifetime, kEphemeralKeyMaxLifetime);
  const EphemeralSecret& signer = secrets_.front();
  nlohmann::json claims = {{"v", 1},
                           {"kid", signer.id},
                           {"iat", now_unix},
                           {"exp", now_unix + lifetime},
                           {"session", session.is_object() ? session : nlohmann::json::object()},
                           {"own", minter},
                           {"calls", max_calls}};
  std::string signed_part = std::string(kEphemeralKeyPrefix) + base64url_encode(claims.dump());
  const Mac mac = hmac_sha256(signer.secret, signed_part);
  std::string value =
      signed_part + "." +
      base64url_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
  if (value.size() > kEphemeralKeyMaxChars) return std::nullopt;
  return MintedKey{std::move(value), now_unix + lifetime};
}

VerifiedKey EphemeralKeyring::verify(std::string_view key, int64_t now_unix) const {
  VerifiedKey result;
  auto fail = [&](EphemeralKeyError error) {
    result.error = error;
    return result;
  };
  if (key.size() > kEphemeralKeyMaxChars) return fail(EphemeralKeyError::too_long);
  if (key.substr(0, kEphemeralKeyPrefix.size()) != kEphemeralKeyPrefix)
    return fail(EphemeralKeyError::malformed);
  const size_t dot = key.rfind('.');
  if (dot == std::string_view::npos || dot <= kEphemeralKeyPrefix.size())
    return fail(EphemeralKeyError::malformed);
  const std::string_view signed_part = key.substr(0, dot);
  const auto mac = base64url_decode(key.substr(dot + 1));
  if (!mac || mac->size() != std::tuple_size_v<Mac>) return fail(EphemeralKeyError::malformed);
  const EphemeralSecret* signer = nullptr;
  for (const auto& s : secrets_) {
    const Mac expected = hmac_sha256(s.secret, signed_part);
    if (CRYPTO_memcmp(expected.data(), mac->data(), expected.size()) == 0) signer = &s;
  }
  if (!signer) return fail(EphemeralKeyError::bad_signature);
  // Signed by us: what follows can only fail if a secret leaked or this code changed.
  const auto claims_text = base64url_decode(signed_part.substr(kEphemeralKeyPrefix.size()));
  if (!claims_text) return fail(EphemeralKeyError::malformed);
  const nlohmann::json claims = nlohmann::json::parse(*claims_text, nullptr, false);
  if (!claims.is_object() || claims.value("v", 0) != 1 || !claims.contains("exp") ||
      !claims["exp"].is_number_integer() || claims.value("kid", std::string()) != signer->id ||
      !claims.contains("session") || !claims["session"].is_object())
    return fail(EphemeralKeyError::malformed);
  result.expires_at = claims["exp"].get<int64_t>();
  if (now_unix >= result.expires_at) return fail(EphemeralKeyError::expired);
  result.session = claims["session"];
  if (claims.contains("own") && claims["own"].is_string()) result.minter = claims["own"].get<std::string>();
  if (claims.contains("calls") && claims["calls"].is_number_unsigned())
    result.max_calls = static_cast<uint32_t>(std::min<uint64_t>(claims["calls"].get<uint64_t>(), UINT32_MAX));
  return result;
}

}  // namespace rtce
