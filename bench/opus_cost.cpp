// opus_cost.cpp — what the transceiver's transcoding adds per frame, measured stand-alone:
// decode one Opus packet to PCM at the Call's rate and encode that PCM again, with the
// transceiver's own codec handles and settings (transceiver/audio/opus_codec.h). The
// packet is the one every load-generator session sends (rtce_session_loadgen
// --write-opus-frame), so bench/run_peers_bench.sh can set transcoding's CPU per
// session-second against passthrough's plus this (issue 25 §2: <= 1.15x).
//
//   rtce_opus_cost --frame FILE [--rate 16000] [--complexity 0] [--bitrate 32000] [--frames 20000]
//
// Prints one JSON object: microseconds of thread CPU per frame (decode, encode, both) and
// the milliseconds per session-second at 50 frames a second.
#include <time.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "audio/opus_codec.h"

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string frame_file;
  int rate = 16000, complexity = 0, bitrate = 32000, frames = 20000;
  CLI::App app{"Opus decode + encode per 20 ms frame, as the transceiver transcodes"};
  app.add_option("--frame", frame_file, "the Opus packet to decode (rtce_session_loadgen --write-opus-frame)")
      ->required();
  app.add_option("--rate", rate, "the Call's sample rate")->check(CLI::IsMember({16000, 24000, 48000}));
  app.add_option("--complexity", complexity, "encoder complexity")->check(CLI::Range(0, 10));
  app.add_option("--bitrate", bitrate, "encoder bitrate (bit/s)")->check(CLI::Range(6000, 510000));
  app.add_option("--frames", frames, "frames to time")->check(CLI::Range(100, 10'000'000));
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(frame_file, std::ios::binary);
  const std::vector<uint8_t> packet{std::istreambuf_iterator<char>(in), {}};
  if (packet.empty()) {
    std::fprintf(stderr, "rtce_opus_cost: %s: empty or unreadable\n", frame_file.c_str());
    return 2;
  }
  rtce::OpusDecoderHandle decoder(rate);
  rtce::OpusEncoderConfig config;
  config.complexity = complexity;
  config.bitrate_bps = bitrate;
  rtce::OpusEncoderHandle encoder(rate, config);
  std::vector<int16_t> pcm(5760);
  std::vector<uint8_t> out(1275);
  const auto frame = static_cast<size_t>(rtce::samples_per_20ms(rate));

  double decode_s = 0, encode_s = 0;
  for (int i = 0; i < frames; ++i) {
    const double t0 = thread_cpu_seconds();
    const int samples = decoder.decode(packet, pcm);
    const double t1 = thread_cpu_seconds();
    if (samples != static_cast<int>(frame) || encoder.encode(std::span(pcm).first(frame), out) <= 0) {
      std::fprintf(stderr, "rtce_opus_cost: frame %d did not round-trip (%d samples)\n", i, samples);
      return 1;
    }
    const double t2 = thread_cpu_seconds();
    decode_s += t1 - t0;
    encode_s += t2 - t1;
  }
  const double decode_us = decode_s / frames * 1e6, encode_us = encode_s / frames * 1e6;
  std::printf(
      "{\"rate\": %d, \"complexity\": %d, \"bitrate\": %d, \"frames\": %d, \"decode_us\": %.2f, "
      "\"encode_us\": %.2f, \"per_frame_us\": %.2f, \"ms_per_session_second\": %.4f}\n",
      rate, complexity, bitrate, frames, decode_us, encode_us, decode_us + encode_us,
      (decode_us + encode_us) * 50 / 1000);
  return 0;
}
