// g711.h — ITU-T G.711 μ-law and A-law, the 8 kHz codecs of the telephone network (Twilio
// Media Streams carry μ-law). Decoding is a 256-entry table. Encoding is the segment search
// of Sun's reference g711.c: μ-law quantizes the magnitude (bias 0x84, clipped at 32635), so
// x and -x differ only in the sign bit; A-law takes a negative sample's one's complement, as
// ITU-T G.191 and Python's audioop do.
#pragma once

#include <cstdint>
#include <span>

namespace rtce {

uint8_t ulaw_from_linear(int16_t sample);
int16_t linear_from_ulaw(uint8_t code);
uint8_t alaw_from_linear(int16_t sample);
int16_t linear_from_alaw(uint8_t code);

// Whole buffers, sample i to code i. Precondition: in.size() == out.size(); a mismatch is
// a caller's bug and aborts (checked in every build: writing past `out` would be worse).
void ulaw_decode(std::span<const uint8_t> in, std::span<int16_t> out);
void ulaw_encode(std::span<const int16_t> in, std::span<uint8_t> out);
void alaw_decode(std::span<const uint8_t> in, std::span<int16_t> out);
void alaw_encode(std::span<const int16_t> in, std::span<uint8_t> out);

}  // namespace rtce
