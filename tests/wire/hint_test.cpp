// hint_test.cpp — the routing-hint codec: known answer, round trips, rotation, rejection.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "error.h"
#include "hint_keys.h"
#include "rtce_hint.h"
#include "rtce_stun.h"
#include "test_support.h"

namespace {

rtce_hint_key test_key(uint8_t id, uint8_t first_byte = 0) {
  uint8_t bytes[16];
  for (int i = 0; i < 16; i++) bytes[i] = static_cast<uint8_t>(first_byte + i);
  rtce_hint_key key{};
  key.id = id;
  key.in_use = 1;
  rtce_siphash_key_from_bytes(&key.key, bytes);
  return key;
}

std::string seal(rtce_hint hint, const rtce_hint_key& key) {
  uint8_t chars[RTCE_HINT_CHARS];
  rtce_hint_seal(&hint, &key, chars);
  return std::string(reinterpret_cast<char*>(chars), RTCE_HINT_CHARS);
}

rtce_hint_result open(const std::string& ufrag, const rtce_hint_keyset& ks, rtce_hint* out) {
  return rtce_hint_open(reinterpret_cast<const uint8_t*>(ufrag.data()), static_cast<uint32_t>(ufrag.size()),
                        &ks, out);
}

// Computed independently (a Python SipHash-2-4 and base64) so that another implementation
// of the format can check itself against the same string.
TEST(Hint, KnownAnswer) {
  rtce_hint hint{};
  hint.cluster_id = 1;
  hint.endpoint_id = 2;
  hint.nonce = 0x01020304;
  EXPECT_EQ(seal(hint, test_key(1)), "EQEAAgECAwSp2Uc8");
}

TEST(Hint, RoundTripsEveryFieldAndStaysIceLegal) {
  std::mt19937_64 rng(42);
  rtce_hint_keyset ks{};
  ks.keys[0] = test_key(5, 9);
  for (int i = 0; i < 2000; i++) {
    rtce_hint in{};
    in.cluster_id = static_cast<uint8_t>(rng());
    in.endpoint_id = static_cast<uint16_t>(rng());
    in.nonce = static_cast<uint32_t>(rng());
    const std::string ufrag = seal(in, ks.keys[0]);
    ASSERT_EQ(ufrag.size(), 16u);
    for (char c : ufrag)
      ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/') << ufrag;
    rtce_hint out{};
    ASSERT_EQ(open(ufrag, ks, &out), RTCE_HINT_OK) << ufrag;
    EXPECT_EQ(out.version, RTCE_HINT_VERSION);
    EXPECT_EQ(out.key_id, 5);
    EXPECT_EQ(out.cluster_id, in.cluster_id);
    EXPECT_EQ(out.endpoint_id, in.endpoint_id);
    EXPECT_EQ(out.nonce, in.nonce);
  }
}

TEST(Hint, EveryCharacterChangeIsRejected) {
  rtce_hint_keyset ks{};
  ks.keys[0] = test_key(1);
  rtce_hint in{};
  in.endpoint_id = 77;
  in.nonce = 123456;
  const std::string ufrag = seal(in, ks.keys[0]);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t pos = 0; pos < ufrag.size(); pos++) {
    for (char c : alphabet) {
      if (c == ufrag[pos]) continue;
      std::string forged = ufrag;
      forged[pos] = c;
      rtce_hint out{};
      EXPECT_NE(open(forged, ks, &out), RTCE_HINT_OK) << forged;
    }
  }
}

TEST(Hint, RejectionReasons) {
  rtce_hint_keyset ks{};
  ks.keys[0] = test_key(1);
  rtce_hint out{};
  EXPECT_EQ(open("short", ks, &out), RTCE_HINT_BAD_LENGTH);
  EXPECT_EQ(open("EQEAAgECAwSp2Uc8x", ks, &out), RTCE_HINT_BAD_LENGTH);
  EXPECT_EQ(open("EQEAAgECAwSp2Uc-", ks, &out), RTCE_HINT_BAD_CHAR);
  EXPECT_EQ(open("AQEAAgECAwSp2Uc8", ks, &out), RTCE_HINT_BAD_VERSION);  // version nibble 0
  EXPECT_EQ(open("EgEAAgECAwSp2Uc8", ks, &out), RTCE_HINT_UNKNOWN_KEY);  // key id 2
  EXPECT_EQ(open("EQEAAgECAwSp2Uc9", ks, &out), RTCE_HINT_BAD_MAC);
  EXPECT_EQ(open("EQEAAgECAwSp2Uc8", ks, &out), RTCE_HINT_OK);
}

TEST(Hint, TwoLiveKeysAllowRotation) {
  const rtce_hint_key old_key = test_key(1, 0);
  const rtce_hint_key new_key = test_key(2, 100);
  rtce_hint in{};
  in.endpoint_id = 9;
  const std::string old_ufrag = seal(in, old_key);
  const std::string new_ufrag = seal(in, new_key);

  rtce_hint_keyset both{};
  both.keys[0] = new_key;
  both.keys[1] = old_key;
  rtce_hint out{};
  EXPECT_EQ(open(old_ufrag, both, &out), RTCE_HINT_OK);
  EXPECT_EQ(open(new_ufrag, both, &out), RTCE_HINT_OK);

  rtce_hint_keyset retired{};
  retired.keys[0] = new_key;
  EXPECT_EQ(open(old_ufrag, retired, &out), RTCE_HINT_UNKNOWN_KEY);

  // Same id, different secret (a key replaced without a new id): the MAC catches it.
  rtce_hint_keyset replaced{};
  replaced.keys[0] = test_key(1, 50);
  EXPECT_EQ(open(old_ufrag, replaced, &out), RTCE_HINT_BAD_MAC);
}

TEST(Hint, ChromeGoldenRequestCarriesAValidHint) {
  const auto pkt = rtce::test::chrome_binding_request();
  uint32_t off = 0, len = 0;
  ASSERT_EQ(rtce_stun_server_ufrag(pkt.data(), static_cast<uint32_t>(pkt.size()), &off, &len), RTCE_STUN_OK);
  const auto keys = rtce::HintKeys::load_file(rtce::test::source_path("tests/golden/hint-keys.yaml"));
  const rtce_hint_keyset ks = keys.keyset();
  rtce_hint hint{};
  ASSERT_EQ(rtce_hint_open(pkt.data() + off, len, &ks, &hint), RTCE_HINT_OK);
  EXPECT_EQ(hint.cluster_id, 1);
  EXPECT_EQ(hint.endpoint_id, 2);
}

TEST(HintKeys, GeneratedFileLoadsBackAndMints) {
  const auto keys = rtce::HintKeys::generate(3);
  const auto loaded = rtce::HintKeys::parse(keys.to_yaml(), "test");
  ASSERT_EQ(loaded.keys().size(), 1u);
  EXPECT_EQ(loaded.signing_key().id, 3);
  EXPECT_EQ(loaded.signing_key().secret, keys.signing_key().secret);
  const std::string ufrag = rtce::mint_ufrag(loaded, 4, 500);
  const rtce_hint_keyset ks = loaded.keyset();
  rtce_hint hint{};
  ASSERT_EQ(open(ufrag, ks, &hint), RTCE_HINT_OK);
  EXPECT_EQ(hint.cluster_id, 4);
  EXPECT_EQ(hint.endpoint_id, 500);
  EXPECT_NE(rtce::mint_ufrag(loaded, 4, 500), ufrag) << "nonce must be fresh per session";
}

TEST(HintKeys, BadFilesGiveErrorsThatNameTheProblem) {
  auto error_of = [](const std::string& yaml) {
    try {
      rtce::HintKeys::parse(yaml, "keys.yaml");
    } catch (const rtce::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("keys: [").find("not valid YAML"), std::string::npos);
  EXPECT_NE(error_of("foo: 1").find("'keys' list"), std::string::npos);
  EXPECT_NE(error_of("keys: []").find("empty"), std::string::npos);
  EXPECT_NE(error_of("keys: [{id: 16, secret: 000102030405060708090a0b0c0d0e0f}]").find("keys[0].id"),
            std::string::npos);
  EXPECT_NE(error_of("keys: [{id: 1, secret: 0001}]").find("32 hex"), std::string::npos);
  EXPECT_NE(error_of("keys: [{id: 1, secret: zz0102030405060708090a0b0c0d0e0f}]").find("not hexadecimal"),
            std::string::npos);
  EXPECT_NE(error_of("keys: [{id: 1, secret: 000102030405060708090a0b0c0d0e0f}, {id: 1, secret: "
                     "000102030405060708090a0b0c0d0e0f}]")
                .find("listed twice"),
            std::string::npos);
  EXPECT_NE(error_of("keys: [{id: 1, secret: 000102030405060708090a0b0c0d0e0f}, {id: 2, secret: "
                     "000102030405060708090a0b0c0d0e0f}, {id: 3, secret: 000102030405060708090a0b0c0d0e0f}]")
                .find("at most 2"),
            std::string::npos);
}

}  // namespace
