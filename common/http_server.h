// http_server.h — the HTTP/1.1 server under every rtcedge HTTP surface: the relay's admin
// endpoints and the transceiver's signaling API. Boost.Beast on one thread of its own;
// handlers answer asynchronously (a signaling request waits on a media worker) through a
// Responder that may be called from any thread, exactly once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net_address.h"

namespace rtce {

class ConfigLayers;

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
    size_t max_body_bytes = 64 * 1024;    // larger: 413
    size_t max_header_bytes = 16 * 1024;  // request line + header fields; larger: 431 (or 414)
    size_t max_target_bytes = 8 * 1024;   // the request-target (path and query); longer: 414
    int idle_timeout_s = 30;
    size_t max_connections = 0;  // 0 = the process-wide http.max_connections
  };
  // Read by /metrics scrapes (add_http_server_metrics), written on the server thread.
  struct Stats {
    std::atomic<uint64_t> connections_open{0};
    std::atomic<uint64_t> evicted_at_cap{0};              // idlest closed for a new one at the cap
    std::atomic<uint64_t> evicted_out_of_descriptors{0};  // idlest closed because accept hit EMFILE/ENFILE
    std::atomic<uint64_t> refused_at_cap{0};  // at the cap with every connection busy: the new one closed
    std::atomic<uint64_t> accept_pauses{0};   // accept failed with nothing to close: waited, then retried
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
  const Stats& stats() const;
  size_t max_connections() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// One request as the server reads it, without a socket (the fuzzer and tests): `bytes` go
// through the same Beast parser with the same limits, then become the HttpRequest a handler
// sees (peer unset), or the refusal the server sends before it closes (400, 413, 414, 431).
struct HttpParseResult {
  std::optional<HttpRequest> request;
  std::optional<HttpResponse> refusal;
  bool keep_alive = false;
  size_t consumed = 0;  // bytes of the request; neither set: the bytes end inside it
};
HttpParseResult parse_http_request(std::string_view bytes, const HttpServer::Limits& limits);

// The process-wide settings of every HTTP server in this binary (the http.max_connections key,
// in every binary's key table through http_max_connections_key): call once after the configuration is
// resolved and before servers start; throws ConfigError. It also raises RLIMIT_NOFILE to its
// hard limit, so that the connection cap, not the descriptor limit, is what binds first.
void configure_http_servers(const ConfigLayers& layers);

// RFC 9110 §8.3.1: whether a Content-Type value names `type_subtype` ("application/sdp"):
// type and subtype compared case-insensitively, optional parameters after ';', nothing else.
bool media_type_is(std::string_view content_type, std::string_view type_subtype);
// RFC 9110 §11.4: the credentials of an Authorization value whose auth scheme is `scheme`
// (compared case-insensitively) followed by one or more spaces; nullopt for another scheme
// or no credentials.
std::optional<std::string_view> credentials_for_scheme(std::string_view authorization,
                                                       std::string_view scheme);

}  // namespace rtce
