// echo_backend_events_test.cpp — the Realtime events the echo backend speaks: VAD
// speech_started/stopped/committed with positions in the input audio, the parrot's replay
// as a response, response.cancel / output_audio_buffer.clear cutting it at once, the
// text echo, and the scripted tool round trip (`call <name> [<arguments>]`, then the
// function_call_output spoken as text and a tone). Every event is checked against the fields
// @openai/agents-realtime 0.20.0 requires (dist/openaiRealtimeEvents.mjs), and none arrives
// from inside a send.
#include <gtest/gtest.h>

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <span>
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
    const json& item = e["item"];
    if (item["type"] == "function_call") {
      EXPECT_TRUE(is_string(item, "name") && is_string(item, "call_id") && is_string(item, "arguments")) << e;
    } else {
      EXPECT_EQ(item["type"], "message");
    }
  } else if (type == "response.function_call_arguments.delta" ||
             type == "response.function_call_arguments.done") {
    EXPECT_TRUE(is_string(e, "response_id") && is_string(e, "item_id") && is_string(e, "call_id") &&
                is_number(e, "output_index"))
        << e;
    EXPECT_TRUE(is_string(e, type == "response.function_call_arguments.delta" ? "delta" : "arguments")) << e;
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
    if (e["item"]["type"] == "function_call") {
      EXPECT_TRUE(is_string(e["item"], "name") && is_string(e["item"], "call_id") &&
                  is_string(e["item"], "arguments"))
          << e;
      return;
    }
    if (e["item"]["type"] == "function_call_output") {
      EXPECT_TRUE(is_string(e["item"], "call_id") && is_string(e["item"], "output")) << e;
      return;
    }
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

// The scripted tool round trip, on a manual clock: the test calls on_deadline itself, at
// each of the echo's deadlines in turn, so the tone's 20 ms pace is exact and nothing waits
// on a timer. The echo stamps what it queues with the real clock; the manual one starts at
// the real now (make_with) and moves only to the deadlines it runs, so a response queued
// after a text turn is not already overdue.
class EchoToolsTest : public EchoEventsTest {
 protected:
  static json function_tool(std::string name) {
    return {{"type", "function"},
            {"name", std::move(name)},
            {"description", "a tool"},
            {"parameters", {{"type", "object"}, {"properties", json::object()}}}};
  }
  std::unique_ptr<BackendConnection> make_with(EchoBackendConfig::Mode mode, json tools,
                                               int sample_rate = 16000, bool opus_passthrough = false) {
    EchoBackendConfig config;
    config.mode = mode;
    config.loopback_delay = 100'000'000;
    BackendSessionInfo info = session_16k("echo-tools");
    info.sample_rate = sample_rate;
    info.opus_passthrough = opus_passthrough;
    if (!tools.is_null()) info.session_config = {{"type", "realtime"}, {"tools", std::move(tools)}};
    clock = monotonic_now();
    listener.on_audio = [this] { frame_times.push_back(clock); };
    return make_echo_backend(config, std::move(info), listener, counters);
  }
  // Runs the echo's deadlines up to `window` past now, in order.
  void advance(BackendConnection& backend, Nanos window = 1'000'000'000) {
    const Nanos until = std::max(clock, monotonic_now()) + window;
    while (backend.next_deadline() <= until) {
      clock = std::max(clock, backend.next_deadline());
      backend.on_deadline(clock);
    }
  }
  // A user text turn, then response.create; the events of both, played out.
  void say(BackendConnection& backend, const std::string& text) {
    listener.events.clear();
    listener.frames_before.clear();
    send_event(
        backend,
        {{"type", "conversation.item.create"},
         {"item",
          {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", text}}}}}}});
    send_event(backend, {{"type", "response.create"}});
    advance(backend);
  }
  // A function_call_output for call_id, then response.create, played out.
  void answer(BackendConnection& backend, const std::string& call_id, const std::string& output) {
    listener.events.clear();
    listener.frames_before.clear();
    listener.audio.clear();
    frame_times.clear();
    send_event(backend,
               {{"type", "conversation.item.create"},
                {"item", {{"type", "function_call_output"}, {"call_id", call_id}, {"output", output}}}});
    send_event(backend, {{"type", "response.create"}});
    advance(backend);
  }
  // The function call the last turn made, or null.
  const json* call_item() const {
    const json* done = listener.find("response.output_item.done");
    return done && done->at("item")["type"] == "function_call" ? &done->at("item") : nullptr;
  }
  std::string reply_text() const {
    const json* done = listener.find("response.output_text.done");
    return done ? done->at("text").get<std::string>() : std::string();
  }

  Nanos clock = 0;
  std::vector<Nanos> frame_times;  // the clock at each frame the echo played
};

TEST_F(EchoToolsTest, ScriptedCallIsTheRealtimeFunctionCallSequence) {
  auto backend = make_with(EchoBackendConfig::Mode::loopback, json::array({function_tool("get_weather")}));
  say(*backend, R"(call get_weather {"city":"Paris"})");
  EXPECT_EQ(listener.types(), (std::vector<std::string>{
                                  "conversation.item.added", "response.created", "response.output_item.added",
                                  "conversation.item.added", "response.function_call_arguments.delta",
                                  "response.function_call_arguments.done", "response.output_item.done",
                                  "conversation.item.done", "response.done"}));
  for (const json& e : listener.events) expect_sdk_shape(e);
  EXPECT_TRUE(listener.audio.empty());

  const json& created = listener.events[1];
  const json& added = listener.events[2];
  const json& delta = listener.events[4];
  const json& args_done = listener.events[5];
  const json& item_done = listener.events[6];
  const json& done = listener.events[8];
  const std::string response_id = created["response"]["id"];
  EXPECT_EQ(created["response"]["status"], "in_progress");
  EXPECT_EQ(created["response"]["output"], json::array());

  const json& item = added["item"];
  const std::string item_id = item["id"];
  const std::string call_id = item["call_id"];
  EXPECT_EQ(item_id.rfind("item_", 0), 0u);
  EXPECT_EQ(call_id.rfind("call_", 0), 0u);
  EXPECT_EQ(item["object"], "realtime.item");
  EXPECT_EQ(item["type"], "function_call");
  EXPECT_EQ(item["status"], "in_progress");
  EXPECT_EQ(item["name"], "get_weather");
  EXPECT_EQ(item["arguments"], "");
  EXPECT_EQ(added["response_id"], response_id);
  EXPECT_EQ(added["output_index"], 0);
  EXPECT_EQ(listener.events[3]["item"], item) << "conversation.item.added: the same item";

  for (const json* e : {&delta, &args_done}) {
    EXPECT_EQ((*e)["response_id"], response_id);
    EXPECT_EQ((*e)["item_id"], item_id);
    EXPECT_EQ((*e)["output_index"], 0);
    EXPECT_EQ((*e)["call_id"], call_id) << "the call id of the item";
  }
  EXPECT_EQ(delta["delta"], R"({"city":"Paris"})");
  EXPECT_EQ(args_done["name"], "get_weather");
  EXPECT_EQ(args_done["arguments"], R"({"city":"Paris"})");

  json completed = item;
  completed["status"] = "completed";
  completed["arguments"] = R"({"city":"Paris"})";
  EXPECT_EQ(item_done["item"], completed);
  EXPECT_EQ(item_done["response_id"], response_id);
  EXPECT_EQ(listener.events[7]["item"], completed);
  EXPECT_EQ(done["response"]["id"], response_id);
  EXPECT_EQ(done["response"]["status"], "completed");
  EXPECT_EQ(done["response"]["output"], json::array({completed}));
}

TEST_F(EchoToolsTest, ArgumentsDefaultToAnEmptyObjectAndPassAsGiven) {
  auto backend = make_with(EchoBackendConfig::Mode::parrot, json::array({function_tool("lookup")}));
  say(*backend, "call lookup");
  ASSERT_NE(call_item(), nullptr);
  EXPECT_EQ((*call_item())["arguments"], "{}");
  say(*backend, "  call   lookup   {not json  ");
  ASSERT_NE(call_item(), nullptr);
  EXPECT_EQ((*call_item())["arguments"], "{not json") << "the text given, trimmed";
  EXPECT_EQ(listener.find("response.function_call_arguments.done")->at("arguments"), "{not json");
  // Each call has its own call id.
  const std::string first = (*call_item())["call_id"];
  say(*backend, "call lookup");
  EXPECT_NE((*call_item())["call_id"], first);
}

TEST_F(EchoToolsTest, CallOfAnythingButAToolIsThePlainEcho) {
  auto backend = make_with(EchoBackendConfig::Mode::loopback, json::array({function_tool("get_weather")}));
  for (const std::string text : {"call unknown_tool", "call unknown_tool {}", "callget_weather", "call",
                                 "please call get_weather", "Call get_weather"}) {
    SCOPED_TRACE(text);
    say(*backend, text);
    EXPECT_EQ(call_item(), nullptr);
    EXPECT_EQ(reply_text(), text);
    EXPECT_FALSE(has("response.function_call_arguments.done"));
  }
  // No tools at all: the same.
  listener.events.clear();
  auto bare = make_with(EchoBackendConfig::Mode::loopback, json());
  say(*bare, "call get_weather");
  EXPECT_EQ(call_item(), nullptr);
  EXPECT_EQ(reply_text(), "call get_weather");
}

TEST_F(EchoToolsTest, ToolsComeFromTheSessionConfigAndEachSessionUpdateReplacesThem) {
  auto backend = make_with(EchoBackendConfig::Mode::loopback, json::array({function_tool("get_weather")}));
  say(*backend, "call get_weather");
  EXPECT_NE(call_item(), nullptr) << "a tool of the session config";

  // As the edge forwards it: what applied, type realtime.
  send_event(*backend,
             {{"type", "session.update"},
              {"session", {{"type", "realtime"}, {"tools", json::array({function_tool("lookup")})}}}});
  say(*backend, "call get_weather");
  EXPECT_EQ(call_item(), nullptr) << "replaced";
  say(*backend, "call lookup");
  ASSERT_NE(call_item(), nullptr);
  EXPECT_EQ((*call_item())["name"], "lookup");

  // An update without tools (or with tools that are not an array) leaves them.
  send_event(*backend,
             {{"type", "session.update"}, {"session", {{"type", "realtime"}, {"instructions", "x"}}}});
  send_event(*backend, {{"type", "session.update"}, {"session", {{"tools", "lookup"}}}});
  say(*backend, "call lookup");
  EXPECT_NE(call_item(), nullptr);

  // Only function tools with a name count; an empty list removes them all.
  send_event(*backend, {{"type", "session.update"},
                        {"session",
                         {{"tools",
                           {{{"type", "mcp"}, {"name", "mcp_tool"}},
                            {{"type", "function"}},
                            {{"type", "function"}, {"name", 5}},
                            function_tool("kept")}}}}});
  say(*backend, "call mcp_tool");
  EXPECT_EQ(call_item(), nullptr);
  say(*backend, "call kept");
  EXPECT_NE(call_item(), nullptr);
  send_event(*backend, {{"type", "session.update"}, {"session", {{"tools", json::array()}}}});
  say(*backend, "call kept");
  EXPECT_EQ(call_item(), nullptr);
  EXPECT_EQ(counters.protocol_errors.get(), 0u);
}

TEST_F(EchoToolsTest, TheToolListIsBounded) {
  json tools = json::array();
  tools.push_back(function_tool(std::string(65, 'x')));  // too long: not a tool
  tools.push_back(function_tool(std::string(64, 'y')));
  for (int i = 0; i < 200; ++i) tools.push_back(function_tool("tool_" + std::to_string(i)));
  auto backend = make_with(EchoBackendConfig::Mode::loopback, tools);
  say(*backend, "call " + std::string(65, 'x'));
  EXPECT_EQ(call_item(), nullptr) << "a name above 64 characters";
  say(*backend, "call " + std::string(64, 'y'));
  EXPECT_NE(call_item(), nullptr);
  say(*backend, "call tool_126");
  EXPECT_NE(call_item(), nullptr) << "the 128th tool";
  say(*backend, "call tool_127");
  EXPECT_EQ(call_item(), nullptr) << "the 129th tool";
  say(*backend, "call tool_199");
  EXPECT_EQ(call_item(), nullptr);

  // The same bound for a session.update.
  send_event(*backend, {{"type", "session.update"}, {"session", {{"tools", tools}}}});
  say(*backend, "call tool_127");
  EXPECT_EQ(call_item(), nullptr);
}

// What the tone measures over samples: RMS in dBFS (a full-scale sine is 0) and the rate of
// sign changes (each cycle of a sine has two).
double rms_dbfs(std::span<const int16_t> pcm) {
  double energy = 0;
  for (int16_t s : pcm) energy += static_cast<double>(s) * s;
  return 20 * std::log10(std::sqrt(energy / static_cast<double>(pcm.size())) * std::sqrt(2.0) / 32767);
}

size_t zero_crossings(std::span<const int16_t> pcm) {
  size_t crossings = 0;
  int sign = 0;
  for (int16_t s : pcm) {
    const int now = (s > 0) - (s < 0);
    if (now == 0) continue;
    crossings += sign != 0 && now != sign;
    sign = now;
  }
  return crossings;
}

TEST_F(EchoToolsTest, ToolOutputIsSpokenAsTextAndATone) {
  for (const auto mode : {EchoBackendConfig::Mode::loopback, EchoBackendConfig::Mode::parrot}) {
    for (const int rate : {16000, 48000}) {
      SCOPED_TRACE(::testing::Message()
                   << "parrot " << (mode == EchoBackendConfig::Mode::parrot) << " rate " << rate);
      listener.events.clear();
      auto backend = make_with(mode, json::array({function_tool("get_weather")}), rate);
      say(*backend, R"(call get_weather {"city":"Paris"})");
      ASSERT_NE(call_item(), nullptr);
      const std::string call_id = (*call_item())["call_id"];

      answer(*backend, call_id, R"({"temperature":21})");
      EXPECT_EQ(listener.types(),
                (std::vector<std::string>{
                    "conversation.item.added", "conversation.item.done", "response.created",
                    "response.output_item.added", "conversation.item.added", "response.content_part.added",
                    "response.output_text.delta", "response.output_text.done", "response.content_part.done",
                    "response.output_item.done", "conversation.item.done", "response.done"}));
      for (const json& e : listener.events) expect_sdk_shape(e);
      const json& output_item = listener.events[0]["item"];
      EXPECT_EQ(output_item["type"], "function_call_output");
      EXPECT_EQ(output_item["object"], "realtime.item");
      EXPECT_EQ(output_item["call_id"], call_id);
      EXPECT_EQ(output_item["output"], R"({"temperature":21})");
      EXPECT_EQ(listener.events[1]["item"], output_item);
      EXPECT_EQ(reply_text(), R"(the tool said: {"temperature":21})");
      const json& done = listener.events.back();
      EXPECT_EQ(done["response"]["status"], "completed");
      EXPECT_EQ(done["response"]["id"], listener.events[2]["response"]["id"]);
      EXPECT_EQ(done["response"]["output"][0]["content"][0]["text"], reply_text());

      // The tone: between response.created and response.done, 20 ms frames at 20 ms pace.
      const size_t frames = listener.audio.size();
      ASSERT_GE(frames, 15u);
      EXPECT_EQ(frames, 20u) << "400 ms";
      EXPECT_EQ(listener.frames_before[2], 0u) << "response.created before the first frame";
      EXPECT_EQ(listener.frames_before.back(), frames) << "response.done after the last";
      ASSERT_EQ(frame_times.size(), frames);
      for (size_t i = 1; i < frames; ++i) EXPECT_EQ(frame_times[i] - frame_times[i - 1], 20'000'000) << i;
      std::vector<int16_t> tone;
      for (const auto& frame : listener.audio) {
        ASSERT_EQ(frame.size(), static_cast<size_t>(rate / 50));
        tone.insert(tone.end(), frame.begin(), frame.end());
      }
      for (size_t i = 1; i + 1 < frames; ++i) {  // the first and last frames ramp
        EXPECT_NEAR(rms_dbfs(listener.audio[i]), -12.0, 0.5) << "frame " << i;
      }
      const double seconds = static_cast<double>(tone.size()) / rate;
      EXPECT_NEAR(static_cast<double>(zero_crossings(tone)) / (2 * seconds), 440.0, 5.0);

      // A second response.create is the plain echo again.
      listener.audio.clear();
      listener.events.clear();
      send_event(*backend, {{"type", "response.create"}});
      advance(*backend);
      EXPECT_EQ(reply_text(), "(echo: nothing to repeat)");
      EXPECT_TRUE(listener.audio.empty());
    }
  }
}

TEST_F(EchoToolsTest, OutputForACallNeverIssuedIsAcceptedAndSaysSo) {
  auto backend = make_with(EchoBackendConfig::Mode::loopback, json::array({function_tool("get_weather")}));
  answer(*backend, "call_made_up", "sunny");
  EXPECT_EQ(listener.events[0]["type"], "conversation.item.added");
  EXPECT_EQ(listener.events[0]["item"]["call_id"], "call_made_up");
  EXPECT_EQ(reply_text(), "the tool said (for an unknown call): sunny");
  EXPECT_EQ(listener.audio.size(), 20u) << "spoken all the same";

  // An output without a call id, or not a string, is not an output.
  listener.events.clear();
  send_event(*backend, {{"type", "conversation.item.create"},
                        {"item", {{"type", "function_call_output"}, {"output", "x"}}}});
  send_event(*backend, {{"type", "conversation.item.create"},
                        {"item", {{"type", "function_call_output"}, {"call_id", "c"}, {"output", 7}}}});
  advance(*backend);
  EXPECT_TRUE(listener.events.empty());
}

TEST_F(EchoToolsTest, TheQuotedOutputIsCutTo1000Characters) {
  auto backend =
      make_with(EchoBackendConfig::Mode::loopback, json::array({function_tool("get_weather")}), 16000, true);
  std::string output;
  for (int i = 0; i < 1500; ++i) output += "\xC3\xA9";  // é: two bytes, one character
  answer(*backend, "call_x", output);
  EXPECT_EQ(listener.events[0]["item"]["output"], output) << "the item is the client's";
  const std::string prefix = "the tool said (for an unknown call): ";
  EXPECT_EQ(reply_text(), prefix + output.substr(0, 2000));
  // Opus passthrough: the text goes, no tone, and the response ends at once.
  EXPECT_TRUE(listener.audio.empty());
  EXPECT_TRUE(listener.opus.empty());
  EXPECT_EQ(listener.events.back()["type"], "response.done");
  EXPECT_EQ(listener.events.back()["response"]["status"], "completed");
}

TEST_F(EchoToolsTest, CancelStopsTheToneAndEndsTheResponseCancelled) {
  auto backend = make_with(EchoBackendConfig::Mode::parrot, json::array({function_tool("get_weather")}));
  send_event(*backend, {{"type", "conversation.item.create"},
                        {"item", {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "ok"}}}});
  send_event(*backend, {{"type", "response.create"}});
  advance(*backend, 100'000'000);  // 100 ms of the 400
  const size_t played = listener.audio.size();
  EXPECT_GE(played, 4u);
  EXPECT_LT(played, 20u);
  send_event(*backend, {{"type", "response.cancel"}});
  advance(*backend);
  EXPECT_EQ(listener.audio.size(), played);
  size_t dones = 0;
  for (const json& e : listener.events) dones += e["type"] == "response.done";
  EXPECT_EQ(dones, 1u);
  EXPECT_EQ(listener.find("response.done")->at("response")["status"], "cancelled");
}

TEST_F(EchoToolsTest, LoopbackYieldsTheOutputToTheTone) {
  auto backend = make_with(EchoBackendConfig::Mode::loopback, json::array({function_tool("get_weather")}));
  send_event(*backend, {{"type", "conversation.item.create"},
                        {"item", {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "ok"}}}});
  send_event(*backend, {{"type", "response.create"}});
  // Loopback frames sent now come due (100 ms later) while the tone plays: one frame each 20 ms.
  for (int i = 0; i < 5; ++i) send(*backend, numbered_frame(16000, i));
  advance(*backend);
  EXPECT_EQ(listener.audio.size(), 20u);
  for (const auto& frame : listener.audio) EXPECT_NE(frame, numbered_frame(16000, 0));
  EXPECT_EQ(counters.frames_dropped_outbound.get(), 5u);
}

}  // namespace
}  // namespace rtce::testing
