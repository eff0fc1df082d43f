// tls_realtime_backend_test.cpp — the WebSocket client against real servers in Python
// (test_backend_server.py): wss:// verified against a CA the test generates with openssl,
// refused (connect_failed: tls, counted) with the system store, a wrong host name or an
// unreadable CA file; and the realtime dialect end to end against a small Realtime-protocol
// echo server, over ws:// and wss://. Plus the dialect's goodbye and binary refusal against
// the in-process server. Fails, with the reason, without python3-websockets or openssl (install-deps.sh
// installs both).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "backend.h"
#include "child_server.h"
#include "test_support.h"
#include "test_ws_server.h"

extern char** environ;

namespace rtce::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kOpenssl = "/usr/bin/openssl";

// A CA and a server certificate it signed, valid for IP 127.0.0.1 only.
struct TestPki {
  std::filesystem::path dir;
  std::string ca, cert, key, error;

  TestPki() {
    char tmpl[] = "/tmp/rtce-tls-XXXXXX";
    if (!mkdtemp(tmpl)) {
      error = "mkdtemp failed";
      return;
    }
    dir = tmpl;
    ca = dir / "ca.pem";
    cert = dir / "server.pem";
    key = dir / "server.key";
    std::ofstream(dir / "ext.cnf") << "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                                      "extendedKeyUsage=serverAuth\n";
    const std::string d = dir.string();
    const std::string o = std::string(kOpenssl);
    const std::string commands =
        o +
        " req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=rtcedge-test-ca" +
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -keyout " +
        d + "/ca.key -out " + ca + " && " + o + " req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes" +
        " -subj /CN=127.0.0.1 -keyout " + key + " -out " + d + "/server.csr && " + o + " x509 -req -in " + d +
        "/server.csr -CA " + ca + " -CAkey " + d + "/ca.key -CAcreateserial -days 2 -extfile " + d +
        "/ext.cnf -out " + cert + " >" + d + "/openssl.log 2>&1";
    if (std::system(("(" + commands + ") >" + d + "/openssl.log 2>&1").c_str()) != 0)
      error = "openssl failed; see " + d + "/openssl.log";
  }
  ~TestPki() {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
};

std::string server_script() {
  return std::string(RTCE_SOURCE_DIR) + "/tests/transceiver/backend/test_backend_server.py";
}

bool have_python_websockets() {
  std::string probe = std::string(kPython) + " -c 'import websockets' >/dev/null 2>&1";
  return access(kPython, X_OK) == 0 && std::system(probe.c_str()) == 0;
}

std::vector<int16_t> tone_frame(int rate, double hz, int index) {
  const size_t n = static_cast<size_t>(rate / 50);
  std::vector<int16_t> frame(n);
  for (size_t i = 0; i < n; ++i) {
    double t = static_cast<double>(static_cast<size_t>(index) * n + i) / rate;
    frame[i] = static_cast<int16_t>(std::lround(8000 * std::sin(2 * std::numbers::pi * hz * t)));
  }
  return frame;
}

double rising_crossings_hz(const std::vector<int16_t>& pcm, int rate, size_t skip) {
  size_t first = 0, last = 0, crossings = 0;
  for (size_t i = skip + 1; i < pcm.size(); ++i) {
    if (pcm[i - 1] < 0 && pcm[i] >= 0) {
      if (crossings++ == 0) first = i;
      last = i;
    }
  }
  return crossings < 2 ? 0 : static_cast<double>(crossings - 1) * rate / static_cast<double>(last - first);
}

class BackendServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_python_websockets())
        << kPython << " with python3-websockets is needed (scripts/install-deps.sh)";
    ASSERT_EQ(access(kOpenssl, X_OK), 0) << kOpenssl << " is needed (scripts/install-deps.sh)";
    ASSERT_TRUE(pki.error.empty()) << pki.error;
  }

  void start_server(const std::string& dialect, bool tls) {
    std::vector<std::string> args = {kPython, server_script(), "--dialect", dialect};
    if (tls) args.insert(args.end(), {"--cert", pki.cert, "--key", pki.key});
    std::string error;
    ASSERT_TRUE(server.start(args, &error)) << error;
  }

  std::unique_ptr<BackendConnection> connect(BackendSessionInfo info = {}) {
    if (info.session_id.empty()) info.session_id = "tls-1";
    return make_websocket_backend(io, config, std::move(info), listener, counters);
  }

  void expect_tls_refusal(const char* what) {
    ASSERT_TRUE(run_until(
        io, [&] { return !listener.closed.empty(); }, 5000ms))
        << what;
    EXPECT_TRUE(listener.closed[0].starts_with("connect_failed: tls")) << what << ": " << listener.closed[0];
    EXPECT_EQ(counters.connect_failures.get(), 1u) << what;
    EXPECT_TRUE(listener.audio.empty());
  }

  TestPki pki;
  ChildServer server;
  boost::asio::io_context io;
  WebSocketBackendConfig config;
  RecordingListener listener;
  BackendCounters counters;
};

TEST_F(BackendServerTest, WssIsVerifiedAgainstTheConfiguredCa) {
  start_server("rtcedge", true);
  ASSERT_TRUE(server.url().starts_with("wss://"));
  config.url = server.url();
  config.ca_file = pki.ca;
  auto backend = connect();
  for (int i = 0; i < 5; ++i) backend->send_audio(numbered_frame(16000, i));
  ASSERT_TRUE(run_until(
      io, [&] { return listener.audio.size() >= 5 || !listener.closed.empty(); }, 5000ms));
  ASSERT_TRUE(listener.closed.empty()) << listener.closed[0];
  for (int i = 0; i < 5; ++i) EXPECT_EQ(listener.audio[i], numbered_frame(16000, i)) << "frame " << i;
  EXPECT_EQ(counters.connect_failures.get(), 0u);

  backend->close("test over");
  backend.reset();
  io.restart();
  io.run_for(3s);
  EXPECT_TRUE(io.stopped()) << "the TLS goodbye did not finish within the close bound";
}

TEST_F(BackendServerTest, WssIsRefusedWithTheSystemStoreOnly) {
  start_server("rtcedge", true);
  config.url = server.url();
  auto backend = connect();
  expect_tls_refusal("system store");
  EXPECT_NE(listener.closed[0].find("certificate"), std::string::npos) << listener.closed[0];
}

TEST_F(BackendServerTest, WssIsRefusedForAWrongName) {
  start_server("rtcedge", true);
  // The certificate names IP 127.0.0.1; "localhost" reaches the same socket but not that name.
  config.url = "wss://localhost:" + server.port() + "/";
  config.ca_file = pki.ca;
  auto backend = connect();
  expect_tls_refusal("wrong name");
  EXPECT_NE(listener.closed[0].find("does not name localhost"), std::string::npos) << listener.closed[0];
}

TEST_F(BackendServerTest, WssWithAnUnreadableCaFileFailsTheConnect) {
  start_server("rtcedge", true);
  config.url = server.url();
  config.ca_file = (pki.dir / "missing.pem").string();
  auto backend = connect();
  EXPECT_TRUE(listener.closed.empty()) << "no listener call from inside the factory";
  expect_tls_refusal("missing CA file");
  EXPECT_NE(listener.closed[0].find("ca_file " + config.ca_file + ": No such file"), std::string::npos)
      << listener.closed[0];
}

class RealtimeDialectServerTest : public BackendServerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RealtimeDialectServerTest, EchoServerRoundTrip) {
  const bool tls = GetParam();
  start_server("realtime", tls);
  config.url = server.url();
  config.ca_file = tls ? pki.ca : "";
  config.dialect = BackendDialect::realtime;
  config.headers = {{"Authorization", "Bearer sk-test"}, {"OpenAI-Beta", "realtime=v1"}};
  BackendSessionInfo info;
  info.sample_rate = 16000;
  info.session_config = {{"instructions", "be brief"}};
  auto backend = connect(info);

  constexpr int kFrames = 50;
  for (int i = 0; i < kFrames; ++i) backend->send_audio(tone_frame(16000, 1000, i));
  ASSERT_TRUE(run_until(
      io, [&] { return listener.audio.size() >= kFrames - 1 || !listener.closed.empty(); }, 8000ms))
      << "echoed " << listener.audio.size() << " frames";
  ASSERT_TRUE(listener.closed.empty()) << listener.closed[0];
  std::vector<int16_t> echoed;
  for (const auto& frame : listener.audio) {
    ASSERT_EQ(frame.size(), 320u);
    echoed.insert(echoed.end(), frame.begin(), frame.end());
  }
  EXPECT_NEAR(rising_crossings_hz(echoed, 16000, 400), 1000, 5) << "the tone came back at its pitch";

  backend->send_event({{"type", "test.report"}});
  auto report = [&]() -> const nlohmann::json* {
    for (const auto& event : listener.events)
      if (event["type"] == "test.report") return &event;
    return nullptr;
  };
  ASSERT_TRUE(run_until(
      io, [&] { return report() != nullptr; }, 5000ms));
  const nlohmann::json& seen = *report();
  EXPECT_EQ(seen["first"], "session.update");
  EXPECT_EQ(seen["first_session"]["instructions"], "be brief");
  EXPECT_EQ(seen["first_session"]["audio"]["input"]["format"]["rate"], 24000);
  EXPECT_EQ(seen["appends"], kFrames);
  EXPECT_EQ(seen["bytes"], kFrames * 960) << "20 ms at 24 kHz per append";
  EXPECT_EQ(seen["bad_appends"], 0);
  EXPECT_EQ(seen["authorization"], "Bearer sk-test");
  EXPECT_TRUE(std::any_of(listener.events.begin(), listener.events.end(),
                          [](const nlohmann::json& e) { return e["type"] == "session.updated"; }));
  for (const auto& event : listener.events) EXPECT_NE(event["type"], "response.output_audio.delta");

  backend->send_event({{"type", "test.barge_in"}});
  ASSERT_TRUE(run_until(
      io, [&] { return listener.clears == 1; }, 5000ms));
  ASSERT_TRUE(run_until(io, [&] {
    return std::any_of(listener.events.begin(), listener.events.end(), [](const nlohmann::json& e) {
      return e["type"] == "input_audio_buffer.speech_started";
    });
  }));
  // Server errors are events like any other.
  backend->send_event({{"type", "no.such.event"}, {"event_id", "c7"}});
  ASSERT_TRUE(run_until(io, [&] {
    return std::any_of(listener.events.begin(), listener.events.end(), [](const nlohmann::json& e) {
      return e["type"] == "error" && e["error"]["event_id"] == "c7";
    });
  }));
  EXPECT_EQ(counters.protocol_errors.get(), 0u);

  backend->close("test over");
  backend.reset();
  io.restart();
  io.run_for(3s);
  EXPECT_TRUE(io.stopped()) << "the goodbye did not finish";
}

INSTANTIATE_TEST_SUITE_P(WsAndWss, RealtimeDialectServerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "wss" : "ws"; });

// Against the in-process server: what the dialect does not send, and what it refuses.
// The realtime dialect against the in-process server (or `url`): one client per test.
class RealtimeDialectBackend : public ::testing::Test {
 protected:
  std::unique_ptr<BackendConnection> connect(const char* id, int sample_rate, bool opus_passthrough = false,
                                             std::string url = {}) {
    WebSocketBackendConfig config;
    config.url = url.empty() ? server.url() : std::move(url);
    config.dialect = BackendDialect::realtime;
    BackendSessionInfo info;
    info.session_id = id;
    info.sample_rate = sample_rate;
    info.opus_passthrough = opus_passthrough;
    return make_websocket_backend(io, config, info, listener, counters);
  }

  boost::asio::io_context io;
  TestWsServer server;
  RecordingListener listener;
  BackendCounters counters;
};

TEST_F(RealtimeDialectBackend, ClosesWithoutSessionEndedAndCountsBinaryFrames) {
  auto backend = connect("rt", 48000);
  backend->send_event({{"type", "session.quality"}, {"rtt_ms", 40}});  // rtcedge-only: not sent
  backend->send_audio(numbered_frame(48000, 1));
  ASSERT_TRUE(run_until(io, [&] { return server.message_count() >= 2; }));
  auto messages = server.messages();
  ASSERT_TRUE(messages[0].text);
  EXPECT_EQ(nlohmann::json::parse(messages[0].data)["type"], "session.update");
  ASSERT_TRUE(messages[1].text) << "audio goes in JSON text frames";
  EXPECT_EQ(nlohmann::json::parse(messages[1].data)["type"], "input_audio_buffer.append");

  server.send_binary(std::string(960, '\0'));
  server.send_text(R"({"type":"response.output_audio.delta","delta":"AA=="})");
  ASSERT_TRUE(run_until(io, [&] { return counters.protocol_errors.get() == 2; }));
  EXPECT_TRUE(listener.closed.empty()) << "bad messages are dropped, not fatal";

  backend->close("bye");
  ASSERT_TRUE(run_until(io, [&] { return server.peer_closed(); }));
  for (const auto& message : server.messages())
    EXPECT_FALSE(message.text && nlohmann::json::parse(message.data)["type"] == "session.ended");
  EXPECT_TRUE(listener.closed.empty()) << "no listener call after close()";
}

std::string delta_of(const std::vector<int16_t>& pcm) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* bytes = reinterpret_cast<const uint8_t*>(pcm.data());
  const size_t n = pcm.size() * 2;
  std::string b64;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = uint32_t{bytes[i]} << 16 | (i + 1 < n ? uint32_t{bytes[i + 1]} << 8 : 0) |
                 (i + 2 < n ? bytes[i + 2] : 0);
    b64 += kAlphabet[v >> 18];
    b64 += kAlphabet[(v >> 12) & 63];
    b64 += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    b64 += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return R"({"type":"response.output_audio.delta","event_id":"e","delta":")" + b64 + "\"}";
}

// A server that sends seconds of audio at once has every whole frame handed over at once,
// sample for sample: the session's one playout queue paces it (transceiver/call). A
// barge-in is passed on as clear; discard_output() drops the partial frame held back; the
// client's output_audio_buffer.clear never reaches the server.
TEST_F(RealtimeDialectBackend, AudioSentAheadIsHandedOverWholeAndABargeInDropsThePartialFrame) {
  auto backend = connect("ahead", 24000);  // no resampling: frames are checked sample for sample
  ASSERT_TRUE(run_until(io, [&] { return server.message_count() >= 1; }));

  std::vector<int16_t> three_seconds(72000);
  for (size_t i = 0; i < three_seconds.size(); ++i) three_seconds[i] = static_cast<int16_t>(i % 30000);
  server.send_text(delta_of(three_seconds));
  ASSERT_TRUE(run_until(io, [&] { return listener.audio.size() >= 150; })) << listener.audio.size();
  EXPECT_LT(listener.audio_times[149] - listener.audio_times[0], 500ms) << "held back instead of handed over";
  for (size_t f = 0; f < 150; ++f) {
    ASSERT_EQ(listener.audio[f].size(), 480u);
    ASSERT_TRUE(
        std::equal(listener.audio[f].begin(), listener.audio[f].end(), three_seconds.begin() + f * 480))
        << "frame " << f;
  }
  EXPECT_EQ(counters.frames_received.get(), 150u);

  server.send_text(R"({"type":"input_audio_buffer.speech_started","event_id":"e2","audio_start_ms":10})");
  ASSERT_TRUE(run_until(io, [&] { return listener.clears == 1; }));
  ASSERT_FALSE(listener.events.empty());
  EXPECT_EQ(listener.events.back()["type"], "input_audio_buffer.speech_started");

  // One and a half frames: one is handed over, half of one is held for the next delta...
  server.send_text(delta_of(std::vector<int16_t>(720, 7)));
  ASSERT_TRUE(run_until(io, [&] { return listener.audio.size() == 151; }));
  // ...until the session clears its output: then the next half frame completes nothing.
  backend->discard_output();
  backend->send_event({{"type", "output_audio_buffer.clear"}, {"event_id", "c1"}});
  backend->send_event({{"type", "response.cancel"}, {"event_id", "c2"}});
  server.send_text(delta_of(std::vector<int16_t>(240, 9)));
  // An event after the delta on the same socket: once it arrived, so had the delta.
  server.send_text(R"({"type":"response.done","event_id":"e3","response":{}})");
  ASSERT_TRUE(run_until(
      io, [&] { return !listener.events.empty() && listener.events.back()["type"] == "response.done"; }));
  EXPECT_EQ(listener.audio.size(), 151u) << "the discarded half frame completed a frame";
  ASSERT_TRUE(run_until(io, [&] {
    for (const auto& m : server.messages())
      if (m.text && nlohmann::json::parse(m.data)["type"] == "response.cancel") return true;
    return false;
  }));
  for (const auto& m : server.messages())
    EXPECT_FALSE(m.text && nlohmann::json::parse(m.data)["type"] == "output_audio_buffer.clear")
        << "the client's playout is the edge's, not the server's";
  backend->close("bye");
}

TEST_F(RealtimeDialectBackend, OpusPassthroughIsRefused) {
  auto backend = connect("rt", 16000, /*opus_passthrough=*/true, "ws://127.0.0.1:9/");
  ASSERT_TRUE(run_until(io, [&] { return !listener.closed.empty(); }));
  EXPECT_TRUE(listener.closed[0].starts_with("invalid_session: Opus passthrough")) << listener.closed[0];
}

}  // namespace
}  // namespace rtce::testing
