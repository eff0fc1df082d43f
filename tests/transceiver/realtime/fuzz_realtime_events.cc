// fuzz_realtime_events.cc — libFuzzer over the oai-events channel. The input is records
// split by NUL bytes; each record's first byte picks the input: 'c' a client text message,
// 'C' a client binary message, 'b' a backend event (its JSON, or the bytes as a string),
// 's'/'S' output started/stopped, 'o' open (the channel opens first unless the input
// starts with 'p'), 'a'/'d' attach/detach a sideband (id from the next byte), 'm' a sideband
// message (id from the next byte), 't' the tool-call deadline passes. Asserts that every
// message to the client and to a sideband is a JSON object with string type and event_id,
// that started/stopped alternate, that no more sidebands attach than allowed, and that the
// session stays an object.
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "realtime_events.h"

namespace {

using json = nlohmann::json;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  bool playing = false;
  rtce::RealtimeEventChannel::Callbacks cb;
  cb.send_to_client = [&](std::string_view text) {
    const json e = json::parse(text, nullptr, false);
    if (e.is_discarded() || !e.is_object()) abort();
    if (!e.contains("type") || !e["type"].is_string()) abort();
    if (!e.contains("event_id") || !e["event_id"].is_string()) abort();
    const std::string& type = e["type"].get_ref<const std::string&>();
    if (type == "output_audio_buffer.started") {
      if (playing) abort();
      playing = true;
    } else if (type == "output_audio_buffer.stopped") {
      if (!playing) abort();
      playing = false;
    } else if (type == "output_audio_buffer.cleared") {
      playing = false;
    }
  };
  cb.send_to_backend = [](const json& e) {
    if (!e.is_object() || !e["type"].is_string()) abort();
  };
  cb.clear_output = [] {};
  cb.send_to_sideband = [](rtce::EventSource sideband, std::string_view text) {
    const json e = json::parse(text, nullptr, false);
    if (sideband == rtce::kFromBrowser || e.is_discarded() || !e.is_object()) abort();
    if (!e.contains("type") || !e["type"].is_string() || !e.contains("event_id")) abort();
  };
  rtce::RealtimeEventChannel::Limits limits;
  limits.max_message_bytes = 2048;
  limits.max_json_depth = 16;
  limits.semantic_vad_supported = !input.empty() && (input[0] & 1);
  rtce::RealtimeEventChannel channel(nullptr, limits, std::move(cb));
  if (input.empty() || input[0] != 'p') channel.on_open(0);
  while (!input.empty()) {
    const size_t end = input.find('\0');
    const std::string_view record = input.substr(0, end);
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
    if (record.empty()) continue;
    const std::string_view payload = record.substr(1);
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
    switch (record[0]) {
      case 'c': channel.on_client_message(bytes, false, 0); break;
      case 'C': channel.on_client_message(bytes, true, 0); break;
      case 'b': {
        json event = json::parse(payload, nullptr, false);
        if (event.is_discarded()) event = std::string(payload);
        channel.on_backend_event(event, 0);
        break;
      }
      case 's': channel.on_output_started(0); break;
      case 'S': channel.on_output_stopped(0); break;
      case 'o': channel.on_open(0); break;
      case 'a':
        if (!payload.empty()) channel.attach_sideband(static_cast<uint8_t>(payload[0]), 0);
        if (channel.sidebands() > limits.max_sidebands) abort();
        break;
      case 'd':
        if (!payload.empty()) channel.detach_sideband(static_cast<uint8_t>(payload[0]), 0);
        break;
      case 'm':
        if (!payload.empty())
          channel.on_sideband_message(static_cast<uint8_t>(payload[0]), payload.substr(1), 0);
        break;
      case 't': channel.on_deadline(std::numeric_limits<rtce::Nanos>::max() / 2); break;
      default: break;
    }
    if (!channel.session().is_object()) abort();
  }
  return 0;
}
