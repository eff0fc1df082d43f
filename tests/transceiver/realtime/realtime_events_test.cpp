// realtime_events_test.cpp — the oai-events channel against what @openai/agents-realtime
// 0.20.0 sends and expects: session.created/updated shapes, its first session.update,
// hostile messages (one error each, counted, channel still working), clear/cancel,
// output_audio_buffer pairing, backend events passed through or dropped.
#include "realtime_events.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace rtce {
namespace {

using json = nlohmann::json;

// The first session.update of OpenAIRealtimeBase._getMergedSessionConfig with the SDK's
// defaults and an agent with instructions and one function tool (dist/openaiRealtimeBase.mjs).
const char* kSdkFirstUpdate = R"({"type":"session.update","session":{
  "type":"realtime","instructions":"You are a helpful assistant.","model":"gpt-realtime-2.1",
  "output_modalities":["audio"],
  "audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"noise_reduction":null,
                    "transcription":{"model":"gpt-4o-mini-transcribe"},
                    "turn_detection":{"type":"semantic_vad"}},
           "output":{"format":{"type":"audio/pcm","rate":24000},"speed":1}},
  "tools":[{"type":"function","name":"get_weather","description":"Weather for a city",
            "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}})";

class RealtimeEventsTest : public ::testing::Test {
 protected:
  RealtimeEventChannel make(json initial = nullptr, RealtimeEventChannel::Limits limits = {}) {
    RealtimeEventChannel::Callbacks cb;
    cb.send_to_client = [this](std::string_view text) {
      json event = json::parse(text);  // every message the edge sends must be valid JSON
      to_client.push_back(event);
    };
    cb.send_to_backend = [this](const json& event) { to_backend.push_back(event); };
    cb.clear_output = [this] { ++clears; };
    return RealtimeEventChannel(std::move(initial), limits, std::move(cb));
  }

  static void text(RealtimeEventChannel& ch, std::string_view message) {
    ch.on_client_message({reinterpret_cast<const uint8_t*>(message.data()), message.size()}, false, 0);
  }
  static void event(RealtimeEventChannel& ch, const json& e) { text(ch, e.dump()); }

  // The server-event rules every message must follow (the SDK's zod schemas).
  void expect_all_have_event_ids() {
    std::set<std::string> ids;
    for (const json& e : to_client) {
      ASSERT_TRUE(e.is_object());
      ASSERT_TRUE(e["type"].is_string()) << e;
      ASSERT_TRUE(e["event_id"].is_string()) << e;
      EXPECT_TRUE(ids.insert(e["event_id"].get<std::string>()).second) << "duplicate event_id " << e;
    }
  }

  std::vector<json> to_client;
  std::vector<json> to_backend;
  int clears = 0;
};

TEST_F(RealtimeEventsTest, OpenSendsSessionCreatedWithAFullSessionObject) {
  auto ch = make();
  ch.on_open(0);
  ASSERT_EQ(to_client.size(), 1u);
  const json& e = to_client[0];
  EXPECT_EQ(e["type"], "session.created");
  ASSERT_TRUE(e["event_id"].is_string());
  EXPECT_EQ(e["event_id"].get<std::string>().rfind("event_", 0), 0u);
  const json& s = e["session"];
  EXPECT_EQ(s["type"], "realtime");
  EXPECT_EQ(s["object"], "realtime.session");
  EXPECT_EQ(s["id"].get<std::string>().rfind("sess_", 0), 0u);
  EXPECT_TRUE(s["model"].is_string());
  EXPECT_EQ(s["output_modalities"], json::array({"audio"}));
  EXPECT_EQ(s["audio"]["input"]["format"], json({{"type", "audio/pcm"}, {"rate", 24000}}));
  EXPECT_EQ(s["audio"]["input"]["turn_detection"]["type"], "server_vad");
  EXPECT_EQ(s["audio"]["output"]["format"]["type"], "audio/pcm");
  EXPECT_TRUE(s["audio"]["output"]["voice"].is_string());
  EXPECT_TRUE(s["audio"]["output"]["speed"].is_number());
  EXPECT_TRUE(s["instructions"].is_string());
  EXPECT_TRUE(s["tools"].is_array());
  EXPECT_TRUE(s.contains("tracing"));  // the SDK reads session.tracing
  EXPECT_EQ(ch.session(), s);
  ch.on_open(0);
  EXPECT_EQ(to_client.size(), 1u) << "a second open sends nothing";
}

TEST_F(RealtimeEventsTest, InitialSessionIsAppliedOverTheDefaults) {
  auto ch = make({{"model", "my-model"},
                  {"instructions", "be brief"},
                  {"audio", {{"output", {{"voice", "verse"}}}}},
                  {"bogus", 1}});
  ch.on_open(0);
  ASSERT_EQ(to_client.size(), 2u);
  EXPECT_EQ(to_client[0]["session"]["model"], "my-model");
  EXPECT_EQ(to_client[0]["session"]["instructions"], "be brief");
  EXPECT_EQ(to_client[0]["session"]["audio"]["output"]["voice"], "verse");
  EXPECT_EQ(to_client[0]["session"]["audio"]["output"]["speed"], 1.0) << "untouched defaults stay";
  EXPECT_FALSE(to_client[0]["session"].contains("bogus"));
  EXPECT_EQ(to_client[1]["type"], "error");
  EXPECT_NE(to_client[1]["error"]["message"].get<std::string>().find("session.bogus"), std::string::npos);
  expect_all_have_event_ids();
}

TEST_F(RealtimeEventsTest, SdkFirstUpdateGetsSessionUpdatedThenOneErrorNamingWhatIsNotSupported) {
  auto ch = make();
  ch.on_open(0);
  to_client.clear();
  json update = json::parse(kSdkFirstUpdate);
  update["event_id"] = "evt_client_1";
  event(ch, update);

  ASSERT_EQ(to_client.size(), 2u);
  EXPECT_EQ(to_client[0]["type"], "session.updated");
  const json& s = to_client[0]["session"];
  EXPECT_EQ(s["model"], "gpt-realtime-2.1");
  EXPECT_EQ(s["instructions"], "You are a helpful assistant.");
  EXPECT_EQ(s["tools"].size(), 1u);
  EXPECT_EQ(s["tools"][0]["name"], "get_weather");
  EXPECT_EQ(s["audio"]["input"]["format"], json({{"type", "audio/pcm"}, {"rate", 24000}}));
  EXPECT_TRUE(s["audio"]["input"]["noise_reduction"].is_null());
  EXPECT_EQ(s["audio"]["input"]["turn_detection"]["type"], "server_vad") << "what is actually used";
  EXPECT_TRUE(s["audio"]["input"]["transcription"].is_null());
  EXPECT_EQ(s["audio"]["output"]["speed"], 1);
  EXPECT_EQ(s["type"], "realtime");
  EXPECT_EQ(s["object"], "realtime.session");

  const json& err = to_client[1];
  EXPECT_EQ(err["type"], "error");
  EXPECT_EQ(err["error"]["type"], "invalid_request_error");
  EXPECT_EQ(err["error"]["code"], "unsupported_session_field");
  EXPECT_EQ(err["error"]["event_id"], "evt_client_1");
  const std::string message = err["error"]["message"];
  EXPECT_NE(message.find("session.audio.input.transcription"), std::string::npos) << message;
  EXPECT_NE(message.find("session.audio.input.turn_detection.type"), std::string::npos) << message;
  EXPECT_EQ(message.find("noise_reduction"), std::string::npos) << "null noise_reduction is harmless";
  EXPECT_EQ(message.find("format"), std::string::npos) << "PCM formats are harmless";
  EXPECT_EQ(err["error"]["param"], "session.audio.input.transcription");
  expect_all_have_event_ids();

  // The backend gets what was applied, in the client's terms, with the client's event_id:
  // the refused transcription is gone, semantic_vad is the server_vad in use, no read-only
  // or default fields are added.
  ASSERT_EQ(to_backend.size(), 1u);
  EXPECT_EQ(to_backend[0]["type"], "session.update");
  EXPECT_EQ(to_backend[0]["event_id"], "evt_client_1");
  json expected = json::parse(kSdkFirstUpdate)["session"];
  expected["audio"]["input"].erase("transcription");
  expected["audio"]["input"]["turn_detection"] = s["audio"]["input"]["turn_detection"];
  EXPECT_EQ(to_backend[0]["session"], expected);
  EXPECT_EQ(ch.stats().session_updates, 1u);
  EXPECT_EQ(ch.stats().errors_sent, 1u);

  // The tracing update the SDK sends after session.created: applied, no error.
  to_client.clear();
  event(ch, {{"type", "session.update"}, {"session", {{"type", "realtime"}, {"tracing", "auto"}}}});
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0]["session"]["tracing"], "auto");
  EXPECT_EQ(to_client[0]["session"]["model"], "gpt-realtime-2.1") << "earlier fields survive";
}

TEST_F(RealtimeEventsTest, SdkFirstUpdateAgainstABackendThatDoesItAllHasNoError) {
  RealtimeEventChannel::Limits all;
  all.transcription_supported = all.noise_reduction_supported = all.semantic_vad_supported = true;
  auto ch = make(nullptr, all);
  ch.on_open(0);
  to_client.clear();
  text(ch, kSdkFirstUpdate);
  ASSERT_EQ(to_client.size(), 1u) << to_client.back();
  EXPECT_EQ(to_client[0]["session"]["audio"]["input"]["turn_detection"]["type"], "semantic_vad");
  EXPECT_EQ(to_client[0]["session"]["audio"]["input"]["transcription"]["model"], "gpt-4o-mini-transcribe");
}

TEST_F(RealtimeEventsTest, BadSessionFieldsAreReportedTogetherAndTheRestApplied) {
  auto ch = make();
  ch.on_open(0);
  to_client.clear();
  event(ch, {{"type", "session.update"},
             {"event_id", "e2"},
             {"session",
              {{"instructions", "ok"},
               {"voice", "alloy"},  // a beta-era field, not GA
               {"output_modalities", json::array()},
               {"audio",
                {{"input", {{"format", {{"type", "audio/pcm"}, {"rate", 16000}}}}},
                 {"output", {{"speed", 9}, {"voice", "ash"}}}}}}}});
  ASSERT_EQ(to_client.size(), 2u);
  EXPECT_EQ(to_client[0]["session"]["instructions"], "ok");
  EXPECT_EQ(to_client[0]["session"]["audio"]["output"]["voice"], "ash");
  EXPECT_EQ(to_client[0]["session"]["audio"]["output"]["speed"], 1.0);
  EXPECT_EQ(to_client[0]["session"]["output_modalities"], json::array({"audio"}));
  const std::string message = to_client[1]["error"]["message"];
  for (const char* path : {"session.voice", "session.output_modalities", "session.audio.input.format.rate",
                           "session.audio.output.speed"}) {
    EXPECT_NE(message.find(path), std::string::npos) << path << " in " << message;
  }
  EXPECT_EQ(to_client[1]["error"]["event_id"], "e2");
}

TEST_F(RealtimeEventsTest, ReadOnlyAndRefusedFieldsDoNotReachTheBackend) {
  auto ch = make();
  ch.on_open(0);
  json echoed = ch.session();  // a client sending back the session it was given, plus junk
  echoed["instructions"] = "new";
  echoed["bogus"] = true;
  echoed["audio"]["output"]["speed"] = "fast";
  event(ch, {{"type", "session.update"}, {"session", echoed}});
  ASSERT_EQ(to_backend.size(), 1u);
  const json& sent = to_backend[0]["session"];
  EXPECT_EQ(sent["type"], "realtime");
  EXPECT_EQ(sent["instructions"], "new");
  for (const char* key : {"id", "object", "bogus"}) EXPECT_FALSE(sent.contains(key)) << key;
  EXPECT_FALSE(sent["audio"]["output"].contains("speed"));
  EXPECT_EQ(sent["audio"]["output"]["voice"], "alloy");
  EXPECT_EQ(ch.session()["audio"]["output"]["speed"], 1.0);
  EXPECT_EQ(ch.session()["instructions"], "new");
}

TEST_F(RealtimeEventsTest, TurnDetectionNullAndServerVadFieldsApply) {
  auto ch = make();
  ch.on_open(0);
  event(ch,
        {{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", nullptr}}}}}}}});
  EXPECT_TRUE(ch.session()["audio"]["input"]["turn_detection"].is_null());
  event(ch,
        {{"type", "session.update"},
         {"session",
          {{"audio",
            {{"input", {{"turn_detection", {{"type", "server_vad"}, {"silence_duration_ms", 800}}}}}}}}}});
  EXPECT_EQ(ch.session()["audio"]["input"]["turn_detection"]["silence_duration_ms"], 800);
  EXPECT_EQ(ch.session()["audio"]["input"]["turn_detection"]["threshold"], 0.5);
  EXPECT_EQ(ch.stats().errors_sent, 0u);
}

struct Hostile {
  std::string message;
  bool binary;
  RealtimeDrop drop;
  json event_id;  // the offending event's id, when it can be read
};

TEST_F(RealtimeEventsTest, HostileMessagesGetOneErrorEachAreCountedAndTheChannelStaysUsable) {
  RealtimeEventChannel::Limits limits;
  limits.max_message_bytes = 1024;
  limits.max_json_depth = 8;
  auto ch = make(nullptr, limits);
  ch.on_open(0);
  const std::vector<Hostile> cases = {
      {R"({"type":"session.update")", false, RealtimeDrop::malformed_json, nullptr},
      {"\xff\xfe{}", false, RealtimeDrop::malformed_json, nullptr},
      {R"({"type":"response.create","x":"\xc3\x28"})", false, RealtimeDrop::malformed_json, nullptr},
      {R"({"type":"response.create"})", true, RealtimeDrop::binary_message, nullptr},
      {"[1,2,3]", false, RealtimeDrop::not_an_object, nullptr},
      {"\"response.create\"", false, RealtimeDrop::not_an_object, nullptr},
      {R"({"event_id":"e1"})", false, RealtimeDrop::missing_type, "e1"},
      {R"({"type":7,"event_id":"e2"})", false, RealtimeDrop::missing_type, "e2"},
      {R"({"type":"response.explode","event_id":"e3"})", false, RealtimeDrop::unknown_event, "e3"},
      {R"({"type":"session.created","event_id":"e4"})", false, RealtimeDrop::unknown_event, "e4"},
      {R"({"type":"session.update","event_id":"e5"})", false, RealtimeDrop::bad_session_update, "e5"},
      {R"({"type":"session.update","session":[],"event_id":"e6"})", false, RealtimeDrop::bad_session_update,
       "e6"},
      {std::string(9, '[') + std::string(9, ']'), false, RealtimeDrop::too_deep, nullptr},
      {R"({"type":"x","a":)" + std::string(20, '{') + "}", false, RealtimeDrop::too_deep, nullptr},
      {R"({"type":"response.create","pad":")" + std::string(1100, 'a') + "\"}", false,
       RealtimeDrop::too_large, nullptr},
      {"", false, RealtimeDrop::malformed_json, nullptr},
  };
  for (const Hostile& c : cases) {
    to_client.clear();
    to_backend.clear();
    const uint64_t before = ch.stats().dropped(c.drop);
    ch.on_client_message({reinterpret_cast<const uint8_t*>(c.message.data()), c.message.size()}, c.binary, 0);
    ASSERT_EQ(to_client.size(), 1u) << c.message.substr(0, 60);
    const json& e = to_client[0];
    EXPECT_EQ(e["type"], "error");
    EXPECT_TRUE(e["event_id"].is_string());
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    EXPECT_EQ(e["error"]["code"], realtime_drop_name(c.drop)) << c.message.substr(0, 60);
    EXPECT_TRUE(e["error"]["message"].is_string());
    EXPECT_EQ(e["error"]["event_id"], c.event_id) << c.message.substr(0, 60);
    EXPECT_EQ(ch.stats().dropped(c.drop), before + 1) << c.message.substr(0, 60);
    EXPECT_TRUE(to_backend.empty()) << "a dropped message reached the backend";
  }
  // Strings may hold brackets without counting as depth.
  to_backend.clear();
  text(ch, R"({"type":"conversation.item.create","item":{"type":"message","role":"user",)"
           R"("content":[{"type":"input_text","text":"[[[[[[[[[[{{{{{{{{{{ \" [[[["}]}})");
  EXPECT_EQ(to_backend.size(), 1u) << "still forwarding after the hostile messages";
  EXPECT_EQ(ch.stats().client_messages, cases.size() + 1);
}

TEST_F(RealtimeEventsTest, KnownClientEventsGoToTheBackendAsTheyAre) {
  auto ch = make();
  ch.on_open(0);
  to_client.clear();
  const std::vector<json> events = {
      {{"type", "conversation.item.create"},
       {"event_id", "c1"},
       {"item",
        {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}},
      {{"type", "response.create"}, {"response", {{"instructions", "x"}}}},
      {{"type", "input_audio_buffer.commit"}},
      {{"type", "input_audio_buffer.clear"}},
      {{"type", "conversation.item.retrieve"}, {"item_id", "item_1"}},
      {{"type", "conversation.item.truncate"},
       {"item_id", "item_1"},
       {"content_index", 0},
       {"audio_end_ms", 10}},
      {{"type", "conversation.item.delete"}, {"item_id", "item_1"}},
      {{"type", "transcription_session.update"}, {"session", json::object()}},
  };
  for (const json& e : events) event(ch, e);
  EXPECT_EQ(to_backend, events);
  EXPECT_TRUE(to_client.empty());
  EXPECT_EQ(clears, 0);
  EXPECT_EQ(ch.stats().client_events_forwarded, events.size());
}

TEST_F(RealtimeEventsTest, ClearStopsOutputAtOnceAndIsAcknowledgedWithTheResponseId) {
  auto ch = make();
  ch.on_open(0);
  ch.on_backend_event({{"type", "response.created"}, {"response", {{"id", "resp_42"}}}}, 0);
  ch.on_output_started(0);
  to_client.clear();
  event(ch, {{"type", "output_audio_buffer.clear"}, {"event_id", "c9"}});
  EXPECT_EQ(clears, 1);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0]["type"], "output_audio_buffer.cleared");
  EXPECT_EQ(to_client[0]["response_id"], "resp_42");
  ASSERT_EQ(to_backend.size(), 1u);
  EXPECT_EQ(to_backend[0]["type"], "output_audio_buffer.clear");
  EXPECT_FALSE(ch.output_playing());
  // The queue draining after the clear is not a second end of the output.
  ch.on_output_stopped(0);
  EXPECT_EQ(to_client.size(), 1u);
  expect_all_have_event_ids();
}

TEST_F(RealtimeEventsTest, InterruptIsCancelThenClearAndGetsOneCleared) {
  // RealtimeSession.interrupt(): response.cancel (a response is ongoing), then output_audio_buffer.clear.
  auto ch = make();
  ch.on_open(0);
  ch.on_backend_event({{"type", "response.created"}, {"response", {{"id", "resp_7"}}}}, 0);
  ch.on_output_started(0);
  to_client.clear();
  event(ch, {{"type", "response.cancel"}});
  EXPECT_EQ(clears, 1) << "cancel stops the audio at once";
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0]["type"], "output_audio_buffer.cleared");
  EXPECT_EQ(to_client[0]["response_id"], "resp_7");
  event(ch, {{"type", "output_audio_buffer.clear"}});
  EXPECT_EQ(clears, 2);
  EXPECT_EQ(to_client.size(), 1u) << "the clear right after is already acknowledged";
  ASSERT_EQ(to_backend.size(), 2u);
  EXPECT_EQ(to_backend[0]["type"], "response.cancel");
  EXPECT_EQ(to_backend[1]["type"], "output_audio_buffer.clear");

  // A clear with nothing playing is still acknowledged once.
  ch.on_output_started(0);
  ch.on_output_stopped(0);
  to_client.clear();
  event(ch, {{"type", "output_audio_buffer.clear"}});
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0]["type"], "output_audio_buffer.cleared");
  // A cancel with nothing playing clears but sends nothing (the backend answers with response.done).
  to_client.clear();
  event(ch, {{"type", "response.cancel"}});
  EXPECT_EQ(clears, 4);
  EXPECT_TRUE(to_client.empty());
}

TEST_F(RealtimeEventsTest, OutputStartedAndStoppedPairUp) {
  auto ch = make();
  ch.on_open(0);
  to_client.clear();
  ch.on_output_stopped(0);  // nothing started
  EXPECT_TRUE(to_client.empty());
  ch.on_output_started(0);
  ch.on_output_started(0);
  ASSERT_EQ(to_client.size(), 1u) << "started twice without a stop";
  EXPECT_EQ(to_client[0]["type"], "output_audio_buffer.started");
  const json generated = to_client[0]["response_id"];
  ASSERT_TRUE(generated.is_string()) << "no response.created seen: a generated id";
  EXPECT_EQ(generated.get<std::string>().rfind("resp_", 0), 0u);
  ch.on_output_stopped(0);
  ch.on_output_stopped(0);
  ASSERT_EQ(to_client.size(), 2u);
  EXPECT_EQ(to_client[1]["type"], "output_audio_buffer.stopped");
  EXPECT_EQ(to_client[1]["response_id"], generated);

  ch.on_backend_event({{"type", "response.created"}, {"event_id", "b1"}, {"response", {{"id", "resp_b"}}}},
                      0);
  ch.on_output_started(0);
  ch.on_output_stopped(0);
  ASSERT_EQ(to_client.size(), 5u);
  EXPECT_EQ(to_client[3]["response_id"], "resp_b");
  EXPECT_EQ(to_client[4]["response_id"], "resp_b");
  expect_all_have_event_ids();
}

TEST_F(RealtimeEventsTest, BackendEventsPassThroughWithAnEventIdAndBadOnesAreDropped) {
  auto ch = make();
  ch.on_open(0);
  to_client.clear();
  ch.on_backend_event(
      {{"type", "input_audio_buffer.speech_started"}, {"audio_start_ms", 100}, {"item_id", "i1"}}, 0);
  ch.on_backend_event({{"type", "response.done"}, {"event_id", "backend_own"}, {"response", json::object()}},
                      0);
  ch.on_backend_event({{"type", "error"}, {"event_id", 5}, {"error", {{"message", "backend says no"}}}}, 0);
  ch.on_backend_event(json::array({1, 2}), 0);
  ch.on_backend_event("text", 0);
  ch.on_backend_event({{"no_type", true}}, 0);
  ch.on_backend_event({{"type", nullptr}}, 0);
  ASSERT_EQ(to_client.size(), 3u);
  EXPECT_EQ(to_client[0]["type"], "input_audio_buffer.speech_started");
  EXPECT_EQ(to_client[0]["audio_start_ms"], 100);
  EXPECT_EQ(to_client[1]["event_id"], "backend_own");
  EXPECT_EQ(to_client[2]["type"], "error");
  EXPECT_EQ(to_client[2]["error"]["message"], "backend says no");
  expect_all_have_event_ids();
  EXPECT_EQ(ch.stats().dropped(RealtimeDrop::backend_not_an_object), 2u);
  EXPECT_EQ(ch.stats().dropped(RealtimeDrop::backend_missing_type), 2u);
  EXPECT_EQ(ch.stats().backend_events, 7u);
  EXPECT_EQ(ch.stats().backend_events_forwarded, 3u);
  // Strings that are not UTF-8 (a backend's bytes) are repaired, not thrown on.
  ch.on_backend_event({{"type", "response.output_text.delta"}, {"delta", std::string("\xff\xfe")}}, 0);
  EXPECT_EQ(to_client.size(), 4u);
}

TEST_F(RealtimeEventsTest, EventsBeforeOpenAreCountedNotSent) {
  auto ch = make();
  ch.on_backend_event({{"type", "response.created"}, {"response", {{"id", "resp_early"}}}}, 0);
  ch.on_output_started(0);
  EXPECT_TRUE(to_client.empty());
  EXPECT_EQ(ch.stats().dropped(RealtimeDrop::not_open), 2u);
  ch.on_open(0);
  ASSERT_EQ(to_client.size(), 2u);
  EXPECT_EQ(to_client[0]["type"], "session.created");
  EXPECT_EQ(to_client[1]["type"], "output_audio_buffer.started") << "the output already playing is announced";
  EXPECT_EQ(to_client[1]["response_id"], "resp_early") << "the response seen before open still counts";
  ch.on_output_stopped(0);
  ASSERT_EQ(to_client.size(), 3u);
  EXPECT_EQ(to_client[2]["type"], "output_audio_buffer.stopped");
  EXPECT_EQ(to_client[2]["response_id"], "resp_early");
}

TEST_F(RealtimeEventsTest, EventIdsDifferAcrossChannels) {
  auto a = make();
  auto b = make();
  a.on_open(0);
  b.on_open(0);
  ASSERT_EQ(to_client.size(), 2u);
  EXPECT_NE(to_client[0]["event_id"], to_client[1]["event_id"]);
  EXPECT_NE(to_client[0]["session"]["id"], to_client[1]["session"]["id"]);
}

TEST(RealtimeVocabulary, NamesAndTypes) {
  EXPECT_EQ(realtime_drop_name(RealtimeDrop::too_large), "too_large");
  EXPECT_EQ(realtime_drop_name(static_cast<RealtimeDrop>(999)), "unknown");
  EXPECT_EQ(realtime_client_event_type(RealtimeClientEvent::output_audio_buffer_clear),
            "output_audio_buffer.clear");
  EXPECT_FALSE(realtime_drop_message(RealtimeDrop::unknown_event).empty());
}

}  // namespace
}  // namespace rtce
