// fuzz_realtime_dialect.cc — libFuzzer target for the realtime dialect's inbound side: any
// text frame a Realtime-protocol server sends, and base64 on its own. The first byte picks
// the session rate and whether the input is one message or a stream split at '\n' (so that
// the remainder carried between deltas is exercised); every frame handed out must be whole.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "realtime_dialect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr int kRates[] = {16000, 24000, 48000, 8000};
  const int rate = kRates[data[0] & 3];
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 4) {
    std::vector<uint8_t> bytes;
    if (rtce::base64_decode(input, bytes)) {
      std::string again;
      rtce::base64_append(bytes, again);
      if (again != input) __builtin_trap();  // strict base64 has one spelling per byte string
    }
    return 0;
  }
  rtce::RealtimeDialect dialect(rate);
  auto feed = [&](std::string_view text) {
    rtce::RealtimeInbound in = dialect.decode_text(text);
    if (in.kind == rtce::RealtimeInboundKind::invalid && !in.error) __builtin_trap();
    if (in.kind == rtce::RealtimeInboundKind::event || in.kind == rtce::RealtimeInboundKind::clear)
      (void)in.event.dump();  // what parsed must serialise again without throwing
    for (size_t i = 0; i < in.frames; ++i)
      if (dialect.frame(i).size() != static_cast<size_t>(rate / 50)) __builtin_trap();
    if (dialect.pending_samples() >= static_cast<size_t>(rate / 50)) __builtin_trap();
  };
  if (data[0] & 8) {
    while (!input.empty()) {
      size_t end = input.find('\n');
      feed(input.substr(0, end));
      input = end == std::string_view::npos ? std::string_view{} : input.substr(end + 1);
    }
  } else {
    feed(input);
  }
  return 0;
}
