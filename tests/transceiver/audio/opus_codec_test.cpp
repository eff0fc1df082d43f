// opus_codec_test.cpp — Opus round trips of a 440 Hz tone at every supported rate (the
// decoded pitch must stay within 2%), in-band FEC recovery of a dropped packet, PLC, and
// the error paths.
#include "audio/opus_codec.h"

#include <gtest/gtest.h>
#include <opus.h>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

namespace rtce {
namespace {

std::vector<int16_t> tone(int rate, double hz, int frames, double amplitude = 0.5) {
  std::vector<int16_t> pcm(static_cast<size_t>(samples_per_20ms(rate) * frames));
  for (size_t i = 0; i < pcm.size(); ++i)
    pcm[i] = static_cast<int16_t>(amplitude * 32767 * std::sin(2 * std::numbers::pi * hz * i / rate));
  return pcm;
}

// Frequency from rising zero crossings, interpolated between samples.
double measured_frequency(std::span<const int16_t> pcm, int rate) {
  double first = -1, last = -1;
  int crossings = 0;
  for (size_t i = 1; i < pcm.size(); ++i) {
    if (pcm[i - 1] < 0 && pcm[i] >= 0) {
      const double t = (i - 1) + static_cast<double>(-pcm[i - 1]) / (pcm[i] - pcm[i - 1]);
      if (first < 0) first = t;
      last = t;
      ++crossings;
    }
  }
  if (crossings < 2) return 0;
  return (crossings - 1) / ((last - first) / rate);
}

double energy(std::span<const int16_t> pcm) {
  double sum = 0;
  for (int16_t s : pcm) sum += static_cast<double>(s) * s;
  return sum / static_cast<double>(pcm.size());
}

class OpusRoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(OpusRoundTrip, ToneKeepsItsPitch) {
  const int rate = GetParam();
  const int frame = samples_per_20ms(rate);
  constexpr int kFrames = 50;
  const auto input = tone(rate, 440.0, kFrames);
  OpusEncoderHandle encoder(rate);
  OpusDecoderHandle decoder(rate);
  std::vector<int16_t> output(input.size());
  std::vector<uint8_t> packet(1500);
  for (int f = 0; f < kFrames; ++f) {
    const int bytes = encoder.encode(std::span(input).subspan(f * frame, frame), packet);
    ASSERT_GT(bytes, 0) << opus_strerror(bytes);
    ASSERT_LT(bytes, 400);  // 32 kbps is 80 bytes per 20 ms frame; far above means a wrong setup
    const int samples =
        decoder.decode(std::span(packet).first(bytes), std::span(output).subspan(f * frame, frame));
    ASSERT_EQ(samples, frame);
  }
  // Skip the codec's start-up; the rest must be a 440 Hz tone of similar level.
  const std::span<const int16_t> steady = std::span(output).subspan(5 * frame);
  EXPECT_NEAR(measured_frequency(steady, rate), 440.0, 440.0 * 0.02);
  const double level_ratio = energy(steady) / energy(std::span(input).subspan(5 * frame));
  EXPECT_GT(level_ratio, 0.5);
  EXPECT_LT(level_ratio, 2.0);
}

INSTANTIATE_TEST_SUITE_P(Rates, OpusRoundTrip, ::testing::Values(16000, 24000, 48000));

TEST(OpusCodec, FecRecoversADroppedPacket) {
  for (int rate : {16000, 48000}) {
    SCOPED_TRACE(rate);
    const int frame = samples_per_20ms(rate);
    constexpr int kFrames = 40, kLost = 25;
    // A tone with a slow tremolo so frames differ and concealment cannot just repeat one.
    auto input = tone(rate, 300.0, kFrames);
    for (size_t i = 0; i < input.size(); ++i)
      input[i] =
          static_cast<int16_t>(input[i] * (0.6 + 0.4 * std::sin(2 * std::numbers::pi * 3.0 * i / rate)));
    OpusEncoderHandle encoder(rate);
    std::vector<std::vector<uint8_t>> packets;
    for (int f = 0; f < kFrames; ++f) {
      std::vector<uint8_t> packet(1500);
      const int bytes = encoder.encode(std::span(input).subspan(f * frame, frame), packet);
      ASSERT_GT(bytes, 0);
      packet.resize(static_cast<size_t>(bytes));
      packets.push_back(std::move(packet));
    }
    OpusDecoderHandle reference(rate), with_fec(rate), with_plc(rate);
    std::vector<int16_t> ref(frame), fec(frame), plc(frame), scratch(frame);
    for (int f = 0; f < kFrames; ++f) {
      ASSERT_EQ(reference.decode(packets[f], ref), frame);
      if (f == kLost) {
        ASSERT_EQ(with_fec.decode_fec(packets[f + 1], fec), frame);
        ASSERT_EQ(with_plc.conceal(plc), frame);
        break;
      }
      ASSERT_EQ(with_fec.decode(packets[f], scratch), frame);
      ASSERT_EQ(with_plc.decode(packets[f], scratch), frame);
    }
    // The recovered frame carries the lost audio's energy (within 3 dB) ...
    const double ratio = energy(fec) / energy(ref);
    EXPECT_GT(ratio, 0.5);
    EXPECT_LT(ratio, 2.0);
    // ... and is closer to it than concealment's guess.
    double fec_error = 0, plc_error = 0;
    for (int i = 0; i < frame; ++i) {
      fec_error += std::pow(fec[i] - ref[i], 2);
      plc_error += std::pow(plc[i] - ref[i], 2);
    }
    EXPECT_LT(fec_error, plc_error);
  }
}

TEST(OpusCodec, ConcealmentFadesRatherThanFails) {
  OpusDecoderHandle decoder(48000);
  std::vector<int16_t> pcm(960);
  EXPECT_EQ(decoder.conceal(pcm), 960);
  EXPECT_EQ(decoder.conceal(std::span(pcm).first(480)), 480);  // 10 ms
}

TEST(OpusCodec, ErrorsAreReturnedNotThrown) {
  OpusDecoderHandle decoder(24000);
  std::vector<int16_t> pcm(480);
  std::vector<uint8_t> empty;
  EXPECT_EQ(decoder.decode(empty, pcm), OPUS_BAD_ARG);
  EXPECT_EQ(decoder.decode_fec(empty, pcm), OPUS_BAD_ARG);
  // A 60 ms packet (TOC config 3: SILK NB 60 ms) does not fit a 20 ms buffer.
  const std::vector<uint8_t> sixty_ms = {0x18, 0x00, 0x00};
  EXPECT_LT(decoder.decode(sixty_ms, pcm), 0);
  OpusEncoderHandle encoder(24000);
  std::vector<uint8_t> out(100);
  EXPECT_EQ(encoder.encode(std::span(pcm).first(100), out), OPUS_BAD_ARG);
}

TEST(OpusCodec, ConstructionValidatesItsArguments) {
  EXPECT_THROW(OpusDecoderHandle(44100), std::invalid_argument);
  EXPECT_THROW(OpusEncoderHandle(8000), std::invalid_argument);
  EXPECT_THROW(OpusEncoderHandle(48000, OpusEncoderConfig{.complexity = 11}), std::invalid_argument);
  EXPECT_NO_THROW(OpusEncoderHandle(48000, OpusEncoderConfig{.bitrate_bps = 64000, .complexity = 10}));
}

}  // namespace
}  // namespace rtce
