// stun_test.cpp — the relay's minimal STUN walk: Chrome's real request, truncation at
// every offset, attribute order, and every rejection.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtce_stun.h"
#include "stun_payloads.h"
#include "test_support.h"

namespace {

// STUN messages built independently of the walk (tests/support/stun_payloads.h).
using rtce::xdp_packets::Attr;
using rtce::xdp_packets::stun;

rtce_stun_result walk(const std::vector<uint8_t>& p, std::string* ufrag = nullptr) {
  uint32_t off = 0, len = 0;
  auto r = rtce_stun_server_ufrag(p.data(), static_cast<uint32_t>(p.size()), &off, &len);
  if (r == RTCE_STUN_OK && ufrag) *ufrag = std::string(reinterpret_cast<const char*>(p.data()) + off, len);
  return r;
}

TEST(StunWalk, FindsTheServerUfragInChromesRequest) {
  std::string ufrag;
  ASSERT_EQ(walk(rtce::test::chrome_binding_request(), &ufrag), RTCE_STUN_OK);
  EXPECT_EQ(ufrag, rtce::test::kChromeServerUfrag);
}

TEST(StunWalk, EveryTruncationOfChromesRequestIsRejected) {
  const auto full = rtce::test::chrome_binding_request();
  for (size_t len = 0; len < full.size(); len++) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(len));
    EXPECT_NE(walk(cut), RTCE_STUN_OK) << "length " << len;
  }
  auto longer = full;
  longer.push_back(0);
  EXPECT_EQ(walk(longer), RTCE_STUN_TRUNCATED) << "datagram longer than the message";
}

TEST(StunWalk, UsernameAfterOtherAttributes) {
  std::string ufrag;
  auto p = stun(0x0001, {{0xc057, "\x00\x01\x00\x00"}, {0x0024, "abcd"}, {0x0006, "SERVERUFRAGxxxxx:cl"}});
  ASSERT_EQ(walk(p, &ufrag), RTCE_STUN_OK);
  EXPECT_EQ(ufrag, "SERVERUFRAGxxxxx");
}

TEST(StunWalk, UsernameBeyondTheAttributeBoundIsNotSearched) {
  std::vector<Attr> attrs(RTCE_STUN_MAX_ATTRS, Attr{0x8022, "pad"});
  attrs.push_back({0x0006, "a:b"});
  EXPECT_EQ(walk(stun(0x0001, attrs)), RTCE_STUN_NO_USERNAME);
  attrs.erase(attrs.begin());
  EXPECT_EQ(walk(stun(0x0001, attrs)), RTCE_STUN_OK);
}

TEST(StunWalk, RejectionReasons) {
  EXPECT_EQ(walk({}), RTCE_STUN_NOT_STUN);
  EXPECT_EQ(walk({0x80, 0x00}), RTCE_STUN_NOT_STUN) << "RTP";
  EXPECT_EQ(walk({0x16, 0xfe, 0xfd}), RTCE_STUN_NOT_STUN) << "DTLS";
  EXPECT_EQ(walk({0x00, 0x01, 0x00}), RTCE_STUN_TRUNCATED);
  auto p = stun(0x0001, {{0x0006, "a:b"}});
  p[4] = 0;
  EXPECT_EQ(walk(p), RTCE_STUN_NOT_STUN) << "magic cookie";
  p = stun(0x0001, {{0x0006, "a:b"}});
  p[3] |= 1;
  EXPECT_EQ(walk(p), RTCE_STUN_BAD_LENGTH);
  EXPECT_EQ(walk(stun(0x0101, {{0x0006, "a:b"}})), RTCE_STUN_NOT_BINDING_REQUEST) << "success response";
  EXPECT_EQ(walk(stun(0x0011, {{0x0006, "a:b"}})), RTCE_STUN_NOT_BINDING_REQUEST) << "indication";
  EXPECT_EQ(walk(stun(0x0001, {})), RTCE_STUN_NO_USERNAME);
  EXPECT_EQ(walk(stun(0x0001, {{0x0024, "abcd"}})), RTCE_STUN_NO_USERNAME);
  EXPECT_EQ(walk(stun(0x0001, {{0x0006, "nocolon"}})), RTCE_STUN_BAD_USERNAME);
  EXPECT_EQ(walk(stun(0x0001, {{0x0006, ":client"}})), RTCE_STUN_BAD_USERNAME);
  EXPECT_EQ(walk(stun(0x0001, {{0x0006, ""}})), RTCE_STUN_BAD_USERNAME);
  EXPECT_EQ(walk(stun(0x0001, {{0x0006, std::string(600, 'a') + ":b"}})), RTCE_STUN_BAD_USERNAME);
  // An attribute whose length runs past the message.
  p = stun(0x0001, {{0x0024, "abcd"}});
  p[23] = 200;
  EXPECT_EQ(walk(p), RTCE_STUN_BAD_ATTRIBUTE);
}

}  // namespace
