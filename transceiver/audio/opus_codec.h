// opus_codec.h — RAII handles for one libopus decoder and encoder (mono, 16/24/48 kHz),
// configured for interactive voice: VOIP application, in-band FEC, no DTX. Decoding also
// offers FEC recovery of a lost frame from the next packet and packet-loss concealment.
// Passthrough needs nothing here: forward the Opus payload without decoding it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

struct OpusDecoder;
struct OpusEncoder;

namespace rtce {

// Frees a libopus decoder or encoder (defined in opus_codec.cpp, where opus.h is).
struct OpusDeleter {
  void operator()(OpusDecoder* decoder) const;
  void operator()(OpusEncoder* encoder) const;
};

// True for the rates the handles accept: 16000, 24000, 48000.
bool is_supported_opus_rate(int sample_rate);
// Samples in one 20 ms frame at `sample_rate`.
constexpr int samples_per_20ms(int sample_rate) { return sample_rate / 50; }

class OpusDecoderHandle {
 public:
  // Throws std::invalid_argument for an unsupported rate, std::runtime_error if libopus fails.
  explicit OpusDecoderHandle(int sample_rate);

  // Decodes one packet into `pcm` (room for the packet's duration: 20 ms frames need
  // samples_per_20ms, the largest Opus packet 120 ms). Returns samples per channel, or a
  // negative OPUS_* error (an empty packet is OPUS_BAD_ARG).
  int decode(std::span<const uint8_t> packet, std::span<int16_t> pcm);
  // Recovers the frame lost just before `next_packet` from its in-band FEC data; `pcm`
  // must be exactly the lost frame's duration. Without FEC data in the packet libopus
  // conceals instead. Returns samples or a negative error.
  int decode_fec(std::span<const uint8_t> next_packet, std::span<int16_t> pcm);
  // Packet-loss concealment for `pcm.size()` samples (a multiple of 2.5 ms).
  int conceal(std::span<int16_t> pcm);
  // Resets the decoder state (a new stream after a resync).
  void reset();

  int sample_rate() const { return sample_rate_; }

 private:
  std::unique_ptr<OpusDecoder, OpusDeleter> decoder_;
  int sample_rate_;
};

struct OpusEncoderConfig {
  int bitrate_bps = 32000;
  int complexity = 5;  // 0..10: CPU against quality
  bool inband_fec = true;
  int packet_loss_percent = 10;  // FEC is only emitted when the expected loss is > 0
  bool dtx = false;
};

class OpusEncoderHandle {
 public:
  // Throws std::invalid_argument for an unsupported rate or a config out of range,
  // std::runtime_error if libopus fails.
  explicit OpusEncoderHandle(int sample_rate, const OpusEncoderConfig& config = {});

  // Encodes exactly one 20 ms frame; returns the packet size or a negative OPUS_* error
  // (OPUS_BAD_ARG when `pcm20ms` is not samples_per_20ms long).
  int encode(std::span<const int16_t> pcm20ms, std::span<uint8_t> out);

  int sample_rate() const { return sample_rate_; }

 private:
  std::unique_ptr<OpusEncoder, OpusDeleter> encoder_;
  int sample_rate_;
};

}  // namespace rtce
