// fuzz_realtime_dialect.cc — libFuzzer target for the realtime dialect's inbound side: any
// text frame a Realtime-protocol server sends, and base64 on its own. The first byte picks
// the session rate and whether the input is one message or a stream split at '\n' (so that
// the remainder carried between deltas and a clear of it are exercised); every frame
// handed out must be whole and the held-back audio less than a frame.
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
      // Unused low bits before '=' are not checked (RFC 4648 §3.5 allows either), so the
      // spelling may differ; the bytes must survive a round trip.
      std::string again;
      rtce::base64_append(bytes, again);
      std::vector<uint8_t> back;
      if (again.size() != input.size() || !rtce::base64_decode(again, back) || back != bytes)
        __builtin_trap();
    }
    return 0;
  }
  rtce::RealtimeDialect dialect(rate);
  auto feed = [&](std::string_view text) {
    rtce::RealtimeInbound in = dialect.decode_text(text);
    // A clear drops the partial frame the dialect holds (the Call's discard_output).
    if (in.kind == rtce::RealtimeInboundKind::clear) {
      dialect.clear_pending();
      if (dialect.pending_samples() != 0) __builtin_trap();
    }
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
