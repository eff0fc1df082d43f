// opus_codec.cpp — libopus wrappers; see opus_codec.h.
#include "opus_codec.h"

#include <opus.h>

#include <stdexcept>
#include <string>

namespace rtce {
namespace {

void check_rate(int sample_rate) {
  if (!is_supported_opus_rate(sample_rate))
    throw std::invalid_argument("unsupported Opus sample rate " + std::to_string(sample_rate));
}

void check_ctl(int rc, const char* what) {
  if (rc != OPUS_OK) throw std::runtime_error(std::string("opus: ") + what + ": " + opus_strerror(rc));
}

int frame_size(std::span<int16_t> pcm) {
  // libopus takes an int; a span this large would never be a valid frame anyway.
  return pcm.size() > 1u << 20 ? 1 << 20 : static_cast<int>(pcm.size());
}

}  // namespace

bool is_supported_opus_rate(int sample_rate) {
  return sample_rate == 16000 || sample_rate == 24000 || sample_rate == 48000;
}

void OpusDeleter::operator()(OpusDecoder* decoder) const { opus_decoder_destroy(decoder); }
void OpusDeleter::operator()(OpusEncoder* encoder) const { opus_encoder_destroy(encoder); }

OpusDecoderHandle::OpusDecoderHandle(int sample_rate) : sample_rate_(sample_rate) {
  check_rate(sample_rate);
  int error = OPUS_OK;
  decoder_.reset(opus_decoder_create(sample_rate, 1, &error));
  if (!decoder_) check_ctl(error == OPUS_OK ? OPUS_ALLOC_FAIL : error, "decoder create");
}

int OpusDecoderHandle::decode(std::span<const uint8_t> packet, std::span<int16_t> pcm) {
  if (packet.empty() || pcm.empty()) return OPUS_BAD_ARG;
  if (packet.size() > 1u << 16) return OPUS_INVALID_PACKET;
  return opus_decode(decoder_.get(), packet.data(), static_cast<opus_int32>(packet.size()), pcm.data(),
                     frame_size(pcm), 0);
}

int OpusDecoderHandle::decode_fec(std::span<const uint8_t> next_packet, std::span<int16_t> pcm) {
  if (next_packet.empty() || pcm.empty()) return OPUS_BAD_ARG;
  if (next_packet.size() > 1u << 16) return OPUS_INVALID_PACKET;
  return opus_decode(decoder_.get(), next_packet.data(), static_cast<opus_int32>(next_packet.size()),
                     pcm.data(), frame_size(pcm), 1);
}

int OpusDecoderHandle::conceal(std::span<int16_t> pcm) {
  if (pcm.empty()) return OPUS_BAD_ARG;
  return opus_decode(decoder_.get(), nullptr, 0, pcm.data(), frame_size(pcm), 0);
}

void OpusDecoderHandle::reset() { opus_decoder_ctl(decoder_.get(), OPUS_RESET_STATE); }

OpusEncoderHandle::OpusEncoderHandle(int sample_rate, const OpusEncoderConfig& config)
    : sample_rate_(sample_rate) {
  check_rate(sample_rate);
  if (config.complexity < 0 || config.complexity > 10)
    throw std::invalid_argument("opus complexity not in 0..10");
  if (config.packet_loss_percent < 0 || config.packet_loss_percent > 100)
    throw std::invalid_argument("opus packet loss percent not in 0..100");
  int error = OPUS_OK;
  encoder_.reset(opus_encoder_create(sample_rate, 1, OPUS_APPLICATION_VOIP, &error));
  if (!encoder_) check_ctl(error == OPUS_OK ? OPUS_ALLOC_FAIL : error, "encoder create");
  OpusEncoder* e = encoder_.get();
  check_ctl(opus_encoder_ctl(e, OPUS_SET_BITRATE(config.bitrate_bps)), "bitrate");
  check_ctl(opus_encoder_ctl(e, OPUS_SET_COMPLEXITY(config.complexity)), "complexity");
  check_ctl(opus_encoder_ctl(e, OPUS_SET_INBAND_FEC(config.inband_fec ? 1 : 0)), "in-band FEC");
  check_ctl(opus_encoder_ctl(e, OPUS_SET_PACKET_LOSS_PERC(config.packet_loss_percent)), "packet loss");
  check_ctl(opus_encoder_ctl(e, OPUS_SET_DTX(config.dtx ? 1 : 0)), "DTX");
  // In-band FEC exists only in the SILK layer; telling the encoder it codes speech keeps it
  // in SILK/hybrid modes where FEC is available.
  check_ctl(opus_encoder_ctl(e, OPUS_SET_SIGNAL(OPUS_SIGNAL_VOICE)), "signal");
}

int OpusEncoderHandle::encode(std::span<const int16_t> pcm20ms, std::span<uint8_t> out) {
  if (static_cast<int>(pcm20ms.size()) != samples_per_20ms(sample_rate_) || out.empty()) return OPUS_BAD_ARG;
  const opus_int32 max_bytes = out.size() > 4000 ? 4000 : static_cast<opus_int32>(out.size());
  return opus_encode(encoder_.get(), pcm20ms.data(), samples_per_20ms(sample_rate_), out.data(), max_bytes);
}

}  // namespace rtce
