// echo_backend_events_test.cpp — the Realtime events the echo backend speaks: VAD
// speech_started/stopped/committed with positions in the input audio, the parrot's replay
// as a response, response.cancel / output_audio_buffer.clear cutting it at once, and the
// text echo. Every event is checked against the fields @openai/agents-realtime 0.20.0
// requires (dist/openaiRealtimeEvents.mjs), and none arrives from inside a send.
#include <gtest/gtest.h>

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>

#include "backend.h"
#include "test_support.h"

namespace rtce::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

bool is_string(const json& e, const char* key) { return e.contains(key) && e[key].is_string(); }
bool is_number(const json& e, const char* key) { return e.contains(key) && e[key].is_number(); }

// The parts of the SDK's zod schemas for the events the echo sends: an event failing them
// would reach the app only as a generic event, and not be acted on.
void expect_sdk_shape(const json& e) {
  ASSERT_TRUE(e.is_object());
  ASSERT_TRUE(is_string(e, "type")) << e;
  EXPECT_TRUE(is_string(e, "event_id")) << e;
  const std::string type = e["type"];
  if (type == "input_audio_buffer.speech_started") {
    EXPECT_TRUE(is_string(e, "item_id") && is_number(e, "audio_start_ms")) << e;
  } else if (type == "input_audio_buffer.speech_stopped") {
    EXPECT_TRUE(is_string(e, "item_id") && is_number(e, "audio_end_ms")) << e;
  } else if (type == "input_audio_buffer.committed") {
    EXPECT_TRUE(is_string(e, "item_id")) << e;
    EXPECT_TRUE(!e.contains("previous_item_id") || e["previous_item_id"].is_null() ||
                e["previous_item_id"].is_string());
  } else if (type == "response.created" || type == "response.done") {
    ASSERT_TRUE(e.contains("response") && e["response"].is_object()) << e;
    const json& r = e["response"];
    EXPECT_TRUE(is_string(r, "id")) << e;
    EXPECT_EQ(r["object"], "realtime.response");
    const std::set<std::string> statuses = {"completed", "incomplete", "failed", "cancelled", "in_progress"};
    EXPECT_TRUE(statuses.count(r["status"].get<std::string>())) << e;
    EXPECT_TRUE(r["output"].is_array());
  } else if (type == "response.output_item.added" || type == "response.output_item.done") {
    EXPECT_TRUE(is_string(e, "response_id") && is_number(e, "output_index")) << e;
    ASSERT_TRUE(e["item"].is_object());
    EXPECT_EQ(e["item"]["type"], "message");
  } else if (type == "response.content_part.added" || type == "response.content_part.done") {
    EXPECT_TRUE(is_string(e, "response_id") && is_string(e, "item_id") && is_number(e, "output_index") &&
                is_number(e, "content_index"))
        << e;
    EXPECT_TRUE(e["part"].is_object() && e["part"]["type"] == "text") << e;
  } else if (type == "response.output_text.delta") {
    EXPECT_TRUE(is_string(e, "response_id") && is_string(e, "item_id") && is_number(e, "output_index") &&
                is_number(e, "content_index") && is_string(e, "delta"))
        << e;
  } else if (type == "response.output_text.done") {
    EXPECT_TRUE(is_string(e, "response_id") && is_string(e, "item_id") && is_number(e, "output_index") &&
                is_number(e, "content_index") && is_string(e, "text"))
        << e;
  } else if (type == "conversation.item.added" || type == "conversation.item.done") {
    ASSERT_TRUE(e["item"].is_object()) << e;
    EXPECT_TRUE(is_string(e["item"], "id")) << e;
    // realtimeMessageItemSchema: user content is input_text, assistant content output_text.
    const std::string role = e["item"]["role"];
    for (const json& part : e["item"]["content"]) {
      EXPECT_EQ(part["type"], role == "user" ? "input_text" : "output_text") << e;
      EXPECT_TRUE(is_string(part, "text")) << e;
    }
  } else {
    ADD_FAILURE() << "an event the echo should not send: " << e;
  }
}

struct EventListener : RecordingListener {
  void on_backend_event(const json& event) override {
    EXPECT_FALSE(inside_send) << "an event from inside a send: " << event;
    // What had been played when this event arrived, to check its order against the audio.
    frames_before.push_back(audio.size());
    RecordingListener::on_backend_event(event);
  }
  std::vector<std::string> types() const {
    std::vector<std::string> out;
    for (const json& e : events) out.push_back(e["type"]);
    return out;
  }
  const json* find(std::string_view type) const {
    for (const json& e : events)
      if (e["type"] == type) return &e;
    return nullptr;
  }
  std::vector<size_t> frames_before;
};

class EchoEventsTest : public ::testing::Test {
 protected:
  std::unique_ptr<BackendConnection> make(EchoBackendConfig::Mode mode) {
    EchoBackendConfig config;
    config.mode = mode;
    config.loopback_delay = 100'000'000;
    return make_echo_backend(config, session_16k("echo-events"), listener, counters);
  }
  void send(BackendConnection& backend, const std::vector<int16_t>& frame) {
    listener.inside_send = true;
    backend.send_audio(frame);
    listener.inside_send = false;
  }
  void send_event(BackendConnection& backend, const json& event) {
    listener.inside_send = true;
    backend.send_event(event);
    listener.inside_send = false;
  }
  // 20 frames of silence, `tone` frames of tone, then 35 of silence (the 700 ms hangover).
  void utterance(BackendConnection& backend, int tone) {
    const std::vector<int16_t> silence(320, 0);
    for (int i = 0; i < 20; ++i) send(backend, silence);
    for (int i = 0; i < tone; ++i) send(backend, tone_frame(i));
    for (int i = 0; i < 35; ++i) send(backend, silence);
  }
  bool has(std::string_view type) const { return listener.find(type) != nullptr; }

  boost::asio::io_context io;
  EventListener listener;
  BackendCounters counters;
};

TEST_F(EchoEventsTest, ParrotVadEventsCarryInputAudioPositionsAndOneItemId) {
  auto backend = make(EchoBackendConfig::Mode::parrot);
  DeadlineDriver backend_deadlines(io, backend);
  utterance(*backend, 25);
  ASSERT_TRUE(run_until(io, [&] { return has("input_audio_buffer.committed"); }));
  ASSERT_GE(listener.events.size(), 3u);
  const json started = listener.events[0];  // copies: the list is cleared below
  const json stopped = listener.events[1];
  const json committed = listener.events[2];
  EXPECT_EQ(started["type"], "input_audio_buffer.speech_started");
  EXPECT_EQ(started["audio_start_ms"], 400) << "after 20 frames of silence";
  EXPECT_EQ(stopped["type"], "input_audio_buffer.speech_stopped");
  EXPECT_EQ(stopped["audio_end_ms"], 1600) << "80 frames in, at the end of the 700 ms hangover";
  EXPECT_EQ(committed["type"], "input_audio_buffer.committed");
  EXPECT_TRUE(committed["previous_item_id"].is_null());
  EXPECT_EQ(started["item_id"], stopped["item_id"]);
  EXPECT_EQ(started["item_id"], committed["item_id"]);

  // A second utterance after the replay: a new item, later positions.
  ASSERT_TRUE(run_until(io, [&] { return has("response.done"); }));
  listener.events.clear();
  utterance(*backend, 10);
  ASSERT_TRUE(run_until(io, [&] { return has("input_audio_buffer.speech_stopped"); }));
  EXPECT_NE(listener.events[0]["item_id"], started["item_id"]);
  EXPECT_EQ(listener.events[0]["audio_start_ms"], (80 + 20) * 20);
  EXPECT_EQ(listener.events[1]["audio_end_ms"], (80 + 65) * 20);
}

TEST_F(EchoEventsTest, ParrotReplayIsAResponseAroundItsAudio) {
  auto backend = make(EchoBackendConfig::Mode::parrot);
  DeadlineDriver backend_deadlines(io, backend);
  utterance(*backend, 25);
  ASSERT_TRUE(run_until(io, [&] { return has("response.done"); }));
  EXPECT_EQ(listener.types(), (std::vector<std::string>{
                                  "input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                                  "input_audio_buffer.committed", "response.created", "response.done"}));
  EXPECT_EQ(listener.frames_before[3], 0u) << "response.created before the first replayed frame";
  EXPECT_EQ(listener.frames_before[4], 25u) << "response.done after the last";
  const json& created = listener.events[3];
  const json& done = listener.events[4];
  EXPECT_EQ(created["response"]["status"], "in_progress");
  EXPECT_EQ(done["response"]["status"], "completed");
  EXPECT_EQ(created["response"]["id"], done["response"]["id"]);
  EXPECT_EQ(created["response"]["id"].get<std::string>().rfind("resp_", 0), 0u);
  for (const json& e : listener.events) expect_sdk_shape(e);
  EXPECT_FALSE(has("output_audio_buffer.started")) << "the session owns output_audio_buffer.*";
}

TEST_F(EchoEventsTest, CancelStopsTheReplayAtOnceAndEndsTheResponseCancelled) {
  for (const char* stop : {"response.cancel", "output_audio_buffer.clear"}) {
    SCOPED_TRACE(stop);
    listener.events.clear();
    listener.audio.clear();
    listener.frames_before.clear();
    auto backend = make(EchoBackendConfig::Mode::parrot);
    DeadlineDriver backend_deadlines(io, backend);
    utterance(*backend, 100);  // a 2 s replay
    ASSERT_TRUE(run_until(io, [&] { return listener.audio.size() >= 5; }));
    send_event(*backend, {{"type", stop}});
    const size_t played = listener.audio.size();
    ASSERT_TRUE(run_until(io, [&] { return has("response.done"); }));
    run_for(io, 100ms);
    EXPECT_EQ(listener.audio.size(), played) << "frames played after the cancel";
    EXPECT_EQ(listener.find("response.done")->at("response")["status"], "cancelled");
    EXPECT_EQ(listener.find("response.done")->at("response")["id"],
              listener.find("response.created")->at("response")["id"]);
    size_t dones = 0;
    for (const json& e : listener.events) dones += e["type"] == "response.done";
    EXPECT_EQ(dones, 1u);

    // It listens again afterwards.
    listener.events.clear();
    utterance(*backend, 10);
    ASSERT_TRUE(run_until(io, [&] { return has("response.created"); }));
    backend->close("done");
  }
}

TEST_F(EchoEventsTest, LoopbackVadSpeaksTooAndClearDropsTheWaitingAudio) {
  auto backend = make(EchoBackendConfig::Mode::loopback);
  DeadlineDriver backend_deadlines(io, backend);
  utterance(*backend, 25);
  ASSERT_TRUE(run_until(io, [&] { return has("input_audio_buffer.committed"); }));
  EXPECT_EQ(listener.events[0]["audio_start_ms"], 400);
  EXPECT_EQ(listener.events[1]["audio_end_ms"], 1600);
  EXPECT_FALSE(has("response.created")) << "loopback is not a response";
  for (const json& e : listener.events) expect_sdk_shape(e);

  // All 80 frames sit in the 100 ms delay line; a clear drops what has not been played.
  ASSERT_LT(listener.audio.size(), 80u);
  send_event(*backend, {{"type", "output_audio_buffer.clear"}});
  const size_t played = listener.audio.size();
  run_for(io, 200ms);
  EXPECT_EQ(listener.audio.size(), played);
}

TEST_F(EchoEventsTest, TextTurnIsEchoedAsATextResponse) {
  auto backend = make(EchoBackendConfig::Mode::parrot);
  DeadlineDriver backend_deadlines(io, backend);
  // RealtimeSession.sendMessage("hello"): conversation.item.create, then response.create.
  send_event(*backend, {{"type", "conversation.item.create"},
                        {"item",
                         {{"type", "message"},
                          {"role", "user"},
                          {"content", {{{"type", "input_text"}, {"text", "hello"}}}}}}});
  send_event(*backend, {{"type", "response.create"}});
  EXPECT_TRUE(listener.events.empty()) << "events wait for the loop";
  ASSERT_TRUE(run_until(io, [&] { return has("response.done"); }));
  EXPECT_EQ(listener.types(),
            (std::vector<std::string>{
                "conversation.item.added", "response.created", "response.output_item.added",
                "conversation.item.added", "response.content_part.added", "response.output_text.delta",
                "response.output_text.done", "response.content_part.done", "response.output_item.done",
                "conversation.item.done", "response.done"}));
  for (const json& e : listener.events) expect_sdk_shape(e);
  EXPECT_EQ(listener.events[0]["item"]["role"], "user");
  EXPECT_EQ(listener.find("response.output_text.delta")->at("delta"), "hello");
  EXPECT_EQ(listener.find("response.output_text.done")->at("text"), "hello");
  const json& done = *listener.find("response.done");
  EXPECT_EQ(done["response"]["status"], "completed");
  EXPECT_EQ(done["response"]["output"][0]["content"][0]["text"], "hello");
  const std::string response_id = listener.events[1]["response"]["id"];
  for (const json& e : listener.events) {
    if (e.contains("response_id")) EXPECT_EQ(e["response_id"], response_id) << e;
  }
  // A response.create with nothing said yet still gets a complete response.
  listener.events.clear();
  send_event(*backend, {{"type", "response.create"}});
  ASSERT_TRUE(run_until(io, [&] { return has("response.done"); }));
  EXPECT_NE(listener.find("response.created")->at("response")["id"], response_id);
}

TEST_F(EchoEventsTest, EventsItDoesNotUnderstandAreIgnored) {
  auto backend = make(EchoBackendConfig::Mode::parrot);
  DeadlineDriver backend_deadlines(io, backend);
  for (const json& e : std::vector<json>{
           json::array(),
           {{"type", 5}},
           {{"type", "conversation.item.create"}},
           {{"type", "conversation.item.create"}, {"item", 7}},
           {{"type", "conversation.item.create"}, {"item", {{"type", 1}, {"role", "user"}}}},
           {{"type", "conversation.item.create"},
            {"item", {{"type", "message"}, {"role", "user"}, {"content", "x"}}}},
           {{"type", "conversation.item.create"},
            {"item",
             {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", 3}}}}}}},
           {{"type", "conversation.item.create"},
            {"item", {{"id", 9}, {"type", "function_call_output"}, {"output", "x"}}}},
           {{"type", "session.update"}, {"session", json::object()}},
           {{"type", "response.cancel"}},  // nothing to cancel
       }) {
    send_event(*backend, e);
  }
  run_for(io, 50ms);
  EXPECT_TRUE(listener.events.empty()) << listener.events.front();
}

TEST_F(EchoEventsTest, AFloodOfTextTurnsIsBoundedAndCounted) {
  auto backend = make(EchoBackendConfig::Mode::loopback);
  DeadlineDriver backend_deadlines(io, backend);
  for (int i = 0; i < 100; ++i) send_event(*backend, {{"type", "response.create"}});
  ASSERT_TRUE(run_until(io, [&] { return counters.protocol_errors.get() > 0 && !listener.events.empty(); }));
  run_for(io, 50ms);
  EXPECT_LE(listener.events.size(), 256u);
  EXPECT_GT(counters.protocol_errors.get(), 0u);
}

TEST_F(EchoEventsTest, ClosedFromAnEventCallbackIsSafe) {
  struct Closing : EventListener {
    std::function<void()> then;
    void on_backend_event(const json& event) override {
      EventListener::on_backend_event(event);
      if (then) std::exchange(then, nullptr)();
    }
  };
  Closing closing;
  EchoBackendConfig config;
  config.mode = EchoBackendConfig::Mode::parrot;
  std::unique_ptr<BackendConnection> conn =
      make_echo_backend(config, session_16k("echo-events"), closing, counters);
  DeadlineDriver conn_deadlines(io, conn);
  closing.then = [&] { conn.reset(); };
  conn->send_event({{"type", "response.create"}});
  ASSERT_TRUE(run_until(io, [&] { return conn == nullptr; }));
  run_for(io, 50ms);
  EXPECT_EQ(closing.events.size(), 1u) << "no events after the connection was destroyed";
}

}  // namespace
}  // namespace rtce::testing
