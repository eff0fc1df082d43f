// proxy_v2_test.cpp — the relay framing (PROXY protocol v2, DGRAM): bytes written by hand
// from haproxy's proxy-protocol.txt, round trips, TLV skipping and every rejection.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "rtce_proxy_v2.h"
#include "test_support.h"

namespace {

using rtce::test::from_hex;

rtce_pp2_flow v4_flow() {
  rtce_pp2_flow f{};
  f.family = RTCE_FAMILY_V4;
  const uint8_t client[4] = {198, 18, 0, 1};
  const uint8_t vip[4] = {198, 18, 0, 2};
  std::memcpy(f.client_addr, client, 4);
  std::memcpy(f.vip_addr, vip, 4);
  f.client_port = 50000;
  f.vip_port = 3478;
  return f;
}

// signature | 0x21 PROXY v2 | 0x12 INET+DGRAM | length 12 | src | dst | sport | dport
const char* kV4Header =
    "0d0a0d0a000d0a515549540a"
    "21"
    "12"
    "000c"
    "c6120001"
    "c6120002"
    "c350"
    "0d96";

TEST(ProxyV2, WritesTheSpecLayoutForIpv4) {
  uint8_t out[64];
  const rtce_pp2_flow f = v4_flow();
  ASSERT_EQ(rtce_pp2_write(out, sizeof out, &f), static_cast<uint32_t>(RTCE_PP2_LEN_V4));
  EXPECT_EQ(std::vector<uint8_t>(out, out + RTCE_PP2_LEN_V4), from_hex(kV4Header));
}

TEST(ProxyV2, ParsesHandWrittenIpv6Header) {
  auto bytes = from_hex(
      "0d0a0d0a000d0a515549540a"
      "21"
      "22"
      "0024"
      "20010db8000000000000000000000001"
      "20010db8000000000000000000000002"
      "1f90"
      "0d96"
      "8001");
  rtce_pp2_flow f{};
  uint32_t off = 0;
  ASSERT_EQ(rtce_pp2_parse(bytes.data(), static_cast<uint32_t>(bytes.size()), &f, &off), RTCE_PP2_OK);
  EXPECT_EQ(f.family, RTCE_FAMILY_V6);
  EXPECT_EQ(f.client_port, 8080);
  EXPECT_EQ(f.vip_port, 3478);
  EXPECT_EQ(f.client_addr[15], 1);
  EXPECT_EQ(f.vip_addr[15], 2);
  EXPECT_EQ(off, static_cast<uint32_t>(RTCE_PP2_LEN_V6));
  EXPECT_EQ(bytes[off], 0x80) << "payload starts right after the header";
}

TEST(ProxyV2, RoundTripsRandomFlowsBothFamilies) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; i++) {
    rtce_pp2_flow in{};
    in.family = (i & 1) ? RTCE_FAMILY_V6 : RTCE_FAMILY_V4;
    const int alen = in.family == RTCE_FAMILY_V6 ? 16 : 4;
    for (int b = 0; b < alen; b++) {
      in.client_addr[b] = static_cast<uint8_t>(rng());
      in.vip_addr[b] = static_cast<uint8_t>(rng());
    }
    in.client_port = static_cast<uint16_t>(rng());
    in.vip_port = static_cast<uint16_t>(rng());
    uint8_t buf[128];
    const uint32_t n = rtce_pp2_write(buf, sizeof buf, &in);
    ASSERT_EQ(n, rtce_pp2_header_len(in.family));
    buf[n] = 0x16;  // a DTLS record follows
    rtce_pp2_flow out{};
    uint32_t off = 0;
    ASSERT_EQ(rtce_pp2_parse(buf, n + 1, &out, &off), RTCE_PP2_OK);
    EXPECT_EQ(off, n);
    EXPECT_EQ(std::memcmp(&in, &out, sizeof in), 0);
  }
}

TEST(ProxyV2, FirstByteIsOutsideEveryRfc7983Range) {
  const uint8_t b = rtce_pp2_signature[0];
  EXPECT_FALSE(b <= 3);                // STUN
  EXPECT_FALSE(b >= 16 && b <= 19);    // ZRTP
  EXPECT_FALSE(b >= 20 && b <= 63);    // DTLS
  EXPECT_FALSE(b >= 64 && b <= 79);    // TURN channel
  EXPECT_FALSE(b >= 128 && b <= 191);  // RTP/RTCP
}

TEST(ProxyV2, SkipsTlvsAfterTheAddresses) {
  auto bytes = from_hex(kV4Header);
  bytes[15] = 12 + 7;  // address block + one 7-byte TLV (type, len 4, value)
  for (uint8_t b : {0xea, 0x00, 0x04, 0x01, 0x02, 0x03, 0x04}) bytes.push_back(b);
  bytes.push_back(0x80);
  rtce_pp2_flow f{};
  uint32_t off = 0;
  ASSERT_EQ(rtce_pp2_parse(bytes.data(), static_cast<uint32_t>(bytes.size()), &f, &off), RTCE_PP2_OK);
  EXPECT_EQ(off, static_cast<uint32_t>(RTCE_PP2_LEN_V4 + 7));
}

TEST(ProxyV2, RejectsEveryTruncation) {
  const auto bytes = from_hex(kV4Header);
  for (size_t len = 0; len < bytes.size(); len++) {
    rtce_pp2_flow f{};
    uint32_t off = 0;
    EXPECT_EQ(rtce_pp2_parse(bytes.data(), static_cast<uint32_t>(len), &f, &off), RTCE_PP2_TRUNCATED) << len;
  }
}

TEST(ProxyV2, RejectionReasons) {
  rtce_pp2_flow f{};
  uint32_t off = 0;
  auto parse = [&](std::vector<uint8_t> b) {
    return rtce_pp2_parse(b.data(), static_cast<uint32_t>(b.size()), &f, &off);
  };
  auto base = from_hex(kV4Header);
  auto b = base;
  b[5] = 0;
  EXPECT_EQ(parse(b), RTCE_PP2_BAD_SIGNATURE);
  b = base;
  b[12] = 0x11;
  EXPECT_EQ(parse(b), RTCE_PP2_BAD_VERSION);
  b = base;
  b[12] = RTCE_PP2_VER_CMD_LOCAL;
  EXPECT_EQ(parse(b), RTCE_PP2_NOT_PROXY);
  b = base;
  b[13] = 0x11;  // INET over STREAM
  EXPECT_EQ(parse(b), RTCE_PP2_UNSUPPORTED_FAMILY);
  b = base;
  b[15] = 8;  // too short for two IPv4 addresses and ports
  EXPECT_EQ(parse(b), RTCE_PP2_BAD_LENGTH);
  EXPECT_EQ(parse(from_hex("16fefd00000000")), RTCE_PP2_BAD_SIGNATURE) << "a DTLS record is not framed";
}

TEST(ProxyV2, WriteRefusesSmallBuffersAndUnknownFamilies) {
  uint8_t out[64];
  rtce_pp2_flow f = v4_flow();
  EXPECT_EQ(rtce_pp2_write(out, RTCE_PP2_LEN_V4 - 1, &f), 0u);
  f.family = 9;
  EXPECT_EQ(rtce_pp2_write(out, sizeof out, &f), 0u);
}

}  // namespace
