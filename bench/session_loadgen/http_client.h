// http_client.h — the load generator's signaling client: a tiny blocking HTTP/1.1 client
// over one keep-alive TCP connection (POST an SDP offer, DELETE a session, GET /metrics).
// Setup path only; one instance per setup thread, never shared between threads.
#pragma once

#include <string>
#include <string_view>

#include "clock.h"
#include "net_address.h"

namespace rtce::loadgen {

struct HttpResult {
  int status = 0;     // 0 = no response (see error)
  std::string error;  // transport failure: connect, timeout, malformed response
  std::string body;
  std::string location;     // the Location header, if any
  std::string retry_after;  // the Retry-After header, if any
};

class HttpClient {
 public:
  explicit HttpClient(SocketAddress server, Nanos timeout = 5'000'000'000);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request and reads the whole response. A request on a kept-alive connection
  // that the server closed in the meantime is retried once on a fresh connection.
  HttpResult request(std::string_view method, std::string_view path, std::string_view content_type = {},
                     std::string_view body = {});

 private:
  bool ensure_connected(std::string& error);
  void close_connection();
  HttpResult exchange(const std::string& request_text, bool& retryable);

  SocketAddress server_;
  Nanos timeout_;
  int fd_ = -1;
  std::string host_header_;
};

}  // namespace rtce::loadgen
