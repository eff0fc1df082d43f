// http_server.h — the HTTP/1.1 server under every rtcedge HTTP surface: the relay's admin
// endpoints and the transceiver's signaling API. Boost.Beast on one thread of its own;
// handlers answer asynchronously (a signaling request waits on a media worker) through a
// Responder that may be called from any thread, exactly once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "net_address.h"

namespace rtce {

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string path;                                          // target without the query
  std::string query;                                         // after '?', undecoded
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  std::string body;
  SocketAddress peer;

  // The first header with this (lowercase) name, or "".
  std::string_view header(std::string_view lowercase_name) const;
};

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static HttpResponse text(unsigned status, std::string body);
  static HttpResponse json(unsigned status, std::string body);
};

class HttpServer {
 public:
  using Responder = std::function<void(HttpResponse)>;
  using Handler = std::function<void(const HttpRequest&, Responder)>;
  struct Limits {
    size_t max_body_bytes = 64 * 1024;
    size_t max_header_bytes = 16 * 1024;
    int idle_timeout_s = 30;
  };

  HttpServer(const SocketAddress& listen, Limits limits, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving on its own thread; throws std::runtime_error naming the
  // address when it cannot bind.
  void start();
  void stop();
  uint16_t port() const;
  // Runs fn on the server thread (handlers run there too, so state they share needs no lock).
  void post(std::function<void()> fn);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace rtce
