// http_server.h — the HTTP/1.1 server under every rtcedge HTTP surface: the relay's admin
// endpoints and the transceiver's signaling API. Boost.Beast on one thread of its own;
// handlers answer asynchronously (a signaling request waits on a media worker) through a
// Responder that may be called from any thread, exactly once. A handler may also answer an
// upgrade request by accepting a WebSocket (the Realtime sideband): the connection then
// leaves HTTP and its text messages go to the handler's WebSocketHandlers.
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
  bool websocket_upgrade = false;  // a GET asking for a WebSocket (Beast's websocket::is_upgrade)

  // The first header with this (lowercase) name, or "".
  std::string_view header(std::string_view lowercase_name) const;
};

// One WebSocket the server accepted. send_text and close may be called from any thread: they hop
// to the server thread. After the socket closed they do nothing, also once the server is gone,
// so a holder may keep this past both.
class WebSocketConnection {
 public:
  virtual ~WebSocketConnection() = default;
  // Queued and written in order. Beyond max_queued_bytes of unwritten text the peer is too slow:
  // the socket is closed with 1008 ("send queue full") and on_closed reports it.
  virtual void send_text(std::string text) = 0;
  // A close frame after what is queued; no on_text after it. A code a peer may not receive
  // (1005, 1006, 1015, below 1000, ...) is sent as 1011; the reason is cut to the 123 bytes a
  // close frame holds.
  virtual void close(uint16_t code, std::string reason) = 0;
  virtual const SocketAddress& peer() const = 0;
};

struct WebSocketHandlers {
  // All called on the server thread. on_open once (the handshake is done; keep the pointer to send),
  // then on_text per whole text message, then on_closed once (the close code the peer sent or we sent;
  // 1006 when the TCP connection dropped or timed out without a close frame). A handshake that
  // fails (the client left meanwhile) or an accept the server refuses (500, 503) still reports
  // on_closed(1006), with no on_open before it, so a handler can release what it reserved when it
  // accepted. The one path without on_closed:
  // HttpServer::stop() ends the server thread, and the handlers are destroyed with the server.
  // A binary message closes with 1003, an exception from on_open or on_text with 1011; once
  // either side started closing, no more on_text.
  std::function<void(std::shared_ptr<WebSocketConnection>)> on_open;
  std::function<void(std::string text)> on_text;
  std::function<void(uint16_t code, std::string_view reason)> on_closed;
  size_t max_message_bytes = 64 * 1024;  // a larger incoming message closes with 1009
  size_t max_queued_bytes = 1 << 20;
  int idle_timeout_s = 60;  // Beast's idle timeout with keep-alive pings (ping at half of it); 0: none
};

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set: accept the upgrade (status 101, Beast writes the handshake response with `headers`
  // added; content_type and body unused). Only for a request with websocket_upgrade: for
  // another the server answers 500; at Limits::max_websockets it answers 503. The `{}` keeps
  // the positional HttpResponse{status, type, body, headers} clear of -Wmissing-field-initializers.
  std::shared_ptr<WebSocketHandlers> websocket{};

  static HttpResponse text(unsigned status, std::string body);
  static HttpResponse json(unsigned status, std::string body);
  static HttpResponse accept_websocket(WebSocketHandlers handlers);  // status 101
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
    size_t max_connections = 0;   // 0 = the process-wide http.max_connections
    size_t max_websockets = 256;  // open WebSockets (not counted in max_connections); more get 503
  };
  // Read by /metrics scrapes (add_http_server_metrics), written on the server thread.
  struct Stats {
    std::atomic<uint64_t> connections_open{0};
    std::atomic<uint64_t> evicted_at_cap{0};              // idlest closed for a new one at the cap
    std::atomic<uint64_t> evicted_out_of_descriptors{0};  // idlest closed because accept hit EMFILE/ENFILE
    std::atomic<uint64_t> refused_at_cap{0};  // at the cap with every connection busy: the new one closed
    std::atomic<uint64_t> accept_pauses{0};   // accept failed with nothing to close: waited, then retried
    // From the accept decision until on_closed (the handshake included); not in connections_open.
    std::atomic<uint64_t> websockets_open{0};
    std::atomic<uint64_t> websockets_accepted{0};        // handshakes completed
    std::atomic<uint64_t> websockets_refused_at_cap{0};  // upgrades answered 503 at max_websockets
  };

  HttpServer(const SocketAddress& listen, Limits limits, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving on its own thread; throws std::runtime_error naming the
  // address when it cannot bind.
  void start();
  // Stops the server thread; open WebSockets end without on_closed.
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
