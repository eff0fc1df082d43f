// fuzz_backend_message.cc — libFuzzer target for everything the transceiver parses from a
// backend or an operator: text events, PCM message sizes and backend URLs. The first byte
// picks the parser; the rest is its input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backend_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      rtce::BackendText text = rtce::parse_backend_text(input);
      if (text.kind != rtce::BackendTextKind::invalid) {
        (void)text.event.dump();  // what parsed must serialise again without throwing
      }
      break;
    }
    case 1: {
      rtce::BackendUrl url = rtce::parse_backend_url(input, input);
      if (url.error.empty() &&
          (url.host.empty() || url.port.empty() || url.target.empty() || url.target[0] != '/')) {
        __builtin_trap();
      }
      break;
    }
    default: {
      size_t frame = rtce::pcm_frame_bytes(static_cast<int>(size * 50));
      size_t frames = rtce::pcm_frames_in_message(input.size(), frame);
      if (frames * frame != (frames ? input.size() : 0)) __builtin_trap();
      break;
    }
  }
  return 0;
}
