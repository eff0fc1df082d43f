// http_server_test.cpp — the HTTP vocabulary helpers (media types, auth schemes) and the
// server's limits over real loopback sockets: 414 and 431, and the connection cap closing
// the idlest connection; parse_http_request, the same reading without a socket (the fuzzer's
// entry), refusing what the server refuses and marking WebSocket upgrades; WebSockets over
// loopback with Beast's client: an accept answered from another thread, a refusal, the close
// codes of each ending, the WebSocket cap, and an open WebSocket outside the connection cap.
#include "http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace rtce {
namespace {

TEST(HttpMediaType, TypeAndSubtypeAreCaseInsensitiveWithParameters) {
  for (const char* header : {"application/sdp", "APPLICATION/SDP", "Application/Sdp; charset=utf-8",
                             "  application/sdp ;a=b ", "application/sdp\t"})
    EXPECT_TRUE(media_type_is(header, "application/sdp")) << header;
}

TEST(HttpMediaType, AnythingElseAfterTheSubtypeIsAnotherType) {
  for (const char* header : {"application/sdpXYZ", "application/sdp-x", "application/sdp/x",
                             "application/sdp x", "application/sd", "text/sdp", ""})
    EXPECT_FALSE(media_type_is(header, "application/sdp")) << header;
}

TEST(HttpParseRequest, ReadsTheRequestAHandlerSeesAndWhereTheNextOneStarts) {
  const std::string first =
      "POST /v1/sessions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/sdp\r\nContent-Length: "
      "3\r\n\r\nv=0";
  const std::string bytes = first + "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n";
  auto r = parse_http_request(bytes, HttpServer::Limits{});
  ASSERT_TRUE(r.request);
  EXPECT_FALSE(r.refusal);
  EXPECT_EQ(r.request->method, "POST");
  EXPECT_EQ(r.request->path, "/v1/sessions");
  EXPECT_EQ(r.request->query, "x=1");
  EXPECT_EQ(r.request->header("content-type"), "application/sdp");
  EXPECT_EQ(r.request->body, "v=0");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.consumed, first.size());
  auto next = parse_http_request(std::string_view(bytes).substr(r.consumed), HttpServer::Limits{});
  ASSERT_TRUE(next.request);
  EXPECT_EQ(next.request->path, "/healthz");
}

TEST(HttpParseRequest, RefusesWhatTheServerRefuses) {
  HttpServer::Limits limits;
  limits.max_body_bytes = 8;
  limits.max_header_bytes = 256;
  limits.max_target_bytes = 64;
  auto status = [&](const std::string& bytes) {
    auto r = parse_http_request(bytes, limits);
    EXPECT_FALSE(r.request);
    return r.refusal ? r.refusal->status : 0u;
  };
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\n123456789"), 413u);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n"), 431u);
  EXPECT_EQ(status("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n"), 414u);
  EXPECT_EQ(status("GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n"), 414u);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nBad Header\r\n\r\n"), 400u);
  // Cut short: neither a request nor a refusal; the server would wait for more.
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n12"), 0u);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nHost"), 0u);
}

TEST(HttpParseRequest, WebSocketUpgradeIsSetOnlyForAGetAskingForOne) {
  const std::string upgrade_fields =
      "Host: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  auto upgrade = parse_http_request("GET /v1/realtime?call_id=c1 HTTP/1.1\r\n" + upgrade_fields + "\r\n",
                                    HttpServer::Limits{});
  ASSERT_TRUE(upgrade.request);
  EXPECT_TRUE(upgrade.request->websocket_upgrade);
  auto plain =
      parse_http_request("GET /v1/realtime?call_id=c1 HTTP/1.1\r\nHost: h\r\n\r\n", HttpServer::Limits{});
  ASSERT_TRUE(plain.request);
  EXPECT_FALSE(plain.request->websocket_upgrade);
  auto post = parse_http_request(
      "POST /v1/realtime HTTP/1.1\r\n" + upgrade_fields + "Content-Length: 0\r\n\r\n", HttpServer::Limits{});
  ASSERT_TRUE(post.request);
  EXPECT_FALSE(post.request->websocket_upgrade);
}

TEST(HttpAuthorization, SchemeIsCaseInsensitiveThenSpaceThenCredentials) {
  EXPECT_EQ(credentials_for_scheme("Bearer abc", "Bearer"), "abc");
  EXPECT_EQ(credentials_for_scheme("bearer abc", "Bearer"), "abc");
  EXPECT_EQ(credentials_for_scheme("BEARER   abc ", "Bearer"), "abc");
  EXPECT_FALSE(credentials_for_scheme("Bearerabc", "Bearer"));
  EXPECT_FALSE(credentials_for_scheme("Bearer", "Bearer"));
  EXPECT_FALSE(credentials_for_scheme("Bearer   ", "Bearer"));
  EXPECT_FALSE(credentials_for_scheme("Basic abc", "Bearer"));
  EXPECT_FALSE(credentials_for_scheme("Bearerx abc", "Bearer"));
}

int connect_loopback(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// Reads until the peer closes or `timeout_ms` passes; returns what arrived.
std::string read_until_closed(int fd, int timeout_ms) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return out;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out + (n == 0 ? "<closed>" : "<error>");
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string round_trip(uint16_t port, const std::string& request) {
  int fd = connect_loopback(port);
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string reply = read_until_closed(fd, 5000);
  close(fd);
  return reply;
}

class HttpServerLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServer::Limits limits;
    limits.max_header_bytes = 4096;
    limits.max_target_bytes = 1024;
    limits.max_connections = 3;
    server_ = std::make_unique<HttpServer>(
        *SocketAddress::parse("127.0.0.1:0"), limits,
        [](const HttpRequest&, HttpServer::Responder respond) { respond(HttpResponse::text(200, "ok")); });
    server_->start();
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerLimits, LongTargetIs414AndLargeHeaderIs431) {
  const uint16_t port = server_->port();
  EXPECT_TRUE(round_trip(port, "GET /" + std::string(2000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n")
                  .starts_with("HTTP/1.1 414 "));
  EXPECT_TRUE(round_trip(port, "GET /" + std::string(8000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n")
                  .starts_with("HTTP/1.1 414 "));
  EXPECT_TRUE(round_trip(port, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8000, 'b') + "\r\n\r\n")
                  .starts_with("HTTP/1.1 431 "));
  EXPECT_TRUE(round_trip(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                  .starts_with("HTTP/1.1 200 "));
}

TEST_F(HttpServerLimits, AtTheCapANewConnectionClosesTheIdlest) {
  const uint16_t port = server_->port();
  int idle[3];
  for (int& fd : idle) {
    fd = connect_loopback(port);
    // Accepted in order: wait until the server counts it, so "idlest" is well defined.
    const size_t expected = static_cast<size_t>(&fd - idle) + 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (server_->stats().connections_open.load() < expected && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // between checks of a deadline-bounded wait
    ASSERT_EQ(server_->stats().connections_open.load(), expected);
  }
  EXPECT_TRUE(round_trip(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                  .starts_with("HTTP/1.1 200 "));
  EXPECT_EQ(read_until_closed(idle[0], 5000), "<closed>");  // the oldest idle one made room
  EXPECT_EQ(read_until_closed(idle[1], 200), "");           // the others stay open
  EXPECT_GE(server_->stats().evicted_at_cap.load(), 1u);
  for (int fd : idle) close(fd);
}

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

constexpr auto kWait = std::chrono::seconds(3);  // a deadline, far above what any step takes

// Waits up to kWait for `done` (checked between waits) while holding no lock.
bool wait_until(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // between checks of a deadline-bounded wait
  }
  return true;
}

// What the server thread reported through WebSocketHandlers; read from the test thread.
class WsEvents {
 public:
  void opened(std::shared_ptr<WebSocketConnection> c) {
    std::lock_guard lock(mutex_);
    connection_ = std::move(c);
    ++opens_;
    changed_.notify_all();
  }
  void text(std::string t) {
    std::lock_guard lock(mutex_);
    texts_.push_back(std::move(t));
    changed_.notify_all();
  }
  void closed(uint16_t code, std::string_view reason) {
    std::lock_guard lock(mutex_);
    closes_.emplace_back(code, std::string(reason));
    changed_.notify_all();
  }
  std::shared_ptr<WebSocketConnection> connection() {
    std::lock_guard lock(mutex_);
    return connection_;
  }
  // The connection on_open handed over, once it did (nullptr past the deadline).
  std::shared_ptr<WebSocketConnection> wait_open() {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, kWait, [&] { return connection_ != nullptr; });
    return connection_;
  }
  // The first on_closed, once it came.
  std::optional<std::pair<uint16_t, std::string>> wait_closed() {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, kWait, [&] { return !closes_.empty(); })) return std::nullopt;
    return closes_.front();
  }
  int opens() {
    std::lock_guard lock(mutex_);
    return opens_;
  }
  size_t closes() {
    std::lock_guard lock(mutex_);
    return closes_.size();
  }
  std::vector<std::string> texts() {
    std::lock_guard lock(mutex_);
    return texts_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::shared_ptr<WebSocketConnection> connection_;
  int opens_ = 0;
  std::vector<std::string> texts_;
  std::vector<std::pair<uint16_t, std::string>> closes_;
};

// Beast's WebSocket client on the test thread: each step runs the client's own io_context
// until the step ends, and fails the test past kWait.
class WsClient {
 public:
  // Connects and asks for an upgrade of `target`; the handshake's error (the response is in response).
  beast::error_code open(uint16_t port, const std::string& target = "/v1/realtime?call_id=c1") {
    auto ec = step([&](auto done) {
      beast::get_lowest_layer(ws).async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                                                done);
    });
    if (ec) return ec;
    return step([&](auto done) { ws.async_handshake(response, "localhost", target, done); });
  }
  beast::error_code write(const std::string& text, bool binary = false) {
    ws.binary(binary);
    return step([&](auto done) { ws.async_write(asio::buffer(text), done); });
  }
  // The next message, or the error that ended reading (websocket::error::closed: see ws.reason()).
  std::pair<beast::error_code, std::string> read() {
    beast::flat_buffer buffer;
    auto ec = step([&](auto done) { ws.async_read(buffer, done); });
    return {ec, beast::buffers_to_string(buffer.data())};
  }
  beast::error_code close(uint16_t code) {
    return step([&](auto done) { ws.async_close(websocket::close_reason(code), done); });
  }
  // Reads until the server's close frame; its code (0 when reading ended otherwise).
  uint16_t read_until_closed(std::vector<std::string>* messages = nullptr) {
    for (;;) {
      auto [ec, text] = read();
      if (ec == websocket::error::closed) return ws.reason().code;
      if (ec) return 0;
      if (messages) messages->push_back(text);
    }
  }

  asio::io_context io;
  websocket::stream<beast::tcp_stream> ws{io};
  websocket::response_type response;

 private:
  template <typename Start>
  beast::error_code step(Start start) {
    std::optional<beast::error_code> result;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    io.restart();
    io.run_for(kWait);
    if (!result) {
      ADD_FAILURE() << "a WebSocket client step did not end within the deadline";
      beast::get_lowest_layer(ws).close();  // ends the step, so its handler runs while `result` lives
      io.restart();
      io.run();
      return asio::error::timed_out;
    }
    return *result;
  }
};

// A server whose handler accepts `GET /v1/realtime?call_id=c1` upgrades from another thread
// (as the transceiver does once a media worker answered), refuses other upgrades with 401,
// answers a plain request 200, and accepts a WebSocket for a plain request on /misuse.
class HttpWebSocket : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& t : responders_) t.join();
    server_.reset();
  }

  void start(HttpServer::Limits limits = {}) {
    server_ = std::make_unique<HttpServer>(*SocketAddress::parse("127.0.0.1:0"), limits,
                                           [this](const HttpRequest& request, HttpServer::Responder respond) {
                                             handle(request, std::move(respond));
                                           });
    server_->start();
  }

  WebSocketHandlers echo_handlers() {
    WebSocketHandlers h = tweak_handlers_;
    h.on_open = [this](std::shared_ptr<WebSocketConnection> c) {
      if (on_open_) on_open_(*c);
      events_.opened(std::move(c));
    };
    h.on_text = [this](std::string text) {
      events_.text(text);
      if (auto c = events_.connection()) c->send_text("echo: " + text);
    };
    h.on_closed = [this](uint16_t code, std::string_view reason) { events_.closed(code, reason); };
    return h;
  }

  void handle(const HttpRequest& request, HttpServer::Responder respond) {
    if (request.path == "/misuse") return respond(HttpResponse::accept_websocket(echo_handlers()));
    if (!request.websocket_upgrade) return respond(HttpResponse::text(200, "ok"));
    if (request.query != "call_id=c1") return respond(HttpResponse::json(401, R"({"error":"unauthorized"})"));
    upgrade_peer_ = request.peer;
    // The answer comes from another thread after the handler returned (and, for the one
    // test that holds it, after the test let it go).
    auto returned = std::make_shared<std::promise<void>>();
    responders_.emplace_back([this, respond = std::move(respond), handler_returned = returned->get_future(),
                              hold = hold_accept_]() mutable {
      handler_returned.wait();
      if (hold.valid()) hold.wait();
      HttpResponse accept = HttpResponse::accept_websocket(echo_handlers());
      accept.headers.emplace_back("x-call-id", "c1");
      respond(std::move(accept));
    });
    upgrade_requests_.fetch_add(1);
    returned->set_value();
  }

  WsEvents events_;                   // declared before server_: the handlers the server holds point at it
  WebSocketHandlers tweak_handlers_;  // limits for the next accepts
  std::function<void(WebSocketConnection&)> on_open_;  // runs on the server thread in on_open
  SocketAddress upgrade_peer_;
  std::atomic<int> upgrade_requests_{0};
  std::shared_future<void> hold_accept_;  // valid: accepts wait for it
  std::vector<std::thread> responders_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpWebSocket, AcceptAnsweredFromAnotherThreadThenEchoes) {
  start();
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  EXPECT_EQ(client.response.result_int(), 101u);
  EXPECT_EQ(client.response[beast::http::field::server], "rtcedge");
  EXPECT_EQ(client.response["x-call-id"], "c1");
  auto connection = events_.wait_open();
  ASSERT_TRUE(connection);
  EXPECT_EQ(connection->peer().ip_string(), "127.0.0.1");
  EXPECT_EQ(connection->peer().port(), upgrade_peer_.port());
  ASSERT_FALSE(client.write("hello"));
  auto [ec, text] = client.read();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(text, "echo: hello");
  EXPECT_EQ(events_.texts(), std::vector<std::string>{"hello"});
  EXPECT_EQ(server_->stats().websockets_accepted.load(), 1u);
  EXPECT_EQ(server_->stats().websockets_open.load(), 1u);
  EXPECT_EQ(events_.closes(), 0u);
}

TEST_F(HttpWebSocket, ARefusalIsAPlainHttpResponseTheHandshakeFailsOn) {
  start();
  WsClient client;
  EXPECT_EQ(client.open(server_->port(), "/v1/realtime?call_id=unknown"), websocket::error::upgrade_declined);
  EXPECT_EQ(client.response.result_int(), 401u);
  EXPECT_EQ(client.response[beast::http::field::content_type], "application/json");
  EXPECT_EQ(client.response.body(), R"({"error":"unauthorized"})");
  EXPECT_EQ(server_->stats().websockets_open.load(), 0u);
  EXPECT_EQ(events_.opens(), 0);
}

TEST_F(HttpWebSocket, AcceptingAPlainRequestIs500) {
  start();
  const std::string reply =
      round_trip(server_->port(), "GET /misuse HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 500 ")) << reply;
  EXPECT_NE(reply.find("did not ask for one"), std::string::npos);
  EXPECT_EQ(server_->stats().websockets_open.load(), 0u);
}

TEST_F(HttpWebSocket, AMessageOverTheLimitClosesWith1009) {
  tweak_handlers_.max_message_bytes = 16;
  start();
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  ASSERT_FALSE(client.write(std::string(100, 'x')));
  EXPECT_EQ(client.read_until_closed(), 1009u);
  auto closed = events_.wait_closed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->first, 1009u);
  EXPECT_TRUE(events_.texts().empty());
}

TEST_F(HttpWebSocket, ABinaryMessageClosesWith1003) {
  start();
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  ASSERT_FALSE(client.write("\x01\x02", /*binary=*/true));
  EXPECT_EQ(client.read_until_closed(), 1003u);
  auto closed = events_.wait_closed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->first, 1003u);
}

TEST_F(HttpWebSocket, TheClientsCloseCodeReachesOnClosed) {
  start();
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  ASSERT_TRUE(events_.wait_open());
  EXPECT_FALSE(client.close(1000));
  auto closed = events_.wait_closed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->first, 1000u);
  EXPECT_EQ(server_->stats().websockets_open.load(), 0u);
  EXPECT_EQ(events_.closes(), 1u);
}

TEST_F(HttpWebSocket, ADroppedConnectionIs1006) {
  start();
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  ASSERT_TRUE(events_.wait_open());
  beast::get_lowest_layer(client.ws).close();  // no close frame
  auto closed = events_.wait_closed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->first, 1006u);
}

TEST_F(HttpWebSocket, AClientGoneBeforeTheAcceptStillGetsOnClosed) {
  std::promise<void> release;
  hold_accept_ = release.get_future().share();
  start();
  int fd = connect_loopback(server_->port());
  const std::string upgrade =
      "GET /v1/realtime?call_id=c1 HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
  ASSERT_EQ(send(fd, upgrade.data(), upgrade.size(), MSG_NOSIGNAL), static_cast<ssize_t>(upgrade.size()));
  ASSERT_TRUE(wait_until([&] { return upgrade_requests_.load() == 1; }));
  close(fd);
  release.set_value();
  // Whether the 101 still went out (then on_open came first) or not, the end is a 1006.
  auto closed = events_.wait_closed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->first, 1006u);
  EXPECT_EQ(events_.closes(), 1u);
  EXPECT_TRUE(wait_until([&] { return server_->stats().websockets_open.load() == 0; }));
}

TEST_F(HttpWebSocket, CloseFollowsWhatIsQueued) {
  on_open_ = [](WebSocketConnection& c) {
    c.send_text("a");
    c.send_text("b");
    c.close(4000, "bye");
    c.send_text("after the close");  // dropped: nothing follows a close
  };
  start();
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  std::vector<std::string> messages;
  EXPECT_EQ(client.read_until_closed(&messages), 4000u);
  EXPECT_EQ(std::string_view(client.ws.reason().reason.data(), client.ws.reason().reason.size()), "bye");
  EXPECT_EQ(messages, (std::vector<std::string>{"a", "b"}));
  auto closed = events_.wait_closed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->first, 4000u);
  EXPECT_EQ(closed->second, "bye");
}

TEST_F(HttpWebSocket, PastTheQueueLimitTheSocketClosesWith1008) {
  tweak_handlers_.max_queued_bytes = 1000;
  // All posted before the first write can complete: the sixth 200 bytes exceed 1000 unwritten.
  on_open_ = [](WebSocketConnection& c) {
    for (int i = 0; i < 20; ++i) c.send_text(std::string(200, 'q'));
  };
  start();
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  std::vector<std::string> messages;
  EXPECT_EQ(client.read_until_closed(&messages), 1008u);
  EXPECT_LT(messages.size(), 6u);
  auto closed = events_.wait_closed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->first, 1008u);
  EXPECT_EQ(closed->second, "send queue full");
}

TEST_F(HttpWebSocket, AtTheWebSocketCapTheNextUpgradeIs503) {
  HttpServer::Limits limits;
  limits.max_websockets = 1;
  start(limits);
  WsClient first;
  ASSERT_FALSE(first.open(server_->port()));
  WsClient second;
  EXPECT_EQ(second.open(server_->port()), websocket::error::upgrade_declined);
  EXPECT_EQ(second.response.result_int(), 503u);
  // The refused accept is reported, so what the handler reserved for it can be given back.
  auto closed = events_.wait_closed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->first, 1006u);
  EXPECT_EQ(events_.opens(), 1);
  EXPECT_EQ(server_->stats().websockets_refused_at_cap.load(), 1u);
  EXPECT_EQ(server_->stats().websockets_open.load(), 1u);
  EXPECT_EQ(server_->stats().websockets_accepted.load(), 1u);
  // The first still works.
  ASSERT_FALSE(first.write("still"));
  EXPECT_EQ(first.read().second, "echo: still");
}

TEST_F(HttpWebSocket, SendAndCloseAfterTheEndDoNothing) {
  start();
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  auto connection = events_.wait_open();
  ASSERT_TRUE(connection);
  EXPECT_FALSE(client.close(1000));
  ASSERT_TRUE(events_.wait_closed());
  std::thread([connection] {
    connection->send_text("late");
    connection->close(1000, "late");
  }).join();
  // Both were posted before this: once it ran, they ran.
  std::promise<void> flushed;
  server_->post([&flushed] { flushed.set_value(); });
  ASSERT_EQ(flushed.get_future().wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(events_.closes(), 1u);
  // Past the server too: the handle neither reaches a destroyed io_context nor keeps it.
  for (auto& t : responders_) t.join();
  responders_.clear();
  server_.reset();
  std::thread([connection] { connection->send_text("later still"); }).join();
}

TEST_F(HttpWebSocket, AnOpenWebSocketIsOutsideTheConnectionCap) {
  HttpServer::Limits limits;
  limits.max_connections = 2;
  start(limits);
  WsClient client;
  ASSERT_FALSE(client.open(server_->port()));
  ASSERT_TRUE(events_.wait_open());
  EXPECT_EQ(server_->stats().connections_open.load(), 0u);
  int idle[2];
  for (int& fd : idle) {
    fd = connect_loopback(server_->port());
    const uint64_t expected = static_cast<uint64_t>(&fd - idle) + 1;
    ASSERT_TRUE(wait_until([&] { return server_->stats().connections_open.load() == expected; }));
  }
  // At the cap: the newcomer evicts the idlest plain connection, never the WebSocket.
  EXPECT_TRUE(round_trip(server_->port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                  .starts_with("HTTP/1.1 200 "));
  EXPECT_EQ(read_until_closed(idle[0], 3000), "<closed>");
  EXPECT_GE(server_->stats().evicted_at_cap.load(), 1u);
  ASSERT_FALSE(client.write("still here"));
  EXPECT_EQ(client.read().second, "echo: still here");
  EXPECT_EQ(server_->stats().websockets_open.load(), 1u);
  EXPECT_EQ(events_.closes(), 0u);
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace rtce
