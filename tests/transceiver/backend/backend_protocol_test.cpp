// backend_protocol_test.cpp — the socket-free protocol helpers: URLs, frame sizes, the
// events the transceiver writes and the classification of what a backend sends.
#include "backend_protocol.h"

#include <gtest/gtest.h>

namespace rtce {
namespace {

TEST(BackendUrl, ParsesHostPortPathAndAppendsTheSession) {
  BackendUrl url = parse_backend_url("ws://127.0.0.1:8765/agent", "abc");
  EXPECT_EQ(url.error, "");
  EXPECT_EQ(url.host, "127.0.0.1");
  EXPECT_EQ(url.port, "8765");
  EXPECT_EQ(url.target, "/agent?session=abc");
}

TEST(BackendUrl, DefaultsAndQueries) {
  EXPECT_EQ(parse_backend_url("ws://backend", "a").target, "/?session=a");
  EXPECT_EQ(parse_backend_url("ws://backend", "a").port, "80");
  EXPECT_EQ(parse_backend_url("ws://backend?k=v", "a").target, "/?k=v&session=a");
  EXPECT_EQ(parse_backend_url("ws://backend/p?", "a").target, "/p?session=a");
  EXPECT_EQ(parse_backend_url("ws://backend/p?k=v#frag", "a").target, "/p?k=v&session=a");
  EXPECT_EQ(parse_backend_url("ws://h/", "a b/&").target, "/?session=a%20b%2F%26");
  BackendUrl v6 = parse_backend_url("ws://[::1]:9000/x", "a");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, "9000");
}

TEST(BackendUrl, WssDefaultsToPort443AndSaysTls) {
  BackendUrl url = parse_backend_url("wss://api.example/v1/realtime?model=m", "a");
  EXPECT_EQ(url.error, "");
  EXPECT_TRUE(url.tls);
  EXPECT_EQ(url.host, "api.example");
  EXPECT_EQ(url.port, "443");
  EXPECT_EQ(url.target, "/v1/realtime?model=m&session=a");
  EXPECT_EQ(parse_backend_url("wss://[::1]:8443", "a").port, "8443");
  EXPECT_FALSE(parse_backend_url("ws://h/", "a").tls);
}

TEST(BackendUrl, RejectsWhatItCannotUse) {
  for (const char* bad : {"http://h/", "ws://", "ws://:80/", "ws://h:0/", "ws://h:65536/", "ws://h:x/",
                          "ws://[::1/", "ws://[::1]x/", "ws://u:p@h/", "", "wss://", "wss:/h/", "WSS://h/"}) {
    BackendUrl url = parse_backend_url(bad, "a");
    EXPECT_FALSE(url.error.empty()) << bad;
    EXPECT_TRUE(url.host.empty()) << bad;
  }
}

TEST(BackendFrames, TwentyMillisecondFrameSizes) {
  EXPECT_EQ(pcm_frame_bytes(16000), 640u);
  EXPECT_EQ(pcm_frame_bytes(48000), 1920u);
  EXPECT_EQ(pcm_frame_bytes(8000), 320u);
  EXPECT_EQ(pcm_frame_bytes(44100), 1764u);
  EXPECT_EQ(pcm_frame_bytes(11025), 0u);
  EXPECT_EQ(pcm_frame_bytes(96000), 0u);
  EXPECT_EQ(pcm_frame_bytes(0), 0u);
  EXPECT_EQ(pcm_frames_in_message(1920, 640), 3u);
  EXPECT_EQ(pcm_frames_in_message(640, 640), 1u);
  EXPECT_EQ(pcm_frames_in_message(0, 640), 0u);
  EXPECT_EQ(pcm_frames_in_message(641, 640), 0u);
  EXPECT_EQ(pcm_frames_in_message(320, 640), 0u);
  EXPECT_EQ(pcm_frames_in_message(640, 0), 0u);
}

TEST(BackendEvents, SessionStartedAndEnded) {
  BackendSessionInfo info;
  info.session_id = "id";
  info.sample_rate = 48000;
  info.opus_passthrough = true;
  info.user_agent = "bad \xff utf8";
  auto started = session_started_event(info);
  EXPECT_EQ(started["encoding"], "opus");
  EXPECT_EQ(started["metadata"], nlohmann::json::object());
  // A client's User-Agent is untrusted text: dumping must not throw on invalid UTF-8.
  EXPECT_NO_THROW((void)started.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  EXPECT_EQ(session_ended_event("bye"), (nlohmann::json{{"type", "session.ended"}, {"reason", "bye"}}));
  EXPECT_FALSE(started.contains("session")) << "no session config, no field";
}

TEST(BackendEvents, SessionStartedCarriesTheSessionConfig) {
  BackendSessionInfo info;
  info.session_config = {{"instructions", "be brief"}, {"voice", "alloy"}};
  EXPECT_EQ(session_started_event(info)["session"], info.session_config);
}

TEST(BackendDialects, NamesRoundTrip) {
  EXPECT_EQ(backend_dialect_name(BackendDialect::rtcedge), "rtcedge");
  EXPECT_EQ(backend_dialect_name(BackendDialect::realtime), "realtime");
  EXPECT_EQ(backend_dialect_from_name("realtime"), BackendDialect::realtime);
  EXPECT_EQ(backend_dialect_from_name("rtcedge"), BackendDialect::rtcedge);
  EXPECT_EQ(backend_dialect_from_name("Realtime"), std::nullopt);
}

TEST(BackendText, ClassifiesBackendEvents) {
  EXPECT_EQ(parse_backend_text(R"({"type":"clear"})").kind, BackendTextKind::clear);
  BackendText end = parse_backend_text(R"({"type":"session.end","reason":"done"})");
  EXPECT_EQ(end.kind, BackendTextKind::session_end);
  EXPECT_EQ(end.reason, "done");
  EXPECT_EQ(parse_backend_text(R"({"type":"session.end","reason":7})").reason, "");
  BackendText mark = parse_backend_text(R"({"type":"mark","name":"m1"})");
  EXPECT_EQ(mark.kind, BackendTextKind::event);
  EXPECT_EQ(mark.event["name"], "m1");
  for (const char* bad :
       {"", "null", "[]", "{}", R"({"type":""})", R"({"type":3})", "{\"type\":\"x\"", "\xff"}) {
    EXPECT_EQ(parse_backend_text(bad).kind, BackendTextKind::invalid) << bad;
  }
}

}  // namespace
}  // namespace rtce
