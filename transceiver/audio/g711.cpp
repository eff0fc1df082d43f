// g711.cpp — see g711.h.
#include "g711.h"

#include <array>
#include <cstdlib>

namespace rtce {
namespace {

constexpr int kUlawBias = 0x84;
// The largest magnitude that, biased, still fits the top segment (32635 + 0x84 = 0x7FFF).
constexpr int kUlawClip = 32635;
// Upper bounds of the eight segments, on the biased μ-law magnitude and on the A-law one.
constexpr std::array<int, 8> kSegmentEnds = {0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF, 0x3FFF, 0x7FFF};

constexpr int segment_of(int magnitude) {
  int segment = 0;
  while (segment < 8 && magnitude > kSegmentEnds[segment]) ++segment;
  return segment;  // 8: beyond the top segment
}

constexpr int16_t decode_ulaw(uint8_t code) {
  // μ-law sends every bit inverted (so that silence is not a long run of zeros on T1 lines).
  const int inverted = static_cast<uint8_t>(~code);
  const int segment = (inverted >> 4) & 0x7;
  const int magnitude = ((((inverted & 0x0F) << 3) + kUlawBias) << segment) - kUlawBias;
  return static_cast<int16_t>((inverted & 0x80) ? -magnitude : magnitude);
}

constexpr int16_t decode_alaw(uint8_t code) {
  // A-law inverts the even bits (0x55) for the same reason.
  const int toggled = code ^ 0x55;
  const int segment = (toggled >> 4) & 0x7;
  int magnitude = (toggled & 0x0F) << 4;
  // Each level decodes to the middle of its step: +8 in the linear segments 0 and 1.
  magnitude += segment == 0 ? 8 : 0x108;
  if (segment > 1) magnitude <<= segment - 1;
  return static_cast<int16_t>((toggled & 0x80) ? magnitude : -magnitude);
}

template <int16_t (*Decode)(uint8_t)>
constexpr std::array<int16_t, 256> decode_table() {
  std::array<int16_t, 256> table{};
  for (int code = 0; code < 256; ++code) table[code] = Decode(static_cast<uint8_t>(code));
  return table;
}

constexpr auto kUlawTable = decode_table<decode_ulaw>();
constexpr auto kAlawTable = decode_table<decode_alaw>();

// Fixed points of the tables, so an edit that breaks them fails the build.
static_assert(kUlawTable[0xFF] == 0 && kUlawTable[0x7F] == 0);
static_assert(kUlawTable[0x00] == -32124 && kUlawTable[0x80] == 32124);
static_assert(kAlawTable[0xD5] == 8 && kAlawTable[0x55] == -8);

void check_sizes(size_t in, size_t out) {
  if (in != out) std::abort();
}

}  // namespace

uint8_t ulaw_from_linear(int16_t sample) {
  int magnitude = sample < 0 ? -int{sample} : int{sample};
  const int sign = sample < 0 ? 0x80 : 0x00;
  if (magnitude > kUlawClip) magnitude = kUlawClip;
  magnitude += kUlawBias;
  const int segment = segment_of(magnitude);  // < 8: the clip keeps it in the top segment
  const int mantissa = (magnitude >> (segment + 3)) & 0x0F;
  return static_cast<uint8_t>(~(sign | (segment << 4) | mantissa));
}

int16_t linear_from_ulaw(uint8_t code) { return kUlawTable[code]; }

uint8_t alaw_from_linear(int16_t sample) {
  // A-law has no bias. A negative sample's magnitude is its one's complement (-x - 1), as
  // in ITU-T G.191 and the 13-bit revision of Sun's g711.c: the 16-bit Sun code's -x - 8
  // goes negative for -1..-7 and encodes them as -248, which breaks monotonicity.
  const int mask = sample >= 0 ? 0xD5 : 0x55;
  const int magnitude = sample >= 0 ? int{sample} : -int{sample} - 1;
  const int segment = segment_of(magnitude);  // < 8: 32767 and 32768 - 8 are in the top segment
  const int mantissa = (segment < 2 ? magnitude >> 4 : magnitude >> (segment + 3)) & 0x0F;
  return static_cast<uint8_t>(((segment << 4) | mantissa) ^ mask);
}

int16_t linear_from_alaw(uint8_t code) { return kAlawTable[code]; }

void ulaw_decode(std::span<const uint8_t> in, std::span<int16_t> out) {
  check_sizes(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = kUlawTable[in[i]];
}

void ulaw_encode(std::span<const int16_t> in, std::span<uint8_t> out) {
  check_sizes(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = ulaw_from_linear(in[i]);
}

void alaw_decode(std::span<const uint8_t> in, std::span<int16_t> out) {
  check_sizes(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = kAlawTable[in[i]];
}

void alaw_encode(std::span<const int16_t> in, std::span<uint8_t> out) {
  check_sizes(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = alaw_from_linear(in[i]);
}

}  // namespace rtce
