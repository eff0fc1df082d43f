// http_server_test.cpp — the HTTP vocabulary helpers (media types, auth schemes) and the
// server's limits over real loopback sockets: 414 and 431, and the connection cap closing
// the idlest connection; parse_http_request, the same reading without a socket (the fuzzer's
// entry), refusing what the server refuses.
#include "http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

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

}  // namespace
}  // namespace rtce
