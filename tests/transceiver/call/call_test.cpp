// call_test.cpp — one Call driven as a transport drives it, with a recording CallTransport:
// the Realtime event flow against the real echo backend (the SDK's connect, sendMessage,
// speech and interrupt()), and with a scripted backend on a manual clock: barge-in from
// either side, talkspurt ends, audio a backend sends ahead, end reasons, other channels,
// and a 10 kHz tone that survives the 24 kHz path and not the 16 kHz one.
#include "call.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cmath>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

namespace rtce {
namespace {

using json = nlohmann::json;
constexpr Nanos kFrame = 20'000'000;
constexpr uint8_t kSilence[] = {0xf8, 0xff, 0xfe};

struct RecordingTransport : CallTransport {
  void send_audio(std::span<const uint8_t> opus, Nanos) override {
    audio.emplace_back(opus.begin(), opus.end());
  }
  void skip_audio_frame() override { ++skips; }
  bool send_channel_text(uint16_t stream, std::string_view text) override {
    if (refuse_channel_sends) return false;
    text_out.emplace_back(stream, json::parse(text));
    return true;
  }
  bool refuse_channel_sends = false;  // a backed-up or closed channel
  void hang_up(SessionEnd reason, Nanos) override { hangups.push_back(reason); }

  size_t silence_frames() const {
    size_t n = 0;
    for (const auto& a : audio) n += a == std::vector<uint8_t>(std::begin(kSilence), std::end(kSilence));
    return n;
  }
  const json* find(std::string_view type, size_t from = 0) const {
    for (size_t i = from; i < text_out.size(); ++i)
      if (text_out[i].second["type"] == type) return &text_out[i].second;
    return nullptr;
  }
  size_t count(std::string_view type) const {
    size_t n = 0;
    for (const auto& t : text_out) n += t.second["type"] == type;
    return n;
  }

  std::vector<std::vector<uint8_t>> audio;
  int skips = 0;
  std::vector<std::pair<uint16_t, json>> text_out;
  std::vector<SessionEnd> hangups;
};

// A backend the test speaks for: it records what the Call sends and calls the listener when
// the test says so.
struct ScriptedBackend : BackendConnection {
  void send_audio(std::span<const int16_t> pcm) override { audio_in.emplace_back(pcm.begin(), pcm.end()); }
  void send_opus(std::span<const uint8_t> packet) override {
    opus_in.emplace_back(packet.begin(), packet.end());
  }
  void send_event(const json& event) override { events.push_back(event); }
  void discard_output() override { ++discards; }
  void close(std::string_view reason) override { close_reason = reason; }

  std::vector<std::vector<int16_t>> audio_in;
  std::vector<std::vector<uint8_t>> opus_in;
  std::vector<json> events;
  int discards = 0;
  std::string close_reason;
};

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class CallTest : public ::testing::Test {
 protected:
  void make_call(bool realtime = true) {
    CallPlan plan;
    plan.id = "call";
    plan.realtime = realtime;
    plan.realtime_session = json::object();
    CallEnvironment env{
        transport,
        [this](BackendSessionInfo info, BackendListener& l) -> std::unique_ptr<BackendConnection> {
          backend_info = info;
          listener = &l;
          auto b = std::make_unique<ScriptedBackend>();
          backend = b.get();
          return b;
        },
        metrics, log, settings};
    call = std::make_unique<Call>(plan, std::move(env), now);
    call->on_connected({"198.18.0.10:5000", "relay", {}}, now);
    ASSERT_NE(backend, nullptr);
    if (realtime) call->on_channel_open(kEvents, "oai-events", "", now);
    call->tick(now);  // the frame clock's first frame: nothing to play yet
  }
  void client(const json& event) { call->on_channel_message(kEvents, bytes_of(event.dump()), false, now); }
  // One backend frame of a sine at `hz`.
  std::vector<int16_t> tone_frame(double hz, int frame_index) const {
    const int n = samples_per_20ms(settings.sample_rate);
    std::vector<int16_t> pcm(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      pcm[static_cast<size_t>(i)] = static_cast<int16_t>(
          8000 * std::sin(2 * std::numbers::pi * hz * (frame_index * n + i) / settings.sample_rate));
    return pcm;
  }
  void run_frames(int frames) {
    for (int i = 0; i < frames; ++i) {
      now += kFrame;
      call->tick(now);
    }
  }

  static constexpr uint16_t kEvents = 1;
  Nanos now = 1'000'000'000;
  CallSettings settings;
  RecordingTransport transport;
  WorkerMetrics metrics;
  EventLog log{now};
  ScriptedBackend* backend = nullptr;
  BackendListener* listener = nullptr;
  BackendSessionInfo backend_info;
  std::unique_ptr<Call> call;
};

TEST_F(CallTest, BackendHearsTheCallAtTheCallsRate) {
  settings.sample_rate = 24000;
  make_call();
  EXPECT_EQ(backend_info.sample_rate, 24000);
  EXPECT_EQ(backend_info.client_address, "198.18.0.10:5000");
  EXPECT_EQ(backend_info.path, "relay");
  EXPECT_EQ(call->backend_state(), Call::BackendState::open);
  ASSERT_TRUE(transport.find("session.created"));
}

TEST_F(CallTest, AudioSentAheadIsHeldAndPlaysInOrderOnTheFrameClock) {
  make_call();
  for (int f = 0; f < 1000; ++f) listener->on_backend_audio(tone_frame(440, f));  // 20 s in one burst
  EXPECT_EQ(metrics.output_frames_dropped.get(), 0u);
  EXPECT_EQ(call->playout().size(), 1000u);
  run_frames(10);
  EXPECT_EQ(transport.audio.size(), 10u) << "one frame per 20 ms, not the burst";
  EXPECT_EQ(call->playout().size(), 990u);
  ASSERT_TRUE(transport.find("output_audio_buffer.started"));
  // The bound: past playout_max_frames the newest frames are refused and counted.
  for (int f = 0; f < 600; ++f) listener->on_backend_audio(tone_frame(440, f));
  EXPECT_EQ(call->playout().size(), settings.playout_max_frames);
  EXPECT_EQ(metrics.output_frames_dropped.get(), 1590u - settings.playout_max_frames);
}

TEST_F(CallTest, TalkspurtEndsWithSilenceFramesThenSkipsAndStops) {
  make_call();
  for (int f = 0; f < 3; ++f) listener->on_backend_audio(tone_frame(440, f));
  const int skips_before = transport.skips;
  run_frames(20);
  ASSERT_EQ(transport.audio.size(), 3u + 5u) << "three frames, then five of Opus silence";
  EXPECT_EQ(transport.silence_frames(), 5u);
  EXPECT_EQ(transport.skips - skips_before, 12);
  // Played output that ran dry for 100 ms is reported stopped, once.
  EXPECT_EQ(transport.count("output_audio_buffer.started"), 1u);
  EXPECT_EQ(transport.count("output_audio_buffer.stopped"), 1u);
}

TEST_F(CallTest, ClientClearIsTheOneBargeInPath) {
  make_call();
  for (int f = 0; f < 100; ++f) listener->on_backend_audio(tone_frame(440, f));
  run_frames(5);
  ASSERT_TRUE(transport.find("output_audio_buffer.started"));
  client({{"type", "output_audio_buffer.clear"}});
  EXPECT_TRUE(call->playout().empty());
  EXPECT_EQ(backend->discards, 1) << "what the backend holds back is discarded too";
  EXPECT_EQ(transport.count("output_audio_buffer.cleared"), 1u);
  const size_t before = transport.audio.size();
  run_frames(20);
  EXPECT_EQ(transport.audio.size() - before, 5u) << "only the trailing silence after a clear";
  EXPECT_EQ(transport.silence_frames(), 5u);
  EXPECT_EQ(transport.count("output_audio_buffer.stopped"), 0u) << "a cleared output does not also stop";
}

TEST_F(CallTest, BackendClearStopsTheAnnouncedOutput) {
  make_call();
  for (int f = 0; f < 100; ++f) listener->on_backend_audio(tone_frame(440, f));
  run_frames(3);
  listener->on_backend_clear();
  EXPECT_TRUE(call->playout().empty());
  EXPECT_EQ(backend->discards, 1);
  EXPECT_EQ(transport.count("output_audio_buffer.stopped"), 1u);
  ASSERT_FALSE(log.events().empty());
  EXPECT_EQ(log.events().back()["type"], "clear");
  EXPECT_EQ(log.events().back()["frames"], 97);
}

TEST_F(CallTest, BackendEndsAndFailuresHangUpWithTheirReason) {
  make_call();
  listener->on_backend_event({{"type", "session.end"}});
  ASSERT_EQ(transport.hangups.size(), 1u);
  EXPECT_EQ(transport.hangups[0], SessionEnd::backend_ended);
  EXPECT_TRUE(call->ended());
  EXPECT_EQ(backend->close_reason, "backend_ended");

  transport.hangups.clear();
  backend = nullptr;
  make_call();
  listener->on_backend_closed("connect: refused");
  ASSERT_EQ(transport.hangups.size(), 1u);
  EXPECT_EQ(transport.hangups[0], SessionEnd::backend_failed);
  EXPECT_EQ(call->backend_state(), Call::BackendState::closed);
}

TEST_F(CallTest, EndClosesTheBackendWithTheReasonAndDoesNotHangUp) {
  make_call();
  call->end(SessionEnd::deleted, now);
  EXPECT_EQ(backend->close_reason, "deleted");
  EXPECT_TRUE(transport.hangups.empty());
  // Nothing plays after the end.
  listener->on_backend_audio(tone_frame(440, 0));
  run_frames(5);
  EXPECT_TRUE(transport.audio.empty());
}

// An event the channel could not send (here an error reply to a malformed client event) is
// counted, not lost silently.
TEST_F(CallTest, EventsTheChannelCouldNotSendAreCounted) {
  make_call();
  const auto unsent = [&] { return metrics.realtime_drops[static_cast<size_t>(RealtimeDrop::unsent)].get(); };
  const size_t sent = transport.text_out.size();
  transport.refuse_channel_sends = true;
  call->on_channel_message(kEvents, bytes_of("{not json"), false, now);
  EXPECT_EQ(transport.text_out.size(), sent);
  EXPECT_EQ(unsent(), 1u) << "the error event owed to the client";
  EXPECT_EQ(metrics.realtime_drops[static_cast<size_t>(RealtimeDrop::malformed_json)].get(), 1u);
  transport.refuse_channel_sends = false;
  call->on_channel_message(kEvents, bytes_of("{not json"), false, now);
  EXPECT_EQ(transport.text_out.size(), sent + 1);
  EXPECT_EQ(transport.text_out.back().second["type"], "error");
  EXPECT_EQ(unsent(), 1u);
}

// An app server's sideband as the Call sees it.
struct RecordingLink : SidebandLink {
  void send_text(std::string_view text) override { events.push_back(json::parse(text)); }
  void close(std::string_view reason) override { closed = std::string(reason); }
  std::vector<json> events;
  std::optional<std::string> closed;
};

// The sideband through the real Call, against a backend that speaks the Realtime protocol
// (what the realtime dialect hands over): the tool round trip, the timeout of a call left
// to a gone sideband on the Call's own clock, the call's end closing the socket.
TEST_F(CallTest, ASidebandAnswersToolCallsAndHearsTheEnd) {
  settings.backend_speaks_realtime = true;
  settings.tool_timeout = 1'000'000'000;
  make_call();
  EXPECT_FALSE(backend_info.session_config.contains("client"));
  auto link = std::make_shared<RecordingLink>();
  const auto id = call->attach_sideband(link, now);
  ASSERT_TRUE(id);
  ASSERT_EQ(link->events.size(), 1u);
  EXPECT_EQ(link->events[0]["type"], "session.created");
  listener->on_backend_event({{"type", "response.function_call_arguments.done"},
                              {"call_id", "call_1"},
                              {"name", "get_weather"},
                              {"arguments", "{}"}});
  EXPECT_EQ(link->events.back()["type"], "response.function_call_arguments.done");
  EXPECT_NE(transport.find("response.function_call_arguments.done"), nullptr) << "no policy: the browser too";
  call->on_sideband_message(
      *id,
      json({{"type", "conversation.item.create"},
            {"item", {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "sunny"}}}})
          .dump(),
      now);
  call->on_sideband_message(*id, R"({"type":"response.create"})", now);
  ASSERT_GE(backend->events.size(), 2u);
  EXPECT_EQ(backend->events[backend->events.size() - 2]["item"]["output"], "sunny");
  EXPECT_EQ(backend->events.back()["type"], "response.create");
  EXPECT_EQ(metrics.sideband_messages_in.get(), 2u);

  // A second call, then the sideband goes: on the Call's clock the edge answers for it.
  listener->on_backend_event({{"type", "response.function_call_arguments.done"}, {"call_id", "call_2"}});
  call->detach_sideband(*id, now);
  const size_t before = backend->events.size();
  EXPECT_LE(call->next_deadline(), now + settings.tool_timeout);
  run_frames(49);
  EXPECT_EQ(backend->events.size(), before) << "not before the timeout";
  run_frames(2);
  ASSERT_EQ(backend->events.size(), before + 2);
  EXPECT_EQ(backend->events[before]["item"]["call_id"], "call_2");
  EXPECT_EQ(backend->events[before + 1]["type"], "response.create");
  EXPECT_EQ(metrics.tool_calls_timed_out.get(), 1u);

  // The call's end reaches a sideband, which is closed with the reason.
  auto again = std::make_shared<RecordingLink>();
  ASSERT_TRUE(call->attach_sideband(again, now));
  call->end(SessionEnd::deleted, now);
  EXPECT_EQ(again->events.back()["type"], "rtcedge.call.ended");
  EXPECT_EQ(again->events.back()["reason"], "deleted");
  EXPECT_EQ(again->closed, "deleted");
  EXPECT_FALSE(call->attach_sideband(std::make_shared<RecordingLink>(), now)) << "an ended call takes none";
  EXPECT_EQ(metrics.sidebands_attached.get(), 2u);
}

TEST_F(CallTest, OnlyARealtimeCallTakesASideband) {
  make_call(/*realtime=*/false);
  EXPECT_FALSE(call->attach_sideband(std::make_shared<RecordingLink>(), now));
  EXPECT_EQ(metrics.sidebands_refused.get(), 1u);
}

TEST_F(CallTest, OtherChannelsCarryJsonObjectsToTheBackendByLabel) {
  make_call(/*realtime=*/false);
  call->on_channel_open(3, "chat", "", now);
  call->on_channel_message(3, bytes_of(R"({"hello":1})"), false, now);
  ASSERT_EQ(backend->events.size(), 1u);
  EXPECT_EQ(backend->events[0]["type"], "datachannel.message");
  EXPECT_EQ(backend->events[0]["label"], "chat");
  EXPECT_EQ(backend->events[0]["message"]["hello"], 1);
  call->on_channel_message(3, bytes_of("[1,2]"), false, now);
  call->on_channel_message(3, bytes_of("{}"), true, now);
  EXPECT_EQ(metrics.drops[static_cast<size_t>(DatagramDrop::data_channel_refused)].get(), 2u);
  // The backend answers on the channel by label.
  listener->on_backend_event({{"type", "datachannel.send"}, {"label", "chat"}, {"message", {{"ok", true}}}});
  ASSERT_EQ(transport.text_out.size(), 1u);
  EXPECT_EQ(transport.text_out[0].first, 3);
  EXPECT_EQ(transport.text_out[0].second["ok"], true);
}

// The share of `pcm`'s energy (48 kHz) between lo and hi Hz, by Parseval over 20 ms DFT
// blocks (50 Hz bins). Opus codes a tone above 8 kHz as band energy, not as a sinusoid, so
// the band is what survives, not the exact frequency.
double band_share(const std::vector<int16_t>& pcm, double lo, double hi) {
  constexpr size_t kBlock = 960;
  double band = 0, total = 0;
  for (size_t start = 0; start + kBlock <= pcm.size(); start += kBlock) {
    for (size_t i = start; i < start + kBlock; ++i) total += static_cast<double>(pcm[i]) * pcm[i];
    for (int k = static_cast<int>(lo / 50); k <= static_cast<int>(hi / 50); ++k) {
      double re = 0, im = 0;
      for (size_t n = 0; n < kBlock; ++n) {
        const double phase = 2 * std::numbers::pi * k * static_cast<double>(n) / kBlock;
        re += pcm[start + n] * std::cos(phase);
        im -= pcm[start + n] * std::sin(phase);
      }
      band += 2 * (re * re + im * im) / kBlock;  // one side of a real signal's spectrum
    }
  }
  return total > 0 ? band / total : 0;
}

// A caller's 10 kHz tone, Opus at 48 kHz and the default bitrate, through the Call to a
// backend that echoes what it hears, and back to the caller: what the caller decodes.
std::vector<int16_t> round_trip_tone(int call_rate) {
  CallSettings settings;
  settings.sample_rate = call_rate;
  RecordingTransport transport;
  WorkerMetrics metrics;
  Nanos now = 1'000'000'000;
  EventLog log{now};
  BackendListener* listener = nullptr;
  ScriptedBackend* backend = nullptr;
  CallEnvironment env{transport,
                      [&](BackendSessionInfo, BackendListener& l) -> std::unique_ptr<BackendConnection> {
                        listener = &l;
                        auto b = std::make_unique<ScriptedBackend>();
                        backend = b.get();
                        return b;
                      },
                      metrics, log, settings};
  Call call(CallPlan{}, std::move(env), now);
  call.on_connected({"198.18.0.10:5000", "direct", {}}, now);
  OpusEncoderHandle caller_encoder(48000, OpusEncoderConfig{});
  OpusDecoderHandle caller_decoder(48000);
  std::vector<int16_t> pcm(960);
  uint8_t packet[1275];
  size_t echoed = 0;
  for (int f = 0; f < 100; ++f) {
    for (int i = 0; i < 960; ++i)
      pcm[static_cast<size_t>(i)] =
          static_cast<int16_t>(10000 * std::sin(2 * std::numbers::pi * 10000.0 * (f * 960 + i) / 48000));
    const int n = caller_encoder.encode(pcm, packet);
    EXPECT_GT(n, 0);
    call.on_audio(static_cast<uint16_t>(f), static_cast<uint32_t>(f * 960), {packet, static_cast<size_t>(n)},
                  now);
    now += kFrame;
    call.tick(now);
    // The backend echoes every frame it heard.
    for (; echoed < backend->audio_in.size(); ++echoed) listener->on_backend_audio(backend->audio_in[echoed]);
  }
  for (int f = 0; f < 20; ++f) {
    now += kFrame;
    call.tick(now);
  }
  std::vector<int16_t> heard;
  std::vector<int16_t> out(5760);
  for (const auto& a : transport.audio) {
    const int n = caller_decoder.decode(a, out);
    if (n > 0) heard.insert(heard.end(), out.begin(), out.begin() + n);
  }
  return heard;
}

TEST(CallToneTest, TenKilohertzSurvivesThe24kHzPathAndNotThe16kHzOne) {
  const auto at_24k = round_trip_tone(24000);
  const auto at_16k = round_trip_tone(16000);
  ASSERT_GT(at_24k.size(), 48000u);  // over a second of audio came back
  ASSERT_GT(at_16k.size(), 48000u);
  // The steady middle of the tone (past the jitter buffer and codec warm-up).
  auto middle = [](const std::vector<int16_t>& v) {
    return std::vector<int16_t>(v.begin() + 24000, v.begin() + 24000 + 48000);
  };
  const double share_24k = band_share(middle(at_24k), 9000, 11000);
  const double share_16k = band_share(middle(at_16k), 9000, 11000);
  EXPECT_GT(share_24k, 0.5) << "the 10 kHz tone came back at 24 kHz";
  EXPECT_LT(share_16k, 0.01) << "a 16 kHz call cannot carry 10 kHz (the control)";
  std::cout << "energy in 9-11 kHz: " << share_24k << " at 24 kHz, " << share_16k << " at 16 kHz\n";
}

// The agents SDK's flow against the real echo backend (parrot): connect, sendMessage, a
// spoken turn replayed between output_audio_buffer.started and .stopped, and interrupt().
// The echo backend runs on an io_context in real time, so this test uses the real clock.
class CallRealtimeFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CallPlan plan;
    plan.id = "flow";
    plan.realtime = true;
    plan.realtime_session = json::object();
    CallSettings settings;
    CallEnvironment env{transport,
                        [this](BackendSessionInfo info, BackendListener& l) {
                          EchoBackendConfig config;
                          config.mode = EchoBackendConfig::Mode::parrot;
                          return make_echo_backend(config, std::move(info), l, counters);
                        },
                        metrics, log, settings};
    call = std::make_unique<Call>(plan, std::move(env), monotonic_now());
    call->on_connected({"198.18.0.10:5000", "direct", {}}, monotonic_now());
    call->on_channel_open(1, "oai-events", "", monotonic_now());
  }
  void client(const json& event) {
    call->on_channel_message(1, bytes_of(event.dump()), false, monotonic_now());
  }
  // One turn of the loop: the backend's timers, then the Call's frame clock (and the caller's
  // next frame when one is due).
  void turn() {
    io.run_one_for(std::chrono::milliseconds(2));
    if (io.stopped()) io.restart();
    const Nanos now = monotonic_now();
    if (!speech.empty() && now >= next_frame_at) {
      const int n = encoder.encode(speech.front(), packet);
      speech.erase(speech.begin());
      call->on_audio(seq, timestamp, {packet, static_cast<size_t>(n)}, now);
      ++seq;
      timestamp += 960;
      next_frame_at = std::max(next_frame_at + kFrame, now - kFrame);
    }
    call->tick(now);
  }
  bool wait_for(std::string_view type, size_t from, std::chrono::seconds limit = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!transport.find(type, from)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      turn();
    }
    return true;
  }
  // 400 ms of quiet, `tone_frames` of a 300 Hz tone, 1 s of quiet (the echo's VAD ends an
  // utterance after 700 ms; the codec's tail and the jitter buffer take a few frames more).
  void speak(int tone_frames) {
    for (int f = 0; f < 20 + tone_frames + 50; ++f) {
      const bool tone = f >= 20 && f < 20 + tone_frames;
      std::vector<int16_t> pcm(960);
      for (size_t i = 0; i < pcm.size(); ++i)
        pcm[i] =
            tone ? static_cast<int16_t>(8000 * std::sin(2 * std::numbers::pi * 300 * (f * 960.0 + i) / 48000))
                 : 0;
      speech.push_back(std::move(pcm));
    }
    next_frame_at = monotonic_now();
  }

  boost::asio::io_context io;
  BackendCounters counters;
  RecordingTransport transport;
  WorkerMetrics metrics;
  EventLog log{monotonic_now()};
  std::unique_ptr<Call> call;
  OpusEncoderHandle encoder{48000, OpusEncoderConfig{}};
  uint8_t packet[1275];
  std::vector<std::vector<int16_t>> speech;
  Nanos next_frame_at = 0;
  uint16_t seq = 1;
  uint32_t timestamp = 0;
};

TEST_F(CallRealtimeFlowTest, ConnectSendMessageSpeakAndInterrupt) {
  ASSERT_TRUE(transport.find("session.created"));
  client({{"type", "session.update"},
          {"session", {{"type", "realtime"}, {"model", "gpt-realtime"}, {"instructions", "echo"}}}});
  ASSERT_TRUE(transport.find("session.updated"));

  // sendMessage("hello"): the echo's reply reaches the client as a text response.
  client({{"type", "conversation.item.create"},
          {"item",
           {{"type", "message"},
            {"role", "user"},
            {"content", {{{"type", "input_text"}, {"text", "hello"}}}}}}});
  client({{"type", "response.create"}});
  ASSERT_TRUE(wait_for("response.done", 0));
  EXPECT_EQ(transport.find("response.output_text.delta")->at("delta"), "hello");

  // Speech through the Call's decoder: VAD events, then the replay between
  // output_audio_buffer.started and .stopped, all carrying the replay's response id.
  size_t mark = transport.text_out.size();
  const size_t audio_before = transport.audio.size();
  speak(25);
  ASSERT_TRUE(wait_for("output_audio_buffer.stopped", mark, std::chrono::seconds(8)));
  ASSERT_TRUE(transport.find("input_audio_buffer.speech_started", mark));
  ASSERT_TRUE(transport.find("input_audio_buffer.speech_stopped", mark));
  const json& created = *transport.find("response.created", mark);
  EXPECT_EQ(transport.find("output_audio_buffer.started", mark)->at("response_id"),
            created["response"]["id"]);
  EXPECT_EQ(transport.find("output_audio_buffer.stopped", mark)->at("response_id"),
            created["response"]["id"]);
  EXPECT_GE(transport.audio.size() - audio_before, 25u);

  // interrupt() during a replay: response.cancel then output_audio_buffer.clear.
  mark = transport.text_out.size();
  speak(100);
  ASSERT_TRUE(wait_for("output_audio_buffer.started", mark, std::chrono::seconds(8)));
  client({{"type", "response.cancel"}});
  client({{"type", "output_audio_buffer.clear"}});
  EXPECT_TRUE(call->playout().empty());
  ASSERT_TRUE(wait_for("response.done", mark));
  EXPECT_EQ(transport.find("response.done", mark)->at("response")["status"], "cancelled");
  // Past the trailing silence, nothing of the replay plays any more.
  const auto quiet_from = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  while (std::chrono::steady_clock::now() < quiet_from) turn();
  const size_t played_after_interrupt = transport.audio.size();
  const auto quiet_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < quiet_until) turn();
  EXPECT_EQ(transport.audio.size(), played_after_interrupt) << "audio after interrupt()";
  size_t cleared = 0;
  for (size_t i = mark; i < transport.text_out.size(); ++i)
    cleared += transport.text_out[i].second["type"] == "output_audio_buffer.cleared";
  EXPECT_EQ(cleared, 1u);
  EXPECT_FALSE(transport.find("output_audio_buffer.stopped", mark))
      << "the cleared output does not also stop";
  for (const auto& [stream, e] : transport.text_out) EXPECT_TRUE(e["event_id"].is_string()) << e;
  call->end(SessionEnd::deleted, monotonic_now());
}

}  // namespace
}  // namespace rtce
