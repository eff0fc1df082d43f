// session_id_test.cpp — session ids name their owner under the fleet's hint key: a minted id
// opens to its endpoint with the same keys (and after a rotation that keeps the old key), and
// a forged, mistyped, foreign-fleet or hint-shaped id opens to nothing.
#include "session_id.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rtce {
namespace {

HintKeys keys_of(const std::string& yaml) { return HintKeys::parse(yaml, "test"); }

const HintKeys kOld = keys_of("keys:\n  - id: 1\n    secret: 00112233445566778899aabbccddeeff\n");
const HintKeys kRotated = keys_of(
    "keys:\n  - id: 2\n    secret: ffeeddccbbaa99887766554433221100\n"
    "  - id: 1\n    secret: 00112233445566778899aabbccddeeff\n");
const HintKeys kOtherFleet = keys_of("keys:\n  - id: 1\n    secret: 0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f\n");

TEST(SessionId, AMintedIdNamesItsEndpoint) {
  for (uint16_t endpoint : {uint16_t{1}, uint16_t{300}, uint16_t{65535}}) {
    const std::string id = mint_session_id(kOld, endpoint);
    ASSERT_EQ(id.size(), kSessionIdChars);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    EXPECT_EQ(session_id_owner(kOld, id), endpoint);
  }
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(mint_session_id(kOld, 7));
  EXPECT_EQ(ids.size(), 1000u) << "72 random bits per id";
}

TEST(SessionId, ARotationKeepsTheOldKeysIds) {
  const std::string old_id = mint_session_id(kOld, 9);
  const std::string new_id = mint_session_id(kRotated, 9);
  EXPECT_EQ(session_id_owner(kRotated, old_id), 9);
  EXPECT_EQ(session_id_owner(kRotated, new_id), 9);
  EXPECT_FALSE(session_id_owner(kOld, new_id)) << "a pod without the new key cannot open its ids";
}

TEST(SessionId, ForgedMistypedAndForeignIdsOpenToNothing) {
  const std::string id = mint_session_id(kOld, 5);
  EXPECT_FALSE(session_id_owner(kOtherFleet, id));
  for (size_t i = 0; i < id.size(); ++i) {
    std::string forged = id;
    forged[i] = forged[i] == '0' ? '1' : '0';
    EXPECT_FALSE(session_id_owner(kOld, forged)) << "digit " << i << " flipped: " << forged;
  }
  std::string upper = id;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper != id) EXPECT_FALSE(session_id_owner(kOld, upper));
  EXPECT_FALSE(session_id_owner(kOld, id.substr(1)));
  EXPECT_FALSE(session_id_owner(kOld, id + "0"));
  EXPECT_FALSE(session_id_owner(kOld, ""));
  EXPECT_FALSE(session_id_owner(kOld, std::string(32, 'z')));
  EXPECT_FALSE(session_id_owner(kOld, std::string(32, '0')));
}

}  // namespace
}  // namespace rtce
