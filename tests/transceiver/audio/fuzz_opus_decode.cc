// fuzz_opus_decode.cc — libFuzzer target: arbitrary bytes as Opus packets through the
// decoder wrapper (decode, FEC decode, concealment) and the jitter buffer that feeds it.
// Invariants: no crash or out-of-bounds access; a decode never reports more samples than
// the buffer holds.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "audio/jitter_buffer.h"
#include "audio/opus_codec.h"

namespace {

constexpr std::array<int, 3> kRates = {16000, 24000, 48000};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static rtce::OpusDecoderHandle decoders[] = {rtce::OpusDecoderHandle(16000), rtce::OpusDecoderHandle(24000),
                                               rtce::OpusDecoderHandle(48000)};
  static std::array<int16_t, 5760> pcm;  // 120 ms at 48 kHz: the longest Opus packet
  const size_t which = data[0] % kRates.size();
  rtce::OpusDecoderHandle& decoder = decoders[which];
  decoder.reset();
  const int frame = rtce::samples_per_20ms(kRates[which]);
  const std::span<const uint8_t> packets(data + 1, size - 1);

  // Split the input into packets at 0xFF bytes and run them through a jitter buffer with
  // sequence numbers taken from the data, so reordering and gaps are exercised too.
  rtce::JitterBuffer buffer(rtce::JitterBufferConfig{.target_delay = 0});
  size_t start = 0;
  rtce::Nanos now = 0;
  for (size_t i = 0; i <= packets.size(); ++i) {
    if (i != packets.size() && packets[i] != 0xFF) continue;
    const std::span<const uint8_t> packet = packets.subspan(start, i - start);
    const uint16_t seq = packet.empty() ? 0 : static_cast<uint16_t>(packet[0] & 0x1F);
    buffer.push(seq, seq * 960u, packet, now);
    start = i + 1;
    now += 20'000'000;
    for (auto out = buffer.pop(now); out.kind != rtce::JitterBuffer::Output::Kind::none;
         out = buffer.pop(now)) {
      int n = 0;
      if (out.kind == rtce::JitterBuffer::Output::Kind::frame) {
        n = decoder.decode(out.payload, pcm);
      } else if (out.fec_available) {
        n = decoder.decode_fec(out.payload, std::span(pcm).first(static_cast<size_t>(frame)));
      } else {
        n = decoder.conceal(std::span(pcm).first(static_cast<size_t>(frame)));
      }
      if (n > static_cast<int>(pcm.size())) abort();
    }
  }
  return 0;
}
