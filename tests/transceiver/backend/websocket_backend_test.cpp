// websocket_backend_test.cpp — the WebSocket backend against a real Beast server in this
// process (test_ws_server.h): the session.started handshake, byte-exact audio both ways,
// 20 ms splitting, events, a stalled backend, failed and hanging connects, and teardown
// with operations pending (this binary is built with ASan and UBSan).
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>

#include "backend.h"
#include "test_support.h"
#include "test_ws_server.h"

namespace rtce::testing {
namespace {

using namespace std::chrono_literals;
using tcp = boost::asio::ip::tcp;

BackendSessionInfo session_info(int sample_rate = 16000) {
  BackendSessionInfo info;
  info.session_id = "s/1";
  info.sample_rate = sample_rate;
  info.client_address = "198.18.0.7:50000";
  info.path = "relay";
  info.user_agent = "TestAgent/1.0";
  info.metadata = {{"room", "blue"}, {"lang", "en"}};
  return info;
}

class WebSocketBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<BackendConnection> connect(const TestWsServer& server,
                                             BackendSessionInfo info = session_info()) {
    config.url = server.url();
    return make_websocket_backend(io, config, std::move(info), listener, counters);
  }

  // Connected = the server accepted the upgrade and received session.started.
  void wait_connected(const TestWsServer& server) {
    ASSERT_TRUE(run_until(io, [&] { return server.message_count() >= 1; })) << "no session.started";
  }

  boost::asio::io_context io;
  WebSocketBackendConfig config;
  RecordingListener listener;
  BackendCounters counters;
};

TEST_F(WebSocketBackendTest, SessionStartedCarriesTheSessionAndHeaders) {
  TestWsServer server;
  config.headers = {{"Authorization", "Bearer secret"}};
  auto backend = connect(server);
  wait_connected(server);

  EXPECT_EQ(server.request_target(), "/backend?session=s%2F1");
  EXPECT_EQ(server.request_header("Authorization"), "Bearer secret");
  ReceivedMessage first = server.messages().at(0);
  ASSERT_TRUE(first.text);
  auto started = nlohmann::json::parse(first.data);
  EXPECT_EQ(started["type"], "session.started");
  EXPECT_EQ(started["session_id"], "s/1");
  EXPECT_EQ(started["sample_rate"], 16000);
  EXPECT_EQ(started["encoding"], "pcm_s16le");
  EXPECT_EQ(started["frame_ms"], 20);
  EXPECT_EQ(started["client"]["address"], "198.18.0.7:50000");
  EXPECT_EQ(started["client"]["user_agent"], "TestAgent/1.0");
  EXPECT_EQ(started["path"], "relay");
  EXPECT_EQ(started["metadata"], (nlohmann::json{{"room", "blue"}, {"lang", "en"}}));
  EXPECT_TRUE(listener.closed.empty());
}

TEST_F(WebSocketBackendTest, AudioFramesArriveByteExactInOrder) {
  TestWsServer server;
  auto backend = connect(server);
  // The first frames are queued while connecting; the rest go out on the open socket.
  for (int i = 0; i < 3; ++i) backend->send_audio(numbered_frame(16000, i));
  wait_connected(server);
  for (int i = 3; i < 10; ++i) backend->send_audio(numbered_frame(16000, i));
  backend->send_event({{"type", "session.quality"}, {"rtt_ms", 42}});

  // The server may read the last frame before the client has seen its write complete.
  // Events overtake queued audio, so count what arrived by kind rather than in total.
  auto binary_count = [&] {
    auto all = server.messages();
    return std::count_if(all.begin(), all.end(), [](const ReceivedMessage& m) { return !m.text; });
  };
  auto has_quality = [&] {
    auto all = server.messages();
    return std::any_of(all.begin(), all.end(), [](const ReceivedMessage& m) {
      return m.text && nlohmann::json::parse(m.data)["type"] == "session.quality";
    });
  };
  ASSERT_TRUE(run_until(
      io, [&] { return binary_count() >= 10 && has_quality() && counters.frames_sent.get() >= 10; }));
  auto messages = server.messages();
  int audio = 0;
  for (const auto& message : messages) {
    if (message.text) continue;
    ASSERT_EQ(message.data.size(), 640u);
    EXPECT_EQ(message.data, frame_bytes(numbered_frame(16000, audio))) << "frame " << audio;
    ++audio;
  }
  EXPECT_EQ(audio, 10);
  EXPECT_TRUE(std::any_of(messages.begin(), messages.end(), [](const ReceivedMessage& m) {
    return m.text && nlohmann::json::parse(m.data)["type"] == "session.quality";
  }));
  EXPECT_EQ(counters.frames_sent.get(), 10u);
  EXPECT_EQ(counters.frames_dropped_outbound.get(), 0u);
}

TEST_F(WebSocketBackendTest, BackendAudioIsSplitIntoTwentyMillisecondFrames) {
  TestWsServer server;
  auto backend = connect(server, session_info(48000));
  wait_connected(server);

  server.send_binary(frame_bytes(numbered_frame(48000, 0)) + frame_bytes(numbered_frame(48000, 1)) +
                     frame_bytes(numbered_frame(48000, 2)));
  server.send_binary(std::string(100, 'x'));  // not a whole frame: counted and dropped
  server.send_binary(frame_bytes(numbered_frame(48000, 3)));
  ASSERT_TRUE(run_until(io, [&] { return listener.audio.size() >= 4; }));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(listener.audio[i], numbered_frame(48000, i)) << "frame " << i;
  EXPECT_EQ(counters.protocol_errors.get(), 1u);
  EXPECT_EQ(counters.frames_received.get(), 4u);
  EXPECT_TRUE(listener.closed.empty());
}

TEST_F(WebSocketBackendTest, ClearAndEventsReachTheListenerAndGarbageIsCounted) {
  TestWsServer server;
  auto backend = connect(server);
  wait_connected(server);

  server.send_text(R"({"type":"clear"})");
  server.send_text("not json");
  server.send_text(R"({"no":"type"})");
  server.send_text(R"({"type":"event","name":"transcript","text":"hello"})");
  ASSERT_TRUE(run_until(io, [&] { return listener.events.size() >= 1; }));
  EXPECT_EQ(listener.clears, 1);
  EXPECT_EQ(listener.events[0]["text"], "hello");
  EXPECT_EQ(counters.protocol_errors.get(), 2u);
  EXPECT_TRUE(listener.closed.empty());
}

TEST_F(WebSocketBackendTest, SessionEndReportsTheBackendReasonAndCloseSaysGoodbye) {
  TestWsServer server;
  auto backend = connect(server);
  wait_connected(server);

  server.send_text(R"({"type":"session.end","reason":"user said bye"})");
  ASSERT_TRUE(run_until(io, [&] { return !listener.closed.empty(); }));
  EXPECT_EQ(listener.closed, std::vector<std::string>{"session_end: user said bye"});

  backend->close("hangup");
  ASSERT_TRUE(run_until(io, [&] { return server.peer_closed(); }));
  auto last = server.messages().back();
  ASSERT_TRUE(last.text);
  EXPECT_EQ(nlohmann::json::parse(last.data),
            (nlohmann::json{{"type", "session.ended"}, {"reason", "hangup"}}));
  EXPECT_EQ(listener.closed.size(), 1u);
}

TEST_F(WebSocketBackendTest, BackendCloseIsReportedWithItsCode) {
  TestWsServer server;
  auto backend = connect(server);
  wait_connected(server);

  server.close(1011, "model crashed");
  ASSERT_TRUE(run_until(io, [&] { return !listener.closed.empty(); }));
  EXPECT_EQ(listener.closed[0], "backend_closed: 1011 model crashed");
  EXPECT_EQ(counters.connect_failures.get(), 0u);
}

TEST_F(WebSocketBackendTest, NoListenerCallsAfterCloseReturns) {
  TestWsServer server;
  auto backend = connect(server);
  wait_connected(server);
  for (int i = 0; i < 50; ++i) server.send_binary(frame_bytes(numbered_frame(16000, i)));
  ASSERT_TRUE(run_until(io, [&] { return !listener.audio.empty(); }));

  backend->close("done");
  size_t frames_at_close = listener.audio.size();
  ASSERT_TRUE(run_until(io, [&] { return server.peer_closed(); }));
  EXPECT_EQ(listener.audio.size(), frames_at_close);
  EXPECT_TRUE(listener.closed.empty());
  auto messages = server.messages();
  EXPECT_EQ(nlohmann::json::parse(messages.back().data)["type"], "session.ended");
}

TEST_F(WebSocketBackendTest, StalledBackendNeverBlocksTheSenderAndDropsTheOldest) {
  TestWsServer server(TestWsServer::Mode::stalled);
  config.max_queued_frames = 50;
  auto backend = connect(server, session_info(48000));
  ASSERT_TRUE(run_until(io, [&] { return server.accepted_upgrades() == 1; }));

  // 40 MB: far beyond every socket buffer between the two ends.
  constexpr uint64_t kFrames = 20000;
  auto frame = numbered_frame(48000, 1);
  auto slowest = std::chrono::nanoseconds::zero();
  for (uint64_t i = 0; i < kFrames; ++i) {
    auto before = std::chrono::steady_clock::now();
    backend->send_audio(frame);
    slowest = std::max(slowest, std::chrono::steady_clock::now() - before);
    io.poll();
    if (io.stopped()) io.restart();
  }
  uint64_t sent = counters.frames_sent.get();
  uint64_t dropped = counters.frames_dropped_outbound.get();
  EXPECT_GT(dropped, 0u);
  EXPECT_LT(sent, kFrames);
  // What is neither sent nor dropped is queued: at most the ring plus the one frame in flight.
  EXPECT_LE(kFrames - sent - dropped, config.max_queued_frames + 1);
  EXPECT_LT(slowest, 50ms) << "send_audio must not block";
  EXPECT_TRUE(listener.closed.empty()) << "a slow backend is not a failed one";
}

TEST_F(WebSocketBackendTest, ConnectToAClosedPortFailsWithinTheTimeout) {
  uint16_t port;
  {
    tcp::acceptor probe(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    port = probe.local_endpoint().port();
  }
  config.url = "ws://127.0.0.1:" + std::to_string(port) + "/";
  config.connect_timeout = 1'000'000'000;
  auto backend = make_websocket_backend(io, config, session_info(), listener, counters);
  backend->send_audio(numbered_frame(16000, 0));  // queued, then dropped with the connection
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(run_until(
      io, [&] { return !listener.closed.empty(); }, 2000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms);
  EXPECT_TRUE(listener.closed[0].starts_with("connect_failed: ")) << listener.closed[0];
  EXPECT_EQ(counters.connect_failures.get(), 1u);
  backend->send_audio(numbered_frame(16000, 1));  // after the failure: counted, no crash
  run_for(io, 20ms);
  EXPECT_EQ(listener.closed.size(), 1u);
}

TEST_F(WebSocketBackendTest, UnansweredUpgradeTimesOutAtTheConnectDeadline) {
  // The kernel completes the TCP handshake into the backlog; nobody ever accepts or answers.
  tcp::acceptor silent(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  config.url = "ws://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/";
  config.connect_timeout = 300'000'000;
  auto start = std::chrono::steady_clock::now();
  auto backend = make_websocket_backend(io, config, session_info(), listener, counters);
  ASSERT_TRUE(run_until(
      io, [&] { return !listener.closed.empty(); }, 2000ms));
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(listener.closed[0], "connect_timeout");
  EXPECT_GE(elapsed, 300ms);
  EXPECT_LT(elapsed, 1000ms);
  EXPECT_EQ(counters.connect_failures.get(), 1u);
}

TEST_F(WebSocketBackendTest, QueryInTheUrlIsKeptInFrontOfTheSessionParameter) {
  TestWsServer server;
  config.url = server.url() + "?x=1";
  auto backend = make_websocket_backend(io, config, session_info(), listener, counters);
  wait_connected(server);
  EXPECT_EQ(server.request_target(), "/backend?x=1&session=s%2F1");
}

TEST_F(WebSocketBackendTest, UpgradeDeclinedByAPlainHttpServerFailsTheConnect) {
  // An HTTP server that answers every request with 404.
  tcp::acceptor http(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket peer(io);
  boost::asio::streambuf request;
  const std::string response = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
  http.async_accept(peer, [&](boost::system::error_code ec) {
    ASSERT_FALSE(ec);
    boost::asio::async_read_until(peer, request, "\r\n\r\n", [&](boost::system::error_code ec, size_t) {
      ASSERT_FALSE(ec);
      boost::asio::async_write(peer, boost::asio::buffer(response), [](boost::system::error_code, size_t) {});
    });
  });
  config.url = "ws://127.0.0.1:" + std::to_string(http.local_endpoint().port()) + "/";
  auto backend = make_websocket_backend(io, config, session_info(), listener, counters);
  ASSERT_TRUE(run_until(io, [&] { return !listener.closed.empty(); }));
  EXPECT_EQ(listener.closed[0], "connect_failed: upgrade declined (HTTP 404)");
  EXPECT_EQ(counters.connect_failures.get(), 1u);
}

TEST_F(WebSocketBackendTest, InvalidUrlIsReportedAfterTheFactoryReturns) {
  config.url = "http://backend.example/";
  auto backend = make_websocket_backend(io, config, session_info(), listener, counters);
  EXPECT_TRUE(listener.closed.empty()) << "no listener call from inside the factory";
  ASSERT_TRUE(run_until(io, [&] { return !listener.closed.empty(); }));
  EXPECT_TRUE(listener.closed[0].starts_with("invalid_url: backend URL must start with ws:// or wss://"))
      << listener.closed[0];
}

TEST_F(WebSocketBackendTest, OversizedBackendMessageFailsTheConnection) {
  TestWsServer server;
  config.max_message_bytes = 1024;
  auto backend = connect(server);
  wait_connected(server);
  server.send_binary(std::string(6400, '\0'));
  ASSERT_TRUE(run_until(io, [&] { return !listener.closed.empty(); }));
  EXPECT_TRUE(listener.closed[0].starts_with("protocol_error: ")) << listener.closed[0];
  EXPECT_EQ(counters.protocol_errors.get(), 1u);
}

TEST_F(WebSocketBackendTest, OpusPassthroughCarriesPacketsUnchanged) {
  TestWsServer server;
  auto info = session_info(48000);
  info.opus_passthrough = true;
  auto backend = connect(server, info);
  wait_connected(server);
  EXPECT_EQ(nlohmann::json::parse(server.messages()[0].data)["encoding"], "opus");

  std::vector<uint8_t> packet{0x78, 0x01, 0x02, 0x03, 0xff};
  backend->send_opus(packet);
  ASSERT_TRUE(run_until(io, [&] { return server.message_count() >= 2; }));
  EXPECT_EQ(server.messages()[1].data, std::string(packet.begin(), packet.end()));

  server.send_binary(std::string("\x78\x0a\x0b", 3));
  ASSERT_TRUE(run_until(io, [&] { return !listener.opus.empty(); }));
  EXPECT_EQ(listener.opus[0], (std::vector<uint8_t>{0x78, 0x0a, 0x0b}));
}

TEST_F(WebSocketBackendTest, DestroyingWhileConnectingIsSafe) {
  tcp::acceptor silent(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  config.url = "ws://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/";
  auto backend = make_websocket_backend(io, config, session_info(), listener, counters);
  backend->send_audio(numbered_frame(16000, 0));
  io.poll();
  backend.reset();
  io.restart();
  io.run_for(1s);  // returns as soon as the cancelled operations have completed
  EXPECT_TRUE(io.stopped()) << "operations outlived the connection";
  EXPECT_TRUE(listener.closed.empty());
}

TEST_F(WebSocketBackendTest, DestroyingWithAWriteStuckOnAStalledBackendIsSafe) {
  TestWsServer server(TestWsServer::Mode::stalled);
  config.connect_timeout = 300'000'000;  // also bounds the goodbye
  auto backend = connect(server, session_info(48000));
  ASSERT_TRUE(run_until(io, [&] { return server.accepted_upgrades() == 1; }));
  auto frame = numbered_frame(48000, 1);
  for (int i = 0; i < 20000 && counters.frames_dropped_outbound.get() == 0; ++i) {
    backend->send_audio(frame);
    io.poll();
    if (io.stopped()) io.restart();
  }
  ASSERT_GT(counters.frames_dropped_outbound.get(), 0u) << "the backend never stalled";
  backend.reset();
  io.restart();
  io.run_for(2s);
  EXPECT_TRUE(io.stopped()) << "the close deadline did not end the stuck write";
  EXPECT_TRUE(listener.closed.empty());
}

TEST_F(WebSocketBackendTest, TheListenerMayDestroyTheConnectionFromItsCallbacks) {
  TestWsServer server;
  std::unique_ptr<BackendConnection> backend = connect(server);
  wait_connected(server);

  listener.on_audio = [&] { backend.reset(); };
  server.send_binary(frame_bytes(numbered_frame(16000, 0)) + frame_bytes(numbered_frame(16000, 1)));
  ASSERT_TRUE(run_until(io, [&] { return !listener.audio.empty(); }));
  ASSERT_TRUE(run_until(io, [&] { return server.peer_closed(); }));
  EXPECT_EQ(listener.audio.size(), 1u) << "the second frame of the message went to a dead session";

  // And from on_backend_closed, the usual way a session ends.
  TestWsServer second;
  listener.on_audio = nullptr;
  listener.on_closed = [&] { backend.reset(); };
  backend = connect(second);
  wait_connected(second);
  second.close(1000, "bye");
  ASSERT_TRUE(run_until(io, [&] { return backend == nullptr; }));
  io.run_for(500ms);
  EXPECT_TRUE(io.stopped());
}

}  // namespace
}  // namespace rtce::testing
