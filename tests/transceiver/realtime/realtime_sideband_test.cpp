// realtime_sideband_test.cpp — the app server's side of a Realtime call's event layer: its
// sidebands hear every server event and act as the browser would, the fields they set are
// theirs, the data-channel policy restricts the browser (and only it), a sideband that comes
// back hears what it missed, and a tool call its gone sideband cannot answer ends with an
// error to the backend after the timeout. Manual clock, no sockets.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "realtime_events.h"

namespace rtce {
namespace {

using json = nlohmann::json;
constexpr Nanos kSecond = 1'000'000'000;

class RealtimeSidebandTest : public ::testing::Test {
 protected:
  RealtimeEventChannel make(json initial = nullptr, RealtimeEventChannel::Limits limits = {}) {
    RealtimeEventChannel::Callbacks cb;
    cb.send_to_client = [this](std::string_view text) { to_browser.push_back(json::parse(text)); };
    cb.send_to_backend = [this](const json& event) { to_backend.push_back(event); };
    cb.clear_output = [this] { ++clears; };
    cb.send_to_sideband = [this](EventSource s, std::string_view text) {
      to_sideband[s].push_back(json::parse(text));
    };
    return RealtimeEventChannel(std::move(initial), limits, std::move(cb));
  }
  static void browser(RealtimeEventChannel& ch, const json& e, Nanos now = 0) {
    const std::string text = e.dump();
    ch.on_client_message({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, false, now);
  }
  static void sideband(RealtimeEventChannel& ch, EventSource s, const json& e, Nanos now = 0) {
    ch.on_sideband_message(s, e.dump(), now);
  }
  static std::vector<std::string> types(const std::vector<json>& events) {
    std::vector<std::string> out;
    for (const json& e : events) out.push_back(e.value("type", ""));
    return out;
  }

  std::vector<json> to_browser;
  std::vector<json> to_backend;
  std::map<EventSource, std::vector<json>> to_sideband;
  int clears = 0;
};

const json kFunctionCallDone = {{"type", "response.function_call_arguments.done"},
                                {"call_id", "call_1"},
                                {"name", "get_weather"},
                                {"arguments", "{}"}};

TEST_F(RealtimeSidebandTest, ASidebandHearsSessionCreatedThenEveryServerEventTheBrowserHears) {
  auto ch = make();
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  ASSERT_EQ(to_sideband[1].size(), 1u);
  EXPECT_EQ(to_sideband[1][0]["type"], "session.created");
  EXPECT_EQ(to_sideband[1][0]["session"]["id"], to_browser[0]["session"]["id"]) << "the same session";
  ch.on_backend_event({{"type", "response.created"}, {"response", {{"id", "resp_1"}}}}, 0);
  ch.on_output_started(0);
  ASSERT_EQ(to_sideband[1].size(), 3u);
  ASSERT_EQ(to_browser.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(to_sideband[1][i]["event_id"], to_browser[i]["event_id"]) << "one event, one id, both clients";
    EXPECT_EQ(to_sideband[1][i]["type"], to_browser[i]["type"]);
  }
  EXPECT_FALSE(ch.attach_sideband(1, 0)) << "an id is attached once";
  EXPECT_FALSE(ch.attach_sideband(kFromBrowser, 0));
}

TEST_F(RealtimeSidebandTest, ASidebandHearsEventsEvenWithNoBrowserChannel) {
  auto ch = make();
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  ch.on_backend_event({{"type", "response.done"}}, 0);
  EXPECT_EQ(types(to_sideband[1]), (std::vector<std::string>{"session.created", "response.done"}));
  EXPECT_TRUE(to_browser.empty());
}

TEST_F(RealtimeSidebandTest, SidebandEventsActAsTheBrowsersAndItsMistakesAreItsOwn) {
  auto ch = make();
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  ASSERT_TRUE(ch.attach_sideband(2, 0));
  const json output = {
      {"type", "conversation.item.create"},
      {"item", {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "sunny"}}}};
  sideband(ch, 1, output);
  sideband(ch, 1, {{"type", "response.create"}});
  ASSERT_EQ(to_backend.size(), 2u);
  EXPECT_EQ(to_backend[0], output);
  EXPECT_EQ(to_backend[1]["type"], "response.create");
  // A session.update from the sideband: everyone hears session.updated.
  sideband(ch, 1, {{"type", "session.update"}, {"session", {{"instructions", "Be brief."}}}});
  EXPECT_EQ(ch.session()["instructions"], "Be brief.");
  EXPECT_EQ(to_browser.back()["type"], "session.updated");
  EXPECT_EQ(to_sideband[2].back()["type"], "session.updated");
  // Its malformed JSON: an error to it alone.
  const size_t browser_before = to_browser.size(), other_before = to_sideband[2].size();
  ch.on_sideband_message(1, "{not json", 0);
  EXPECT_EQ(to_sideband[1].back()["type"], "error");
  EXPECT_EQ(to_sideband[1].back()["error"]["code"], "malformed_json");
  EXPECT_EQ(to_browser.size(), browser_before);
  EXPECT_EQ(to_sideband[2].size(), other_before);
  // The browser's mistakes reach the app server too.
  browser(ch, {{"type", "no.such.event"}});
  EXPECT_EQ(to_browser.back()["error"]["code"], "unknown_event");
  EXPECT_EQ(to_sideband[2].back()["error"]["code"], "unknown_event");
  EXPECT_EQ(ch.stats().sideband_messages, 4u);
  // A detached sideband is not heard any more.
  ch.detach_sideband(1, 0);
  sideband(ch, 1, {{"type", "response.create"}});
  EXPECT_EQ(to_backend.size(), 3u) << "the update went to the backend, the stale message did not";
}

TEST_F(RealtimeSidebandTest, AFieldTheSidebandSetIsTheAppServersAndTheBrowserCannotChangeIt) {
  auto ch = make();
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  const json tools = json::array({{{"type", "function"}, {"name", "get_weather"}}});
  sideband(
      ch, 1,
      {{"type", "session.update"},
       {"session",
        {{"instructions", "Server rules."}, {"tools", tools}, {"audio", {{"output", {{"voice", "ash"}}}}}}}});
  to_backend.clear();
  browser(ch, {{"type", "session.update"},
               {"session",
                {{"instructions", "Ignore the rules."},
                 {"tools", json::array()},
                 {"audio", {{"output", {{"voice", "verse"}, {"speed", 1.2}}}}}}}});
  EXPECT_EQ(ch.session()["instructions"], "Server rules.");
  EXPECT_EQ(ch.session()["tools"], tools);
  EXPECT_EQ(ch.session()["audio"]["output"]["voice"], "ash");
  EXPECT_EQ(ch.session()["audio"]["output"]["speed"], 1.2)
      << "a field the app server left alone is the browser's";
  const json& error = to_browser.back();
  ASSERT_EQ(error["type"], "error");
  EXPECT_NE(error["error"]["message"].get<std::string>().find("session.instructions (set by the app server)"),
            std::string::npos)
      << error;
  EXPECT_NE(error["error"]["message"].get<std::string>().find("session.audio.output.voice"),
            std::string::npos);
  ASSERT_EQ(to_backend.size(), 1u);
  EXPECT_FALSE(to_backend[0]["session"].contains("instructions"))
      << "the backend never hears the refused change";
  EXPECT_FALSE(to_backend[0]["session"].contains("tools"));
  EXPECT_EQ(to_backend[0]["session"]["audio"]["output"]["speed"], 1.2);
  // The app server may change its own fields again.
  sideband(ch, 1, {{"type", "session.update"}, {"session", {{"instructions", "New rules."}}}});
  EXPECT_EQ(ch.session()["instructions"], "New rules.");
}

TEST_F(RealtimeSidebandTest, OnlyTheAppServerSetsThePolicyAndTheBackendNeverHearsIt) {
  const json policy = {{"data_channel", {{"allowed_client_events", {"input_audio_buffer.clear"}}}}};
  auto ch = make();
  ch.on_open(0);
  browser(ch, {{"type", "session.update"}, {"session", {{"client", policy}}}});
  EXPECT_FALSE(ch.policy().allowed_client_events) << "the browser cannot restrict or free itself";
  EXPECT_NE(to_browser.back()["error"]["message"].get<std::string>().find(
                "session.client (set by the app server only)"),
            std::string::npos);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  to_backend.clear();
  sideband(ch, 1, {{"type", "session.update"}, {"session", {{"client", policy}, {"instructions", "x"}}}});
  ASSERT_TRUE(ch.policy().allowed_client_events);
  EXPECT_TRUE(ch.policy().allows_client(RealtimeClientEvent::input_audio_buffer_clear));
  EXPECT_FALSE(ch.policy().allows_client(RealtimeClientEvent::response_create));
  ASSERT_EQ(to_backend.size(), 1u);
  EXPECT_FALSE(to_backend[0]["session"].contains("client"));
  EXPECT_EQ(to_backend[0]["session"]["instructions"], "x");
  // A list naming something that is not a client event is refused whole.
  sideband(ch, 1,
           {{"type", "session.update"},
            {"session",
             {{"client", {{"data_channel", {{"allowed_client_events", {"response.create", "hack"}}}}}}}}});
  EXPECT_EQ(to_sideband[1].back()["type"], "error");
  EXPECT_FALSE(ch.policy().allows_client(RealtimeClientEvent::response_create)) << "the old list stays";
  // null lifts it.
  sideband(ch, 1,
           {{"type", "session.update"},
            {"session", {{"client", {{"data_channel", {{"allowed_client_events", nullptr}}}}}}}});
  EXPECT_FALSE(ch.policy().allowed_client_events);
}

TEST_F(RealtimeSidebandTest, ThePolicyRefusesAndWithholdsForTheBrowserOnly) {
  const json initial = {{"client",
                         {{"data_channel",
                           {{"allowed_client_events", {"response.cancel", "session.update"}},
                            {"allowed_server_events", {"output_audio_buffer.started", "response.done"}}}}}}};
  auto ch = make(initial);
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  ASSERT_EQ(types(to_browser), (std::vector<std::string>{"session.created"}))
      << "the handshake always passes";
  EXPECT_FALSE(to_browser[0]["session"]["client"].is_null()) << "the browser can read what it may do";
  // A client event off the list: an error to the browser, counted, not forwarded.
  browser(ch, {{"type", "conversation.item.create"}, {"event_id", "ev_1"}, {"item", {{"type", "message"}}}});
  EXPECT_TRUE(to_backend.empty());
  EXPECT_EQ(to_browser.back()["error"]["code"], "client_event_not_allowed");
  EXPECT_EQ(to_browser.back()["error"]["event_id"], "ev_1");
  EXPECT_EQ(ch.stats().dropped(RealtimeDrop::client_event_not_allowed), 1u);
  // The same event from the sideband goes through.
  sideband(ch, 1, {{"type", "conversation.item.create"}, {"item", {{"type", "message"}}}});
  EXPECT_EQ(to_backend.size(), 1u);
  // On the list: forwarded.
  browser(ch, {{"type", "response.cancel"}});
  EXPECT_EQ(to_backend.size(), 2u);
  // Server events off the list are withheld from the browser and counted; the sideband hears them.
  to_browser.clear();
  ch.on_backend_event({{"type", "response.output_text.delta"}, {"delta", "secret"}}, 0);
  ch.on_backend_event({{"type", "response.done"}}, 0);
  EXPECT_EQ(types(to_browser), (std::vector<std::string>{"response.done"}));
  EXPECT_EQ(ch.stats().dropped(RealtimeDrop::server_event_withheld), 1u);
  EXPECT_EQ(to_sideband[1][to_sideband[1].size() - 2]["type"], "response.output_text.delta");
  // The answer to the browser's own session.update reaches it although not on the list.
  browser(ch, {{"type", "session.update"}, {"session", {{"output_modalities", {"text"}}}}});
  EXPECT_EQ(to_browser.back()["type"], "session.updated");
}

TEST_F(RealtimeSidebandTest, ASidebandThatComesBackHearsWhatItMissedWithTheOriginalIds) {
  RealtimeEventChannel::Limits limits;
  limits.max_missed_events = 2;
  auto ch = make(nullptr, limits);
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  ch.detach_sideband(1, kSecond);
  for (int i = 0; i < 3; ++i)
    ch.on_backend_event({{"type", "response.output_text.delta"}, {"delta", std::to_string(i)}}, 0);
  ASSERT_TRUE(ch.attach_sideband(2, 2 * kSecond));
  const auto& heard = to_sideband[2];
  ASSERT_EQ(types(heard),
            (std::vector<std::string>{"session.created", "rtcedge.sideband.missed",
                                      "response.output_text.delta", "response.output_text.delta"}));
  EXPECT_EQ(heard[1]["missed_events"], 3);
  EXPECT_EQ(heard[1]["replayed_events"], 2);
  EXPECT_EQ(heard[1]["lost_events"], 1);
  EXPECT_EQ(heard[2]["delta"], "1") << "the newest are kept";
  EXPECT_EQ(heard[3]["event_id"], to_browser.back()["event_id"]);
  EXPECT_EQ(ch.stats().missed_events, 3u);
  // Another sideband joining while one is attached missed nothing.
  ASSERT_TRUE(ch.attach_sideband(3, 3 * kSecond));
  EXPECT_EQ(types(to_sideband[3]), (std::vector<std::string>{"session.created"}));
}

TEST_F(RealtimeSidebandTest, WhatAClosingSocketCouldNotDeliverIsKeptBeforeTheGapsEventsInOrder) {
  auto ch = make();
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  ch.on_backend_event({{"type", "response.output_text.delta"}, {"delta", "a"}},
                      0);  // in flight when it closed
  ch.on_backend_event({{"type", "response.output_text.delta"}, {"delta", "b"}}, 0);
  ch.detach_sideband(1, kSecond);
  ch.on_backend_event({{"type", "response.output_text.delta"}, {"delta", "c"}}, 0);  // after the detach
  // The socket gives back what it could not send, in the order it got it.
  ch.on_sideband_undelivered(1, to_sideband[1][1].dump());
  ch.on_sideband_undelivered(1, to_sideband[1][2].dump());
  ASSERT_TRUE(ch.attach_sideband(2, 2 * kSecond));
  const auto& heard = to_sideband[2];
  ASSERT_EQ(heard.size(), 5u);
  EXPECT_EQ(heard[1]["missed_events"], 3);
  EXPECT_EQ(heard[2]["delta"], "a");
  EXPECT_EQ(heard[3]["delta"], "b");
  EXPECT_EQ(heard[4]["delta"], "c");
  // Given back while a sideband is attached: it heard it already; nothing is kept.
  ch.on_sideband_undelivered(1, to_sideband[1][1].dump());
  EXPECT_EQ(ch.stats().dropped(RealtimeDrop::sideband_undelivered), 1u);
}

TEST_F(RealtimeSidebandTest, ABrowserThatMayNotSeeToolCallsSeesNoneOfThemInsideOtherEvents) {
  const json initial = {{"client",
                         {{"data_channel",
                           {{"allowed_server_events",
                             {"response.done", "conversation.item.added", "response.output_item.done",
                              "response.output_text.done"}}}}}}};
  auto ch = make(initial);
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  const json call = {
      {"type", "function_call"}, {"call_id", "call_1"}, {"name", "get_weather"}, {"arguments", "{}"}};
  const json text = {{"type", "message"}, {"role", "assistant"}};
  to_browser.clear();
  ch.on_backend_event({{"type", "conversation.item.added"}, {"item", call}}, 0);
  ch.on_backend_event({{"type", "response.output_item.done"}, {"item", call}}, 0);
  ch.on_backend_event({{"type", "response.done"}, {"response", {{"id", "r1"}, {"output", {call, text}}}}}, 0);
  ch.on_backend_event({{"type", "conversation.item.added"}, {"item", text}}, 0);
  ASSERT_EQ(types(to_browser), (std::vector<std::string>{"response.done", "conversation.item.added"}));
  EXPECT_EQ(to_browser[0]["response"]["output"], json::array({text}))
      << "the call is cut out of the response";
  EXPECT_EQ(to_browser[0]["event_id"], to_sideband[1][3]["event_id"]);
  EXPECT_EQ(to_sideband[1][3]["response"]["output"].size(), 2u) << "the app server hears it whole";
  EXPECT_EQ(ch.stats().dropped(RealtimeDrop::server_event_withheld), 2u);
  EXPECT_EQ(to_browser[0].dump().find("call_1"), std::string::npos);
}

TEST_F(RealtimeSidebandTest, TheSessionTypeIsNobodysField) {
  auto ch = make();
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  sideband(ch, 1, {{"type", "session.update"}, {"session", {{"type", "realtime"}, {"instructions", "x"}}}});
  to_browser.clear();
  browser(ch,
          {{"type", "session.update"}, {"session", {{"type", "realtime"}, {"output_modalities", {"text"}}}}});
  EXPECT_EQ(types(to_browser), (std::vector<std::string>{"session.updated"})) << "no error for session.type";
}

TEST_F(RealtimeSidebandTest, AToolCallLeftToAGoneSidebandEndsWithAnErrorToTheBackendAfterTheTimeout) {
  RealtimeEventChannel::Limits limits;
  limits.tool_timeout = 10 * kSecond;
  auto ch = make(nullptr, limits);
  ch.on_open(0);
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  ch.on_backend_event(kFunctionCallDone, 1 * kSecond);
  EXPECT_EQ(ch.next_deadline(), std::numeric_limits<Nanos>::max()) << "an attached sideband takes its time";
  ch.detach_sideband(1, 4 * kSecond);
  ASSERT_EQ(ch.next_deadline(), 14 * kSecond);
  ch.on_deadline(14 * kSecond - 1);
  EXPECT_TRUE(to_backend.empty());
  ch.on_deadline(14 * kSecond);
  ASSERT_EQ(to_backend.size(), 2u);
  EXPECT_EQ(to_backend[0]["type"], "conversation.item.create");
  EXPECT_EQ(to_backend[0]["item"]["type"], "function_call_output");
  EXPECT_EQ(to_backend[0]["item"]["call_id"], "call_1");
  EXPECT_EQ(json::parse(to_backend[0]["item"]["output"].get<std::string>())["error"], "tool_call_timed_out");
  EXPECT_EQ(to_backend[1]["type"], "response.create");
  EXPECT_EQ(ch.stats().tool_calls_timed_out, 1u);
  EXPECT_EQ(ch.next_deadline(), std::numeric_limits<Nanos>::max());
}

TEST_F(RealtimeSidebandTest, AnsweredToolCallsAndBrowserOnlyCallsNeverTimeOut) {
  auto ch = make();
  ch.on_open(0);
  // No sideband ever: the browser answers its own tools.
  ch.on_backend_event(kFunctionCallDone, 0);
  EXPECT_EQ(ch.next_deadline(), std::numeric_limits<Nanos>::max());
  // The sideband answers, then goes: nothing is left waiting.
  ASSERT_TRUE(ch.attach_sideband(1, 0));
  sideband(ch, 1,
           {{"type", "conversation.item.create"},
            {"item", {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "ok"}}}});
  ch.detach_sideband(1, kSecond);
  EXPECT_EQ(ch.next_deadline(), std::numeric_limits<Nanos>::max());
  // The GA stream names a call twice (arguments.done, output_item.done): one pending call.
  ch.on_backend_event(
      {{"type", "response.output_item.done"}, {"item", {{"type", "function_call"}, {"call_id", "call_2"}}}},
      2 * kSecond);
  ch.on_backend_event({{"type", "response.function_call_arguments.done"}, {"call_id", "call_2"}},
                      2 * kSecond);
  ch.on_deadline(std::numeric_limits<Nanos>::max() / 2);
  EXPECT_EQ(ch.stats().tool_calls_timed_out, 1u);
}

TEST_F(RealtimeSidebandTest,
       ACallWithoutAClientOfItsOwnTimesToolCallsFromTheStartAndKeepsWhatTheFirstSidebandMissed) {
  RealtimeEventChannel::Limits limits;
  limits.tool_timeout = 10 * kSecond;
  limits.sidebands_only = true;  // a phone call: no browser channel ever opens
  auto ch = make(nullptr, limits);
  ch.on_backend_event(kFunctionCallDone, 1 * kSecond);
  ASSERT_EQ(ch.next_deadline(), 11 * kSecond) << "nobody else would answer it";
  ch.on_deadline(11 * kSecond);
  ASSERT_EQ(to_backend.size(), 2u);
  EXPECT_EQ(json::parse(to_backend[0]["item"]["output"].get<std::string>())["error"], "tool_call_timed_out");
  // The app server's first sideband hears what happened before it came.
  ASSERT_TRUE(ch.attach_sideband(1, 12 * kSecond));
  const auto heard = types(to_sideband[1]);
  ASSERT_GE(heard.size(), 3u);
  EXPECT_EQ(heard[0], "session.created");
  EXPECT_EQ(heard[1], "rtcedge.sideband.missed");
  EXPECT_EQ(heard[2], "response.function_call_arguments.done");
}

TEST_F(RealtimeSidebandTest, SidebandsAreBoundedAndHearTheCallEnd) {
  RealtimeEventChannel::Limits limits;
  limits.max_sidebands = 2;
  auto ch = make(nullptr, limits);
  EXPECT_TRUE(ch.attach_sideband(1, 0));
  EXPECT_TRUE(ch.attach_sideband(2, 0));
  EXPECT_FALSE(ch.attach_sideband(3, 0));
  ch.on_call_ended("deleted", 0);
  EXPECT_EQ(to_sideband[1].back()["type"], "rtcedge.call.ended");
  EXPECT_EQ(to_sideband[1].back()["reason"], "deleted");
  EXPECT_EQ(to_sideband[2].back()["type"], "rtcedge.call.ended");
  EXPECT_EQ(to_sideband.count(3), 0u);
}

}  // namespace
}  // namespace rtce
