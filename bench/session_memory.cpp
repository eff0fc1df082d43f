// session_memory.cpp — rtce_session_memory: where a session's heap goes, component by
// component, measured in one process without sockets. Each component is built --count times
// the way a session builds it and brought to its steady state where that matters (DTLS through
// a real handshake, the echo delay line holding its 100 ms of frames, a data channel open);
// its cost is the growth of mallinfo2().uordblks (bytes malloc handed out, without the
// allocator's own per-chunk overhead) divided by the count. Objects that live inline in the
// Session (the Peer and the Call with their fixed arrays) count once, as the Session's size.
//
// Prints a Markdown table: audio-only passthrough, transcoding at 16 kHz, and what the
// oai-events data channel adds. docs/benchmarks.md ("Memory per call") reads it next to the
// RSS growth per session that rtce_session_loadgen measures end to end
// (bench/run_memory_bench.sh).
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "audio/jitter_buffer.h"
#include "audio/opus_codec.h"
#include "backend/backend.h"
#include "call/playout_queue.h"
#include "data_channel_test_link.h"
#include "dtls_test_pair.h"
#include "event_log.h"
#include "realtime/realtime_events.h"
#include "session.h"
#include "srtp/srtp_session.h"

namespace rtce {
namespace {

size_t heap_in_use() { return mallinfo2().uordblks; }

// Bytes per instance: `build` makes one more (and keeps it), `count` times.
double per_instance(int count, const std::function<void()>& build) {
  const size_t before = heap_in_use();
  for (int i = 0; i < count; ++i) build();
  return static_cast<double>(heap_in_use() - before) / count;
}

// The steady-state DTLS transport of one side, SSL released (audio only) or kept (data channel):
// what freeing the transceiver-side transports of `count` connected pairs returns.
double dtls_transport(int count, bool release) {
  static auto server_identity = DtlsContext::generate();
  static auto client_identity = DtlsContext::generate();
  DtlsTransport::Config ours;
  ours.release_after_handshake = release;
  std::vector<std::unique_ptr<testing::DtlsPair>> pairs;
  for (int i = 0; i < count; ++i) {
    // The transceiver answers setup:active: it is the DTLS client.
    pairs.push_back(
        std::make_unique<testing::DtlsPair>(server_identity, client_identity, ours, DtlsTransport::Config{}));
    testing::DtlsPair& pair = *pairs.back();
    pair.start();
    if (!pair.run_until([&] { return pair.both_connected(); })) throw std::runtime_error("no DTLS handshake");
    pair.client.sent_sizes = {};
    pair.client.outbox.clear();
  }
  const size_t before = heap_in_use();
  for (auto& pair : pairs) pair->client.transport.reset();
  return static_cast<double>(before - heap_in_use()) / count;
}

struct NullListener final : BackendListener {
  void on_backend_audio(std::span<const int16_t>) override {}
  void on_backend_opus(std::span<const uint8_t>) override {}
  void on_backend_clear() override {}
  void on_backend_event(const nlohmann::json&) override {}
  void on_backend_closed(std::string_view) override {}
};

// The echo backend (loopback, 100 ms: what the benchmarks run) holding the frames of its
// delay, as it does in a call: 6 frames sent, none due yet.
double echo_backend(int count, bool passthrough, std::vector<std::unique_ptr<BackendConnection>>& keep) {
  static NullListener listener;
  static BackendCounters counters;
  EchoBackendConfig config;
  config.loopback_delay = 100'000'000;
  const std::vector<int16_t> pcm(samples_per_20ms(16000), 100);
  const std::vector<uint8_t> opus(100, 0x5a);  // the load generator's frame is ~100 B
  return per_instance(count, [&] {
    BackendSessionInfo info;
    info.session_id = "memory";
    info.opus_passthrough = passthrough;
    keep.push_back(make_echo_backend(config, info, listener, counters));
    for (int f = 0; f < 6; ++f) {
      if (passthrough)
        keep.back()->send_opus(opus);
      else
        keep.back()->send_audio(pcm);
    }
  });
}

// One SCTP association with the oai-events channel open, per endpoint (two per link), after a
// warm-up link so that usrsctp's process-wide state is not counted.
double data_channel(int count, std::vector<std::unique_ptr<testing::Link>>& keep) {
  auto warm = std::make_unique<testing::Link>();
  if (!warm->connect() || !warm->open("warm")) throw std::runtime_error("no association");
  keep.push_back(std::move(warm));
  const size_t before = heap_in_use();
  for (int i = 0; i < count; ++i) {
    auto link = std::make_unique<testing::Link>();
    if (!link->connect() || !link->open("oai-events")) throw std::runtime_error("no association");
    link->a.captured = {};
    link->b.captured = {};
    link->a.opened = {};
    link->b.opened = {};
    keep.push_back(std::move(link));
  }
  return static_cast<double>(heap_in_use() - before) / (2.0 * count);
}

struct Row {
  std::string what;
  double passthrough = 0, transcoding = 0, data_channel = 0;
};

}  // namespace

int run(int count) {
  std::vector<Row> rows;
  // The Session, as the worker allocates it: the Peer (ICE-lite state, five MediaPaths) and
  // the Call inline.
  const double session = static_cast<double>(sizeof(Session));
  rows.push_back(
      {"Session object (Peer with ICE-lite state and paths, Call), one allocation", session, session, 0});

  const double released = dtls_transport(count, true);
  const double kept = dtls_transport(count, false);
  rows.push_back(
      {"DTLS: SSL released after the handshake (record reader, close_notify)", released, released, 0});
  rows.push_back({"DTLS: SSL kept for the data channel's application data", 0, 0, kept - released});

  std::vector<std::optional<SrtpSession>> srtp;
  srtp.reserve(2 * static_cast<size_t>(count));
  const std::vector<uint8_t> key(srtp_master_key_length(SrtpProfile::aead_aes_128_gcm) +
                                     srtp_master_salt_length(SrtpProfile::aead_aes_128_gcm),
                                 7);
  const double srtp_pair = per_instance(count, [&] {
    srtp.emplace_back(std::in_place, SrtpProfile::aead_aes_128_gcm, SrtpSession::Direction::inbound, key);
    srtp.emplace_back(std::in_place, SrtpProfile::aead_aes_128_gcm, SrtpSession::Direction::outbound, key);
  });
  rows.push_back({"SRTP: inbound + outbound contexts (AEAD_AES_128_GCM)", srtp_pair, srtp_pair, 0});

  std::vector<PlayoutQueue> queues;
  queues.reserve(2 * static_cast<size_t>(count));
  const CallSettings defaults;
  const double queue_opus =
      per_instance(count, [&] { queues.emplace_back(320, defaults.playout_initial_frames, 1500); });
  const double queue_pcm =
      per_instance(count, [&] { queues.emplace_back(640, defaults.playout_initial_frames, 1500); });
  rows.push_back({"PlayoutQueue (4 slots to start: Opus 320 B / PCM 640 B)", queue_opus, queue_pcm, 0});

  std::vector<std::unique_ptr<BackendConnection>> backends;
  const double echo_opus = echo_backend(count, true, backends);
  const double echo_pcm = echo_backend(count, false, backends);
  rows.push_back({"echo backend, 100 ms loopback (delay line holding its frames)", echo_opus, echo_pcm, 0});

  std::vector<EventLog> logs;
  logs.reserve(static_cast<size_t>(count));
  const double log = per_instance(count, [&] {
    logs.emplace_back(0);
    logs.back().add(
        {{"type", "connected"}, {"srtp_profile", "SRTP_AEAD_AES_128_GCM"}, {"time_to_connected_ms", 40}}, 1);
  });
  rows.push_back({"event log (the connected event)", log, log, 0});

  std::vector<JitterBuffer> jitter;
  jitter.reserve(static_cast<size_t>(count));
  const double jb = per_instance(count, [&] { jitter.emplace_back(JitterBufferConfig{}); });
  std::vector<OpusDecoderHandle> decoders;
  std::vector<OpusEncoderHandle> encoders;
  decoders.reserve(static_cast<size_t>(count));
  encoders.reserve(static_cast<size_t>(count));
  OpusEncoderConfig encoder_config;
  encoder_config.complexity = 0;
  const double decoder = per_instance(count, [&] { decoders.emplace_back(16000); });
  const double encoder = per_instance(count, [&] { encoders.emplace_back(16000, encoder_config); });
  rows.push_back({"jitter buffer (16 slots of 320 B)", 0, jb, 0});
  rows.push_back({"Opus decoder, 16 kHz mono", 0, decoder, 0});
  rows.push_back({"Opus encoder, 16 kHz mono", 0, encoder, 0});

  std::vector<std::unique_ptr<testing::Link>> links;
  const double association = data_channel(count, links);
  rows.push_back({"data channel: usrsctp association + endpoint + oai-events channel", 0, 0, association});

  std::vector<std::unique_ptr<RealtimeEventChannel>> layers;
  const double realtime = per_instance(count, [&] {
    RealtimeEventChannel::Callbacks callbacks;
    callbacks.send_to_client = [](std::string_view) {};
    callbacks.send_to_backend = [](const nlohmann::json&) {};
    callbacks.clear_output = [] {};
    layers.push_back(std::make_unique<RealtimeEventChannel>(
        nlohmann::json::object(), RealtimeEventChannel::Limits{}, std::move(callbacks)));
    layers.back()->on_open(1);
  });
  rows.push_back({"Realtime event layer (session config, session.created sent)", 0, 0, realtime});

  std::printf("Heap per session by component (mallinfo2, %d of each; KiB):\n\n", count);
  std::printf("| component | passthrough | transcoding 16 kHz | + oai-events channel |\n|---|---|---|---|\n");
  Row total{"total (heap in use, without malloc's per-chunk overhead)"};
  auto kib = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, bytes == 0 ? "–" : "%.1f", bytes / 1024.0);
    return std::string(text);
  };
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s | %s |\n", r.what.c_str(), kib(r.passthrough).c_str(),
                kib(r.transcoding).c_str(), kib(r.data_channel).c_str());
    total.passthrough += r.passthrough;
    total.transcoding += r.transcoding;
    total.data_channel += r.data_channel;
  }
  std::printf("| **%s** | **%s** | **%s** | **%s** |\n", total.what.c_str(), kib(total.passthrough).c_str(),
              kib(total.transcoding).c_str(), kib(total.data_channel).c_str());
  return 0;
}

}  // namespace rtce

int main(int argc, char** argv) {
  CLI::App app{"rtce_session_memory: a session's heap by component (docs/benchmarks.md, Memory per call)"};
  int count = 200;
  app.add_option("--count", count, "instances of each component")->check(CLI::Range(10, 5000));
  CLI11_PARSE(app, argc, argv);
  try {
    return rtce::run(count);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rtce_session_memory: %s\n", e.what());
    return 1;
  }
}
