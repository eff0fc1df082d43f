// proxy_v2_test.cpp — the relay framing (PROXY protocol v2, DGRAM and STREAM): bytes written by hand
// from haproxy's proxy-protocol.txt, round trips, TLV skipping, NOOP padding and every
// rejection.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "flow_key.h"
#include "net_address.h"
#include "rtce_proxy_v2.h"
#include "test_support.h"

namespace {

using rtce::make_flow_key;
using rtce::SocketAddress;
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
  b[13] = 0x31;  // UNIX over STREAM
  EXPECT_EQ(parse(b), RTCE_PP2_UNSUPPORTED_FAMILY);
  b = base;
  b[13] = 0x13;  // INET over an unknown transport
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

TEST(ProxyV2, NoopTlvIsTypeLengthAndZeros) {
  uint8_t out[16];
  std::memset(out, 0xaa, sizeof out);
  ASSERT_EQ(rtce_pp2_write_noop(out, sizeof out, 7), 7u);
  EXPECT_EQ(std::vector<uint8_t>(out, out + 8), from_hex("04000400000000aa"))
      << "type 0x04, length 4, 4 zeros";
  ASSERT_EQ(rtce_pp2_write_noop(out, sizeof out, RTCE_PP2_TLV_HEADER_LEN), 3u);
  EXPECT_EQ(std::vector<uint8_t>(out, out + 3), from_hex("040000")) << "the smallest TLV: no value";
  EXPECT_EQ(rtce_pp2_write_noop(out, sizeof out, 2), 0u) << "no TLV is shorter than 3 bytes";
  EXPECT_EQ(rtce_pp2_write_noop(out, sizeof out, 0), 0u);
  EXPECT_EQ(rtce_pp2_write_noop(out, sizeof out, sizeof out + 1), 0u) << "beyond cap";
}

// What the relay sends with GSO: the header padded to a size class, the payload unchanged,
// and what a transceiver parses from it: the same flow, the payload where it now starts.
TEST(ProxyV2, PaddedHeaderRoundTripsEveryPadBothFamilies) {
  std::mt19937 rng(11);
  for (int family : {RTCE_FAMILY_V4, RTCE_FAMILY_V6}) {
    for (uint32_t pad : {0u, 3u, 4u, 5u, 31u, 64u, 255u, 1000u}) {
      rtce_flow_key key{};
      key.family = static_cast<uint8_t>(family);
      for (int b = 0; b < (family == RTCE_FAMILY_V6 ? 16 : 4); b++) {
        key.client_addr[b] = static_cast<uint8_t>(rng());
        key.vip_addr[b] = static_cast<uint8_t>(rng());
      }
      key.client_port_be = static_cast<uint16_t>(rng());
      key.vip_port_be = static_cast<uint16_t>(rng());
      std::vector<uint8_t> framed(RTCE_PP2_LEN_V6 + 40);
      const uint32_t h = rtce_pp2_write_key(framed.data(), static_cast<uint32_t>(framed.size()), &key);
      framed.resize(h);
      const std::vector<uint8_t> payload = {0x80, 0x6f, 0x01, 0x02, 0x03};
      framed.insert(framed.end(), payload.begin(), payload.end());

      std::vector<uint8_t> padded(h + pad + 8, 0xee);
      const uint32_t ph = rtce_pp2_write_padded(padded.data(), static_cast<uint32_t>(padded.size()),
                                                framed.data(), static_cast<uint32_t>(framed.size()), pad);
      ASSERT_EQ(ph, h + pad) << "family " << family << " pad " << pad;
      padded.resize(ph);
      padded.insert(padded.end(), payload.begin(), payload.end());
      EXPECT_EQ(padded.size(), framed.size() + pad);

      rtce_flow_key back{};
      uint32_t off = 0;
      ASSERT_EQ(rtce_pp2_parse_key(padded.data(), static_cast<uint32_t>(padded.size()), &back, &off),
                RTCE_PP2_OK);
      EXPECT_EQ(std::memcmp(&key, &back, sizeof key), 0) << "the same flow";
      EXPECT_EQ(off, h + pad);
      EXPECT_EQ(std::vector<uint8_t>(padded.begin() + off, padded.end()), payload);
      if (pad > 0) {
        EXPECT_EQ(padded[h], RTCE_PP2_TYPE_NOOP);
        EXPECT_EQ(rtce_load_be16(&padded[h + 1]), pad - RTCE_PP2_TLV_HEADER_LEN);
      }
      // A reply is written from the key: the unpadded header the flow had.
      uint8_t reply[RTCE_PP2_LEN_V6];
      ASSERT_EQ(rtce_pp2_write_key(reply, sizeof reply, &back), h);
      EXPECT_EQ(std::memcmp(reply, framed.data(), h), 0);
    }
  }
}

TEST(ProxyV2, PaddingKeepsTheHeadersOwnTlvsAndCanBeRepeated) {
  auto framed = from_hex(kV4Header);
  framed[15] = 12 + 7;  // the address block and one 7-byte TLV
  for (uint8_t b : {0xea, 0x00, 0x04, 0x01, 0x02, 0x03, 0x04, 0x80}) framed.push_back(b);
  uint8_t once[128], twice[128];
  const uint32_t a =
      rtce_pp2_write_padded(once, sizeof once, framed.data(), static_cast<uint32_t>(framed.size()), 5);
  ASSERT_EQ(a, RTCE_PP2_LEN_V4 + 7u + 5u);
  EXPECT_EQ(std::vector<uint8_t>(once + RTCE_PP2_LEN_V4, once + RTCE_PP2_LEN_V4 + 7),
            std::vector<uint8_t>(framed.begin() + RTCE_PP2_LEN_V4, framed.end() - 1));
  once[a] = 0x80;
  const uint32_t b = rtce_pp2_write_padded(twice, sizeof twice, once, a + 1, 3);
  ASSERT_EQ(b, a + 3);
  twice[b] = 0x80;
  rtce_flow_key key{};
  uint32_t off = 0;
  ASSERT_EQ(rtce_pp2_parse_key(twice, b + 1, &key, &off), RTCE_PP2_OK);
  EXPECT_EQ(off, b);
  EXPECT_EQ(twice[off], 0x80);
}

TEST(ProxyV2, PaddingRefusesWhatItCannotWrite) {
  const auto framed = from_hex(std::string(kV4Header) + "80");
  const auto n = static_cast<uint32_t>(framed.size());
  uint8_t out[4096];
  EXPECT_EQ(rtce_pp2_write_padded(out, sizeof out, framed.data(), n, 1), 0u) << "no 1-byte TLV";
  EXPECT_EQ(rtce_pp2_write_padded(out, sizeof out, framed.data(), n, 2), 0u) << "no 2-byte TLV";
  EXPECT_EQ(rtce_pp2_write_padded(out, RTCE_PP2_LEN_V4 + 9, framed.data(), n, 10), 0u) << "cap";
  EXPECT_EQ(rtce_pp2_write_padded(out, RTCE_PP2_LEN_V4 + 10, framed.data(), n, 10), RTCE_PP2_LEN_V4 + 10u);
  EXPECT_EQ(rtce_pp2_write_padded(out, sizeof out, framed.data(), RTCE_PP2_LEN_V4 - 1, 4), 0u)
      << "a truncated header";
  auto bad = framed;
  bad[0] = 0x16;
  EXPECT_EQ(rtce_pp2_write_padded(out, sizeof out, bad.data(), n, 4), 0u) << "not a PROXY v2 header";
  EXPECT_EQ(rtce_pp2_write_padded(out, sizeof out, framed.data(), n, 0xfffffffau), 0u)
      << "a pad that would wrap";
  std::vector<uint8_t> big(70000);
  auto huge = framed;
  huge[14] = 0xff;  // a 65532-byte block: one more TLV would not fit the length field
  huge[15] = 0xfc;
  huge.resize(RTCE_PP2_FIXED_LEN + 0xfffc);
  EXPECT_EQ(rtce_pp2_write_padded(big.data(), static_cast<uint32_t>(big.size()), huge.data(),
                                  static_cast<uint32_t>(huge.size()), 4),
            0u);
  EXPECT_EQ(rtce_pp2_write_padded(big.data(), static_cast<uint32_t>(big.size()), huge.data(),
                                  static_cast<uint32_t>(huge.size()), 3),
            RTCE_PP2_FIXED_LEN + 0xffffu)
      << "exactly 65535";
}

}  // namespace

// ICE-TCP: a TCP flow's header says STREAM (0x11 / 0x21), and reads back as the same key,
// transport included; a DGRAM header reads as UDP. Nothing else of the layout changes.
TEST(ProxyV2, TcpFlowsAreStreamHeadersBothFamilies) {
  for (const char* client : {"198.18.0.10:50000", "[2001:db8::10]:50000"}) {
    const bool v6 = client[0] == '[';
    rtce_flow_key key = make_flow_key(*SocketAddress::parse(client),
                                      *SocketAddress::parse(v6 ? "[2001:db8::1]:443" : "198.18.0.1:443"));
    key.transport = RTCE_TRANSPORT_TCP;
    uint8_t out[RTCE_PP2_LEN_V6];
    const uint32_t n = rtce_pp2_write_key(out, sizeof out, &key);
    ASSERT_EQ(n, v6 ? RTCE_PP2_LEN_V6 : RTCE_PP2_LEN_V4);
    EXPECT_EQ(out[13], v6 ? RTCE_PP2_FAM_INET6_STREAM : RTCE_PP2_FAM_INET_STREAM);
    rtce_flow_key back{};
    uint32_t off = 0;
    ASSERT_EQ(rtce_pp2_parse_key(out, n, &back, &off), RTCE_PP2_OK);
    EXPECT_EQ(off, n);
    EXPECT_TRUE(back == key) << client;
    key.transport = RTCE_TRANSPORT_UDP;
    ASSERT_EQ(rtce_pp2_write_key(out, sizeof out, &key), n);
    EXPECT_EQ(out[13], v6 ? RTCE_PP2_FAM_INET6_DGRAM : RTCE_PP2_FAM_INET_DGRAM);
    ASSERT_EQ(rtce_pp2_parse_key(out, n, &back, &off), RTCE_PP2_OK);
    EXPECT_EQ(back.transport, RTCE_TRANSPORT_UDP);
    key.transport = 7;  // no such transport: nothing written
    EXPECT_EQ(rtce_pp2_write_key(out, sizeof out, &key), 0u);
  }
}
