// telnyx_webhook.cpp — see telnyx_webhook.h.
#include "telnyx_webhook.h"

#include <openssl/evp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "realtime_dialect.h"  // base64_decode

namespace rtce {
namespace {

constexpr std::string_view kXmlDeclaration = R"(<?xml version="1.0" encoding="UTF-8"?>)";
// 18 digits cannot overflow int64_t (nor can their difference with a non-negative clock).
constexpr size_t kMaxTimestampDigits = 18;

std::string_view trim_ascii_whitespace(std::string_view text) {
  constexpr std::string_view kWhitespace = " \t\r\n";
  const size_t begin = text.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kWhitespace) - begin + 1);
}

std::optional<int64_t> unix_seconds(std::string_view text) {
  if (text.empty() || text.size() > kMaxTimestampDigits) return std::nullopt;
  int64_t n = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

std::optional<std::array<uint8_t, 32>> telnyx_public_key_from_base64(std::string_view text) {
  std::vector<uint8_t> bytes;
  if (!base64_decode(trim_ascii_whitespace(text), bytes) || bytes.size() != 32) return std::nullopt;
  std::array<uint8_t, 32> key{};
  std::copy(bytes.begin(), bytes.end(), key.begin());
  return key;
}

bool ed25519_verify(const std::array<uint8_t, 32>& public_key, std::string_view message,
                    std::span<const uint8_t, 64> signature) {
  const std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, public_key.data(), public_key.size()),
      EVP_PKEY_free);
  if (!key) return false;
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  // Ed25519 hashes the message itself (SHA-512 inside the scheme): no digest is named, and
  // the one-shot EVP_DigestVerify is the only form OpenSSL accepts for it.
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), signature.data(), signature.size(),
                          reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

bool telnyx_signature_valid(const std::array<uint8_t, 32>& public_key, std::string_view timestamp,
                            std::string_view raw_body, std::string_view signature_b64, int64_t now_unix,
                            int64_t tolerance_s) {
  const auto sent = unix_seconds(timestamp);
  // A clock before 1970 is broken, and would make the difference below overflow.
  if (!sent || now_unix < 0 || tolerance_s < 0) return false;
  const int64_t skew = *sent > now_unix ? *sent - now_unix : now_unix - *sent;
  if (skew > tolerance_s) return false;
  std::vector<uint8_t> signature;
  if (!base64_decode(signature_b64, signature) || signature.size() != 64) return false;
  std::string message;
  message.reserve(timestamp.size() + 1 + raw_body.size());
  message.append(timestamp).append("|").append(raw_body);
  return ed25519_verify(public_key, message, std::span<const uint8_t, 64>(signature.data(), 64));
}

std::string texml_start_stream(const TwimlStream& stream, int max_call_seconds) {
  std::string out(kXmlDeclaration);
  out.append("<Response><Start>");
  append_stream_element(
      stream, R"( track="inbound_track" codec="PCMU" bidirectionalMode="rtp" bidirectionalCodec="PCMU")",
      out);
  out.append(R"(</Start><Pause length=")")
      .append(std::to_string(max_call_seconds < 1 ? 1 : max_call_seconds))
      .append("\"/></Response>");
  return out;
}

}  // namespace rtce
