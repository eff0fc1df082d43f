// telnyx_webhook_test.cpp — Telnyx's Ed25519 webhook signature: RFC 8032's first test
// vector through the raw verifier, a key pair made here with OpenSSL signing
// "timestamp|body" as Telnyx does, and every forgery (body, timestamp, signature, key),
// replay (outside the tolerance) and malformed header refused; the public key's base64;
// the TeXML that starts the stream, and its escaping of hostile values.
#include "telnyx_webhook.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <memory>
#include <string>
#include <vector>

#include "realtime_dialect.h"  // base64_append

namespace rtce {
namespace {

using Key = std::array<uint8_t, 32>;

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return bytes;
}

std::string base64(std::span<const uint8_t> bytes) {
  std::string out;
  base64_append(bytes, out);
  return out;
}

// A fresh Ed25519 key pair, signing as Telnyx does.
class Signer {
 public:
  Signer() {
    const std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
        EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr), EVP_PKEY_CTX_free);
    EVP_PKEY* key = nullptr;
    EXPECT_EQ(EVP_PKEY_keygen_init(ctx.get()), 1);
    EXPECT_EQ(EVP_PKEY_keygen(ctx.get(), &key), 1);
    key_.reset(key);
    size_t length = public_key_.size();
    EXPECT_EQ(EVP_PKEY_get_raw_public_key(key_.get(), public_key_.data(), &length), 1);
    EXPECT_EQ(length, 32u);
  }
  const Key& public_key() const { return public_key_; }

  std::vector<uint8_t> sign(std::string_view message) const {
    const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    std::vector<uint8_t> signature(64);
    size_t length = signature.size();
    EXPECT_EQ(EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()), 1);
    EXPECT_EQ(EVP_DigestSign(ctx.get(), signature.data(), &length,
                             reinterpret_cast<const unsigned char*>(message.data()), message.size()),
              1);
    EXPECT_EQ(length, 64u);
    return signature;
  }
  // The telnyx-signature-ed25519 header for this timestamp and body.
  std::string header(std::string_view timestamp, std::string_view body) const {
    return base64(sign(std::string(timestamp) + "|" + std::string(body)));
  }

 private:
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key_{nullptr, EVP_PKEY_free};
  Key public_key_{};
};

constexpr int64_t kNow = 1'700'000'000;
constexpr std::string_view kTimestamp = "1700000000";
constexpr std::string_view kBody =
    R"({"data":{"event_type":"call.initiated","payload":{"call_control_id":"v3:abc"}}})";

TEST(Ed25519, Rfc8032Section71Test1) {
  const auto key_bytes = from_hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  const auto signature = from_hex(
      "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5"
      "f0"
      "595bbe24655141438e7a100b");
  ASSERT_EQ(key_bytes.size(), 32u);
  ASSERT_EQ(signature.size(), 64u);
  Key key{};
  std::copy(key_bytes.begin(), key_bytes.end(), key.begin());
  const std::span<const uint8_t, 64> sig(signature.data(), 64);
  EXPECT_TRUE(ed25519_verify(key, "", sig));
  EXPECT_FALSE(ed25519_verify(key, "x", sig));
  auto flipped = signature;
  flipped[0] ^= 1;
  EXPECT_FALSE(ed25519_verify(key, "", std::span<const uint8_t, 64>(flipped.data(), 64)));
  Key other = key;
  other[31] ^= 1;
  EXPECT_FALSE(ed25519_verify(other, "", sig));
  // And through the base64 the account's key comes in.
  const auto parsed = telnyx_public_key_from_base64(base64(key_bytes));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, key);
}

TEST(TelnyxSignature, AcceptsWhatTheKeySigned) {
  const Signer signer;
  const std::string header = signer.header(kTimestamp, kBody);
  EXPECT_TRUE(telnyx_signature_valid(signer.public_key(), kTimestamp, kBody, header, kNow));
  // An empty body is signed like any other.
  EXPECT_TRUE(
      telnyx_signature_valid(signer.public_key(), kTimestamp, "", signer.header(kTimestamp, ""), kNow));
}

TEST(TelnyxSignature, RefusesForgeries) {
  const Signer signer;
  const Signer stranger;
  const std::string header = signer.header(kTimestamp, kBody);
  std::string tampered_body(kBody);
  tampered_body[tampered_body.size() / 2] ^= 1;
  EXPECT_FALSE(telnyx_signature_valid(signer.public_key(), kTimestamp, tampered_body, header, kNow));
  EXPECT_FALSE(
      telnyx_signature_valid(signer.public_key(), kTimestamp, std::string(kBody) + " ", header, kNow));
  // The timestamp is signed: another one, even within the tolerance, does not verify.
  EXPECT_FALSE(telnyx_signature_valid(signer.public_key(), "1700000001", kBody, header, kNow));
  auto signature = signer.sign(std::string(kTimestamp) + "|" + std::string(kBody));
  signature[63] ^= 0x40;
  EXPECT_FALSE(telnyx_signature_valid(signer.public_key(), kTimestamp, kBody, base64(signature), kNow));
  EXPECT_FALSE(telnyx_signature_valid(stranger.public_key(), kTimestamp, kBody, header, kNow));
  // Signed without the separator, or the other way round.
  EXPECT_FALSE(telnyx_signature_valid(signer.public_key(), kTimestamp, kBody,
                                      base64(signer.sign(std::string(kTimestamp) + std::string(kBody))),
                                      kNow));
  EXPECT_FALSE(telnyx_signature_valid(signer.public_key(), kTimestamp, kBody,
                                      base64(signer.sign(std::string(kBody) + "|" + std::string(kTimestamp))),
                                      kNow));
}

TEST(TelnyxSignature, RefusesMalformedSignatureHeaders) {
  const Signer signer;
  const std::string header = signer.header(kTimestamp, kBody);
  for (const std::string& bad : {std::string(), header.substr(0, header.size() - 4), header + "AAAA",
                                 std::string(88, '!'), header.substr(0, header.size() - 2) + "=A"})
    EXPECT_FALSE(telnyx_signature_valid(signer.public_key(), kTimestamp, kBody, bad, kNow)) << bad;
}

TEST(TelnyxSignature, RefusesTimestampsOutsideTheToleranceAsReplays) {
  const Signer signer;
  const auto valid_at = [&](int64_t sent, int64_t now, int64_t tolerance = kTelnyxSignatureToleranceSeconds) {
    const std::string ts = std::to_string(sent);
    return telnyx_signature_valid(signer.public_key(), ts, kBody, signer.header(ts, kBody), now, tolerance);
  };
  EXPECT_TRUE(valid_at(kNow - 300, kNow));
  EXPECT_TRUE(valid_at(kNow + 300, kNow));
  EXPECT_FALSE(valid_at(kNow - 301, kNow));
  EXPECT_FALSE(valid_at(kNow + 301, kNow));
  EXPECT_FALSE(valid_at(kNow - 86400, kNow));
  EXPECT_TRUE(valid_at(kNow - 10, kNow, 10));
  EXPECT_FALSE(valid_at(kNow - 11, kNow, 10));
  EXPECT_FALSE(valid_at(kNow, kNow, -1));
  EXPECT_FALSE(valid_at(0, -1));  // a clock before 1970 is broken
}

TEST(TelnyxSignature, RefusesTimestampsThatAreNotDigits) {
  const Signer signer;
  for (const std::string ts : {"", " 1700000000", "1700000000 ", "+1700000000", "-1700000000", "1700000000.0",
                               "0x6553F100", "17e8", "1234567890123456789"}) {
    // Each signed exactly as sent, so that only the timestamp's form is refused.
    EXPECT_FALSE(telnyx_signature_valid(signer.public_key(), ts, kBody, signer.header(ts, kBody), kNow))
        << ts;
  }
  // Leading zeros are still digits (and the same second).
  EXPECT_TRUE(telnyx_signature_valid(signer.public_key(), "01700000000", kBody,
                                     signer.header("01700000000", kBody), kNow));
}

TEST(TelnyxPublicKey, FromBase64) {
  const Signer signer;
  const std::string text = base64(signer.public_key());
  ASSERT_EQ(text.size(), 44u);
  EXPECT_EQ(telnyx_public_key_from_base64(text), signer.public_key());
  EXPECT_EQ(telnyx_public_key_from_base64("  " + text + "\n"), signer.public_key());
  EXPECT_FALSE(telnyx_public_key_from_base64(""));
  EXPECT_FALSE(telnyx_public_key_from_base64(text.substr(0, 40)));  // 30 bytes
  EXPECT_FALSE(telnyx_public_key_from_base64(text + "AAAA"));       // 35 bytes
  EXPECT_FALSE(telnyx_public_key_from_base64(text.substr(0, 43)));  // unpadded
  EXPECT_FALSE(telnyx_public_key_from_base64(std::string(44, '*')));
}

TEST(Texml, StartStreamKeepsTheCallUpWithAPause) {
  const TwimlStream stream{.url = "wss://edge.example.com/telephony/telnyx/stream?token=a&b",
                           .parameters = {{"token", "t1"}, {"caller", "+1 555"}}};
  EXPECT_EQ(
      texml_start_stream(stream, 3600),
      R"(<?xml version="1.0" encoding="UTF-8"?><Response><Start>)"
      R"(<Stream url="wss://edge.example.com/telephony/telnyx/stream?token=a&amp;b" track="inbound_track" )"
      R"(codec="PCMU" bidirectionalMode="rtp" bidirectionalCodec="PCMU">)"
      R"(<Parameter name="token" value="t1"/><Parameter name="caller" value="+1 555"/>)"
      R"(</Stream></Start><Pause length="3600"/></Response>)");
  EXPECT_EQ(texml_start_stream({.url = "wss://h/s", .parameters = {}}, 0),
            R"(<?xml version="1.0" encoding="UTF-8"?><Response><Start>)"
            R"(<Stream url="wss://h/s" track="inbound_track" codec="PCMU" bidirectionalMode="rtp" )"
            R"(bidirectionalCodec="PCMU"/></Start><Pause length="1"/></Response>)");
}

TEST(Texml, EscapesHostileValues) {
  const std::string hostile = "\"/><Hangup/><x a='\n";
  const std::string texml = texml_start_stream({.url = hostile, .parameters = {{hostile, hostile}}}, 60);
  EXPECT_EQ(texml.find("<Hangup"), std::string::npos) << texml;
  EXPECT_NE(texml.find("&quot;/&gt;&lt;Hangup/&gt;&lt;x a=&apos;&#10;"), std::string::npos) << texml;
}

}  // namespace
}  // namespace rtce
