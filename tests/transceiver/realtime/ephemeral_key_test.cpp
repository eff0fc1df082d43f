// ephemeral_key_test.cpp — ek_ keys: a round trip carries the session config, expiry is
// exact, forgeries of every part are refused, and rotation keeps keys minted under the old
// secret valid while it is still held.
#include "ephemeral_key.h"

#include <gtest/gtest.h>

#include "error.h"

namespace rtce {
namespace {

const std::string kSecretA(32, 'a');
const std::string kSecretB = "0123456789abcdef0123456789abcdef-b";
constexpr int64_t kNow = 1'780'000'000;

TEST(EphemeralKey, RoundTripCarriesSessionAndExpiry) {
  EphemeralKeyring ring({{"k1", kSecretA}});
  const nlohmann::json session = {
      {"type", "realtime"}, {"instructions", "be brief"}, {"audio", {{"output", {{"voice", "marin"}}}}}};
  auto key = ring.mint(session, kNow, 60);
  ASSERT_TRUE(key);
  EXPECT_EQ(key->value.rfind("ek_", 0), 0u);
  EXPECT_EQ(key->expires_at, kNow + 60);
  auto v = ring.verify(key->value, kNow + 59);
  ASSERT_FALSE(v.error) << ephemeral_key_error_name(*v.error);
  EXPECT_EQ(v.session, session);
  EXPECT_EQ(v.expires_at, kNow + 60);
  // Another pod with the same secret verifies it: no state is needed.
  EphemeralKeyring other_pod({{"k1", kSecretA}});
  EXPECT_FALSE(other_pod.verify(key->value, kNow).error);
}

TEST(EphemeralKey, ExpiresExactlyAtExpiresAt) {
  EphemeralKeyring ring({{"k1", kSecretA}});
  auto key = ring.mint(nlohmann::json::object(), kNow, 60);
  EXPECT_FALSE(ring.verify(key->value, kNow + 59).error);
  EXPECT_EQ(ring.verify(key->value, kNow + 60).error, EphemeralKeyError::expired);
  EXPECT_EQ(ring.verify(key->value, kNow + 100000).error, EphemeralKeyError::expired);
}

TEST(EphemeralKey, LifetimeIsClampedToTheRealtimeRange) {
  EphemeralKeyring ring({{"k1", kSecretA}});
  EXPECT_EQ(ring.mint({}, kNow, 1)->expires_at, kNow + kEphemeralKeyMinLifetime);
  EXPECT_EQ(ring.mint({}, kNow, 1'000'000)->expires_at, kNow + kEphemeralKeyMaxLifetime);
}

TEST(EphemeralKey, ForgeriesAreRefused) {
  EphemeralKeyring ring({{"k1", kSecretA}});
  const std::string key = ring.mint({{"instructions", "x"}}, kNow, 60)->value;
  // Every single-character change anywhere after the prefix fails, and never verifies.
  for (size_t i = 3; i < key.size(); i++) {
    std::string forged = key;
    forged[i] = forged[i] == 'A' ? 'B' : 'A';
    auto v = ring.verify(forged, kNow);
    ASSERT_TRUE(v.error) << "position " << i;
    EXPECT_TRUE(*v.error == EphemeralKeyError::bad_signature || *v.error == EphemeralKeyError::malformed)
        << "position " << i << ": " << ephemeral_key_error_name(*v.error);
  }
  // Claims rewritten by someone without the secret (a later expiry): the MAC fails.
  const size_t dot = key.rfind('.');
  EphemeralKeyring attacker({{"k1", std::string(32, 'z')}});
  const std::string theirs = attacker.mint({{"instructions", "x"}}, kNow + 3600, 7200)->value;
  EXPECT_EQ(ring.verify(theirs, kNow).error, EphemeralKeyError::bad_signature);
  EXPECT_EQ(ring.verify(theirs.substr(0, theirs.rfind('.')) + key.substr(dot), kNow).error,
            EphemeralKeyError::bad_signature);
  // Shapes that are not keys at all.
  for (std::string bad :
       {"", "ek_", "ek_.", "sk-live-123", "ek_abc", "ek_abc.", "ek_.abc", "ek_a.b.c", "EK_abc.def"})
    EXPECT_TRUE(ring.verify(bad, kNow).error) << bad;
  EXPECT_EQ(ring.verify("ek_" + std::string(kEphemeralKeyMaxChars, 'a') + ".x", kNow).error,
            EphemeralKeyError::too_long);
}

// Found by the sanitizer stage's run of test_realtime_signaling.py: base64url leaves unused
// bits in the last character of a 32-byte MAC (and of most claims), so 'B'..'D' decoded like
// 'A' and a "flipped" signature verified. Only the key as minted may verify.
TEST(EphemeralKey, OnlyTheCanonicalSpellingVerifies) {
  EphemeralKeyring ring({{"k1", kSecretA}});
  const std::string key = ring.mint({{"instructions", "x"}}, kNow, 60)->value;
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (const size_t at : {key.size() - 1, key.rfind('.') - 1}) {
    int verified = 0;
    for (const char c : alphabet) {
      std::string variant = key;
      variant[at] = c;
      if (!ring.verify(variant, kNow).error) {
        ++verified;
        EXPECT_EQ(variant, key) << "position " << at;
      }
    }
    EXPECT_EQ(verified, 1) << "position " << at;
  }
}

TEST(EphemeralKey, RotationVerifiesUnderEverySecretHeldAndSignsWithTheFirst) {
  EphemeralKeyring old_ring({{"k1", kSecretA}});
  const std::string minted_before = old_ring.mint({}, kNow, 600)->value;
  // Rotation: the new secret signs; the old one still verifies.
  EphemeralKeyring rotating({{"k2", kSecretB}, {"k1", kSecretA}});
  EXPECT_FALSE(rotating.verify(minted_before, kNow).error);
  const std::string minted_after = rotating.mint({}, kNow, 600)->value;
  EXPECT_EQ(old_ring.verify(minted_after, kNow).error, EphemeralKeyError::bad_signature);
  // The old secret retired: its keys stop verifying, the new ones go on.
  EphemeralKeyring retired({{"k2", kSecretB}});
  EXPECT_EQ(retired.verify(minted_before, kNow).error, EphemeralKeyError::bad_signature);
  EXPECT_FALSE(retired.verify(minted_after, kNow).error);
}

TEST(EphemeralKey, BadSecretsAreConfigErrors) {
  EXPECT_THROW(EphemeralKeyring({}), ConfigError);
  EXPECT_THROW(EphemeralKeyring({{"k1", "short"}}), ConfigError);
  EXPECT_THROW(EphemeralKeyring({{"", kSecretA}}), ConfigError);
  EXPECT_THROW(EphemeralKeyring({{"has space", kSecretA}}), ConfigError);
  EXPECT_THROW(EphemeralKeyring({{"k1", kSecretA}, {"k1", kSecretB}}), ConfigError);
}

TEST(EphemeralKey, OversizeSessionIsNotMinted) {
  EphemeralKeyring ring({{"k1", kSecretA}});
  EXPECT_FALSE(ring.mint({{"instructions", std::string(kEphemeralKeyMaxChars, 'i')}}, kNow, 60));
}

}  // namespace
}  // namespace rtce
