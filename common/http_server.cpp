// http_server.cpp — see http_server.h.
#include "http_server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <deque>
#include <fstream>
#include <list>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <variant>

#include "config_layers.h"

namespace rtce {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

std::string_view HttpRequest::header(std::string_view lowercase_name) const {
  for (const auto& [name, value] : headers)
    if (name == lowercase_name) return value;
  return {};
}

HttpResponse HttpResponse::text(unsigned status, std::string body) {
  if (!body.empty() && body.back() != '\n') body.push_back('\n');
  return HttpResponse{status, "text/plain; charset=utf-8", std::move(body), {}};
}

HttpResponse HttpResponse::json(unsigned status, std::string body) {
  return HttpResponse{status, "application/json", std::move(body), {}};
}

HttpResponse HttpResponse::accept_websocket(WebSocketHandlers handlers) {
  HttpResponse response;
  response.status = 101;
  response.websocket = std::make_shared<WebSocketHandlers>(std::move(handlers));
  return response;
}

namespace {

// The process-wide http.max_connections (configure_http_servers), for servers built with 0.
std::atomic<size_t> g_default_max_connections{kDefaultHttpMaxConnections};

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

bool is_ows(char c) { return c == ' ' || c == '\t'; }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

// accept() failures that mean "no descriptor or memory for a new socket right now": the
// listen socket stays readable, so retrying at once would spin.
bool out_of_descriptors(const beast::error_code& ec) {
  if (ec == asio::error::no_descriptors) return true;  // EMFILE
  if (ec.category() != asio::error::get_system_category()) return false;
  return ec.value() == ENFILE || ec.value() == ENOBUFS || ec.value() == ENOMEM;
}

using RequestParser = http::request_parser<http::string_body>;

void apply_limits(RequestParser& parser, const HttpServer::Limits& limits) {
  parser.body_limit(limits.max_body_bytes);
  parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
}

HttpResponse uri_too_long(const HttpServer::Limits& limits) {
  return HttpResponse::text(
      414, "request target longer than " + std::to_string(limits.max_target_bytes) + " bytes");
}

// The header overflowed: 414 when the request line itself did not fit or names a target
// longer than a target may be (RFC 9112 §3: a server "SHOULD respond with a 414"), else 431
// (RFC 6585 §5). The parser hands the request line over as soon as it is complete, so an
// empty target means the line never ended within the limit.
HttpResponse header_too_large(const RequestParser& parser, const HttpServer::Limits& limits) {
  const size_t target = parser.get().target().size();
  if (target == 0 || target > limits.max_target_bytes) return uri_too_long(limits);
  return HttpResponse::text(
      431, "request header fields larger than " + std::to_string(limits.max_header_bytes) + " bytes");
}

// What the server answers (and then closes) when reading a request failed with ec.
HttpResponse read_refusal(const beast::error_code& ec, const RequestParser& parser,
                          const HttpServer::Limits& limits) {
  if (ec == http::error::body_limit)
    return HttpResponse::text(413,
                              "request body larger than " + std::to_string(limits.max_body_bytes) + " bytes");
  if (ec == http::error::header_limit) return header_too_large(parser, limits);
  return HttpResponse::text(400, "malformed HTTP request: " + ec.message());
}

// The parsed message as a handler sees it (the body moved out), or 414 for a long target.
std::variant<HttpRequest, HttpResponse> to_request(RequestParser& parser, const HttpServer::Limits& limits) {
  auto& message = parser.get();
  if (message.target().size() > limits.max_target_bytes) return uri_too_long(limits);
  HttpRequest request;
  auto method = message.method_string();
  request.method.assign(method.data(), method.size());
  std::string target(message.target());
  if (auto q = target.find('?'); q != std::string::npos) {
    request.query = target.substr(q + 1);
    target.resize(q);
  }
  request.path = std::move(target);
  for (const auto& field : message) {
    auto name = field.name_string();
    auto value = field.value();
    request.headers.emplace_back(lowercase({name.data(), name.size()}),
                                 std::string(value.data(), value.size()));
  }
  request.body = std::move(message.body());
  request.websocket_upgrade = websocket::is_upgrade(message);
  return request;
}

// RFC 6455 §7.4: the codes an endpoint may put in a close frame (1005, 1006 and 1015 only
// describe a closure locally; 1004 and 1012-2999 are reserved or unassigned here).
bool sendable_close_code(uint16_t code) {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1011) || (code >= 3000 && code <= 4999);
}

// A close frame's payload is at most 125 bytes, 2 of them the code; the reason must stay
// UTF-8, so the cut backs off to the start of a character.
std::string close_reason_that_fits(std::string reason) {
  constexpr size_t kMax = 123;
  if (reason.size() <= kMax) return reason;
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) --cut;
  reason.resize(cut);
  return reason;
}

// How a caller off the server thread reaches it: the io_context while it exists. A
// WebSocketConnection handle may outlive the server, and posting to a destroyed io_context is
// undefined, so ~ServerCore clears `io` under the mutex a poster holds.
struct ServerGate {
  std::mutex mutex;
  asio::io_context* io = nullptr;
};

class Connection;

// The open connections of one server, least recently active first: the cap and a descriptor
// shortage close the idlest one that has no request in flight. Server thread only.
class ConnectionSet {
 public:
  using Position = std::list<Connection*>::iterator;

  Position add(Connection* c) { return order_.insert(order_.end(), c); }
  void remove(Position p) { order_.erase(p); }
  void touch(Position p) { order_.splice(order_.end(), order_, p); }
  size_t size() const { return order_.size(); }
  // The least recently active connection that is not busy, or nullptr.
  Connection* idlest() const;

 private:
  std::list<Connection*> order_;
};

// One server's state, on its own thread: the listener, the open connections, the settings.
struct ServerCore {
  ServerCore(const SocketAddress& l, HttpServer::Limits lim, HttpServer::Handler h)
      : listen(l), limits(lim), handler(std::move(h)), acceptor(io), accept_retry(io) {
    if (limits.max_connections == 0) limits.max_connections = g_default_max_connections.load();
    gate->io = &io;
  }
  ~ServerCore() {
    std::lock_guard lock(gate->mutex);
    gate->io = nullptr;
  }
  void accept();
  // Closes the idlest idle connection; false when every connection is busy (or none is open).
  bool evict_idlest(std::atomic<uint64_t>& counter);
  void publish_open_count() { stats.connections_open.store(connections.size(), std::memory_order_relaxed); }
  void publish_websocket_count() { stats.websockets_open.store(websockets, std::memory_order_relaxed); }

  SocketAddress listen;
  HttpServer::Limits limits;
  HttpServer::Handler handler;
  HttpServer::Stats stats;
  ConnectionSet connections;  // declared before io: connections leave it as io destroys them
  size_t websockets = 0;      // WebSocket sessions, from the accept decision until on_closed
  std::shared_ptr<ServerGate> gate = std::make_shared<ServerGate>();
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::steady_timer accept_retry;
  std::chrono::milliseconds accept_backoff{0};
  std::thread thread;
};

// One accepted WebSocket, on the server thread: the handshake, a read loop handing text
// messages to the handlers, a write queue, and the close. It reports on_closed once, when the
// last of its operations that decides the outcome ends: the read loop, or the close
// handshake when this side started one.
class WebSocketSession : public std::enable_shared_from_this<WebSocketSession> {
 public:
  WebSocketSession(tcp::socket socket, ServerCore& server, std::shared_ptr<WebSocketHandlers> handlers,
                   const SocketAddress& peer)
      : ws_(std::move(socket)), server_(server), handlers_(std::move(handlers)), peer_(peer) {
    ++server_.websockets;
    server_.publish_websocket_count();
  }

  void run(http::request<http::string_body> request,
           std::vector<std::pair<std::string, std::string>> headers) {
    ws_.set_option(
        websocket::stream_base::decorator([headers = std::move(headers)](websocket::response_type& response) {
          response.set(http::field::server, "rtcedge");
          for (const auto& [name, value] : headers) response.set(name, value);
        }));
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = std::chrono::seconds(10);  // also bounds the close handshake
    timeouts.idle_timeout =
        handlers_->idle_timeout_s > 0
            ? websocket::stream_base::duration(std::chrono::seconds(handlers_->idle_timeout_s))
            : websocket::stream_base::none();
    timeouts.keep_alive_pings = true;
    ws_.set_option(timeouts);
    ws_.read_message_max(handlers_->max_message_bytes);
    // Bytes a client sent after its upgrade request would be lost here; RFC 6455 §4.1 has it
    // wait for the 101 before it sends a frame, so there are none.
    request_ = std::move(request);
    ws_.async_accept(request_, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  // send_text and close run on the server thread; the handle given to on_open posts to them.
  void send_text(std::string text) {
    if (done_ || closing()) return;
    if (queued_bytes_ + text.size() > handlers_->max_queued_bytes) {
      spdlog::info("WebSocket {}: more than {} bytes unsent, closing", peer_.to_string(),
                   handlers_->max_queued_bytes);
      return start_close(1008, "send queue full");
    }
    queued_bytes_ += text.size();
    queue_.push_back(std::move(text));
    if (!writing_) write_next();
  }

  void close(uint16_t code, std::string reason) {
    if (done_ || closing()) return;
    if (!sendable_close_code(code)) {
      spdlog::warn("WebSocket {}: close code {} may not be sent, sending 1011", peer_.to_string(), code);
      code = 1011;
    }
    requested_close_ = Close{code, std::move(reason)};
    if (!writing_) start_close(requested_close_->code, requested_close_->reason);
  }

 private:
  bool closing() const { return close_started_ || requested_close_.has_value(); }

  void on_accept(beast::error_code ec) {
    if (ec) {
      spdlog::debug("WebSocket {}: handshake failed: {}", peer_.to_string(), ec.message());
      return finish(1006, "handshake failed: " + ec.message());
    }
    request_ = {};
    server_.stats.websockets_accepted.fetch_add(1, std::memory_order_relaxed);
    if (handlers_->on_open) {
      try {
        handlers_->on_open(make_handle());
      } catch (const std::exception& e) {
        spdlog::error("WebSocket {}: on_open threw: {}", peer_.to_string(), e.what());
        start_close(1011, "internal error");
      }
    }
    read();
  }

  std::shared_ptr<WebSocketConnection> make_handle();

  void read() {
    ws_.async_read(read_buffer_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (done_) return;
    if (ec) {
      if (close_started_) return;  // the close handshake's end reports, with the code sent
      return finish(closed_code(ec), closed_reason(ec));
    }
    if (ws_.got_binary()) {
      read_buffer_.clear();
      start_close(1003, "binary messages are not supported");
      return read();  // Beast reads the peer's close frame through it
    }
    std::string text = beast::buffers_to_string(read_buffer_.data());
    read_buffer_.clear();
    if (!closing() && handlers_->on_text) {
      try {
        handlers_->on_text(std::move(text));
      } catch (const std::exception& e) {
        spdlog::error("WebSocket {}: on_text threw: {}", peer_.to_string(), e.what());
        start_close(1011, "internal error");
      }
    }
    if (!done_) read();
  }

  // The code on_closed reports when the read loop ended on its own (no close started here).
  uint16_t closed_code(const beast::error_code& ec) const {
    if (ec == websocket::error::closed) {
      // The peer's close frame; one without a code is 1005 (RFC 6455 §7.1.5).
      const uint16_t code = ws_.reason().code;
      return code == websocket::close_code::none ? uint16_t{1005} : code;
    }
    if (ec == websocket::error::message_too_big) return 1009;  // Beast sent the 1009 close
    // Beast failed the connection with a 1002 close for a protocol error of the peer's.
    if (ec == websocket::condition::protocol_violation) return 1002;
    return 1006;  // dropped, reset or timed out without a close frame
  }
  std::string closed_reason(const beast::error_code& ec) const {
    if (ec == websocket::error::closed) return {ws_.reason().reason.data(), ws_.reason().reason.size()};
    return ec.message();
  }

  void write_next() {
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(queue_.front()),
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    queued_bytes_ -= queue_.front().size();
    queue_.pop_front();
    if (done_ || close_started_) return;
    if (ec) {
      // operation_aborted: another operation got the stream's first error and reports it.
      if (ec == asio::error::operation_aborted) return;
      return finish(1006, "write failed: " + ec.message());
    }
    if (!queue_.empty()) return write_next();
    if (requested_close_) start_close(requested_close_->code, requested_close_->reason);
  }

  // Sends a close frame now: what is queued and not yet being written is dropped.
  void start_close(uint16_t code, std::string reason) {
    if (done_ || close_started_) return;
    close_started_ = true;
    while (queue_.size() > (writing_ ? 1u : 0u)) {
      queued_bytes_ -= queue_.back().size();
      queue_.pop_back();
    }
    sent_code_ = code;
    sent_reason_ = close_reason_that_fits(std::move(reason));
    const websocket::close_reason frame(static_cast<websocket::close_code>(code), sent_reason_);
    // Beast waits for a write in flight, sends the frame, then reads until the peer's close
    // frame (taking over a pending read) and closes the socket.
    ws_.async_close(frame, [self = shared_from_this()](beast::error_code) {
      self->finish(self->sent_code_, self->sent_reason_);
    });
  }

  void finish(uint16_t code, std::string reason) {
    if (done_) return;
    done_ = true;
    // Frees the descriptor now, whatever Beast still has pending (it ends aborted).
    beast::get_lowest_layer(ws_).close();
    --server_.websockets;
    server_.publish_websocket_count();
    auto handlers = std::move(handlers_);  // what the handlers hold goes with the session's end
    if (!handlers->on_closed) return;
    try {
      handlers->on_closed(code, reason);
    } catch (const std::exception& e) {
      spdlog::error("WebSocket {}: on_closed threw: {}", peer_.to_string(), e.what());
    }
  }

  websocket::stream<beast::tcp_stream> ws_;
  ServerCore& server_;
  std::shared_ptr<WebSocketHandlers> handlers_;  // empty once done
  SocketAddress peer_;
  http::request<http::string_body> request_;  // the upgrade request, until the handshake ends
  beast::flat_buffer read_buffer_;
  std::deque<std::string> queue_;  // the front is being written when writing_
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  struct Close {
    uint16_t code;
    std::string reason;
  };
  std::optional<Close> requested_close_;  // close(): sent once the queue drains
  bool close_started_ = false;
  uint16_t sent_code_ = 0;
  std::string sent_reason_;
  bool done_ = false;  // on_closed reported
};

// What on_open hands out: it reaches the session only through the server thread, and holds
// neither the session nor the server alive.
class WebSocketHandle : public WebSocketConnection {
 public:
  WebSocketHandle(std::weak_ptr<WebSocketSession> session, std::shared_ptr<ServerGate> gate,
                  const SocketAddress& peer)
      : session_(std::move(session)), gate_(std::move(gate)), peer_(peer) {}

  void send_text(std::string text) override {
    post([text = std::move(text)](WebSocketSession& s) mutable { s.send_text(std::move(text)); });
  }
  void close(uint16_t code, std::string reason) override {
    post([code, reason = std::move(reason)](WebSocketSession& s) mutable {
      s.close(code, std::move(reason));
    });
  }
  const SocketAddress& peer() const override { return peer_; }

 private:
  template <typename Fn>
  void post(Fn fn) {
    std::lock_guard lock(gate_->mutex);
    if (!gate_->io) return;  // the server is gone
    asio::post(*gate_->io, [session = session_, fn = std::move(fn)]() mutable {
      if (auto s = session.lock()) fn(*s);
    });
  }

  std::weak_ptr<WebSocketSession> session_;
  std::shared_ptr<ServerGate> gate_;
  SocketAddress peer_;
};

std::shared_ptr<WebSocketConnection> WebSocketSession::make_handle() {
  return std::make_shared<WebSocketHandle>(weak_from_this(), server_.gate, peer_);
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, ServerCore& server)
      : stream_(std::move(socket)), limits_(server.limits), handler_(server.handler), server_(server) {
    beast::error_code ec;
    auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = SocketAddress::from_sockaddr(remote.data(), static_cast<socklen_t>(remote.size()));
    position_ = server_.connections.add(this);
    server_.publish_open_count();
  }
  ~Connection() { leave_set(); }

  void run() { read(); }
  bool busy() const { return busy_; }
  // Closes the socket now (its descriptor is free at once); pending operations end aborted.
  void close_now() {
    leave_set();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

 private:
  void leave_set() {
    if (!position_) return;
    server_.connections.remove(*position_);
    position_.reset();
    server_.publish_open_count();
  }
  void set_busy(bool busy) {
    busy_ = busy;
    if (position_) server_.connections.touch(*position_);
  }

  void read() {
    set_busy(false);
    parser_.emplace();
    apply_limits(*parser_, limits_);
    stream_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    set_busy(true);
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == asio::error::bad_descriptor)
      return;
    if (ec) return write(read_refusal(ec, *parser_, limits_), false);  // malformed or too large: close
    auto parsed = to_request(*parser_, limits_);
    if (auto* refusal = std::get_if<HttpResponse>(&parsed)) return write(std::move(*refusal), false);
    auto& message = parser_->get();
    HttpRequest& request = std::get<HttpRequest>(parsed);
    request.peer = peer_;
    keep_alive_ = message.keep_alive();
    version_ = message.version();
    head_ = message.method() == http::verb::head;
    // Beast's accept reads the upgrade request's Sec-WebSocket-* fields from the message itself.
    upgrade_request_.reset();
    if (request.websocket_upgrade) upgrade_request_ = parser_->release();
    // The handler may answer later, from another thread: the answer hops back here.
    auto self = shared_from_this();
    auto responder = [self](HttpResponse response) {
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(response)]() mutable { self->respond(std::move(r)); });
    };
    try {
      handler_(request, std::move(responder));
    } catch (const std::exception& e) {
      write(HttpResponse::text(500, std::string("internal error: ") + e.what()), false);
    }
  }

  void respond(HttpResponse reply) {
    if (!reply.websocket) return write(std::move(reply), keep_alive_);
    // A refused accept still reports on_closed: the handler may have reserved something for
    // the socket (a sideband's place on its call) that must be given back.
    auto refuse = [&](unsigned status, const std::string& why) {
      if (reply.websocket->on_closed) reply.websocket->on_closed(1006, why);
      write(HttpResponse::text(status, why), keep_alive_);
    };
    if (!upgrade_request_) {
      const auto target = parser_->get().target();
      spdlog::error("HTTP server: a handler accepted a WebSocket for {} {}, which did not ask for one",
                    std::string(parser_->get().method_string()), std::string(target));
      return refuse(500, "internal error: a WebSocket accept for a request that did not ask for one");
    }
    if (server_.websockets >= limits_.max_websockets) {
      server_.stats.websockets_refused_at_cap.fetch_add(1, std::memory_order_relaxed);
      return refuse(503, "too many WebSockets open");
    }
    // An open WebSocket is no longer an HTTP connection: neither idle-evictable nor counted.
    // The session takes the socket; this Connection ends with the responder that called here.
    leave_set();
    auto session = std::make_shared<WebSocketSession>(stream_.release_socket(), server_,
                                                      std::move(reply.websocket), peer_);
    session->run(std::move(*upgrade_request_), std::move(reply.headers));
    upgrade_request_.reset();
  }

  void write(HttpResponse reply, bool keep_alive) {
    response_ = {};
    response_.result(reply.status);
    response_.version(version_);
    response_.set(http::field::server, "rtcedge");
    response_.set(http::field::content_type, reply.content_type);
    for (auto& [name, value] : reply.headers) response_.set(name, value);
    response_.keep_alive(keep_alive);
    if (!head_) response_.body() = std::move(reply.body);
    response_.prepare_payload();
    stream_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!ec && self->response_.keep_alive()) {
        self->read();
      } else {
        beast::error_code ignored;
        self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        self->discard_unread();
      }
    });
  }

  // Closing with unread bytes (the body of a refused upload) makes the kernel send a RST
  // that can destroy the response before the client reads it. Read and drop what is left,
  // bounded in bytes and time, then close.
  void discard_unread() {
    if (discarded_ > (8u << 20)) return;
    stream_.expires_after(std::chrono::seconds(2));
    stream_.async_read_some(asio::buffer(drain_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->discarded_ += n;
                              if (!ec) self->discard_unread();
                            });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  const HttpServer::Limits& limits_;
  const HttpServer::Handler& handler_;
  ServerCore& server_;
  std::optional<ConnectionSet::Position> position_;  // empty once closed
  bool busy_ = false;                                // a request is being handled or answered
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::request<http::string_body>> upgrade_request_;  // the last request, if an upgrade
  http::response<http::string_body> response_;
  SocketAddress peer_;
  bool keep_alive_ = false;
  bool head_ = false;
  unsigned version_ = 11;
  size_t discarded_ = 0;
  std::array<char, 16384> drain_buffer_{};
};

Connection* ConnectionSet::idlest() const {
  for (Connection* c : order_)
    if (!c->busy()) return c;
  return nullptr;
}

bool ServerCore::evict_idlest(std::atomic<uint64_t>& counter) {
  Connection* victim = connections.idlest();
  if (!victim) return false;
  victim->close_now();
  counter.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ServerCore::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      accept_backoff = std::chrono::milliseconds(0);
      // At the cap the newcomer wins over the idlest connection: a probe like /healthz
      // must get through however many idle connections a client leaves open. Only when every
      // connection has a request in flight is the newcomer the one closed.
      if (connections.size() >= limits.max_connections && !evict_idlest(stats.evicted_at_cap)) {
        stats.refused_at_cap.fetch_add(1, std::memory_order_relaxed);
        beast::error_code ignored;
        socket.close(ignored);
        return accept();
      }
      // Answers and WebSocket events are small writes that must go at once: Nagle would hold
      // the second of a burst until the client's delayed ACK (~40 ms).
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Connection>(std::move(socket), *this)->run();
      return accept();
    }
    if (ec == asio::error::connection_aborted) return accept();  // that client is gone; next one
    // Out of descriptors (or another failure that would repeat at once): free a descriptor by
    // closing the idlest connection and retry, or with nothing to close wait 10 ms, doubling
    // up to 1 s. Retrying at once would spin on a listen socket that stays readable.
    if (out_of_descriptors(ec) && evict_idlest(stats.evicted_out_of_descriptors)) return accept();
    stats.accept_pauses.fetch_add(1, std::memory_order_relaxed);
    accept_backoff =
        std::clamp(accept_backoff * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
    accept_retry.expires_after(accept_backoff);
    accept_retry.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec) accept();
    });
  });
}

}  // namespace

struct HttpServer::Impl : ServerCore {
  using ServerCore::ServerCore;
};

HttpServer::HttpServer(const SocketAddress& listen, Limits limits, Handler handler)
    : impl_(std::make_shared<Impl>(listen, limits, std::move(handler))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  const auto address = asio::ip::make_address(impl_->listen.ip_string());
  tcp::endpoint endpoint(address, impl_->listen.port());
  beast::error_code ec;
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("HTTP server on " + impl_->listen.to_string() + ": " + ec.message());
  impl_->accept();
  impl_->thread = std::thread([impl = impl_] { impl->io.run(); });
}

void HttpServer::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->io.stop();
  impl_->thread.join();
}

uint16_t HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::post(std::function<void()> fn) { asio::post(impl_->io, std::move(fn)); }

const HttpServer::Stats& HttpServer::stats() const { return impl_->stats; }

size_t HttpServer::max_connections() const { return impl_->limits.max_connections; }

namespace {

// The soft RLIMIT_NOFILE raised to the hard limit (bounded by fs.nr_open when the hard limit
// is unlimited); returns the soft limit now in force.
rlim_t raise_open_files_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  rlim_t target = limit.rlim_max;
  if (target == RLIM_INFINITY) {
    std::ifstream nr_open("/proc/sys/fs/nr_open");
    unsigned long long n = 0;
    target = (nr_open >> n) ? static_cast<rlim_t>(n) : limit.rlim_cur;
  }
  if (target <= limit.rlim_cur) return limit.rlim_cur;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = target;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return before;
  spdlog::debug("open files limit raised from {} to {}", before, target);
  return target;
}

}  // namespace

void configure_http_servers(const ConfigLayers& layers) {
  const uint64_t max_connections = resolve_http_max_connections(layers);
  g_default_max_connections.store(static_cast<size_t>(max_connections));
  const rlim_t open_files = raise_open_files_limit();
  if (open_files != 0 && open_files != RLIM_INFINITY && max_connections >= open_files)
    spdlog::warn(
        "http.max_connections {} is not below the open files limit {}: when descriptors run out an HTTP "
        "server closes its idlest connection or pauses accepting",
        max_connections, open_files);
}

HttpParseResult parse_http_request(std::string_view bytes, const HttpServer::Limits& limits) {
  RequestParser parser;
  apply_limits(parser, limits);
  HttpParseResult out;
  beast::error_code ec;
  size_t used = 0;
  // put() takes what it can; a header cut short takes nothing and asks for more.
  while (!parser.is_done()) {
    const size_t n = parser.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == http::error::need_more) return out;
    if (ec) {
      out.refusal = read_refusal(ec, parser, limits);
      out.consumed = used;
      return out;
    }
    if (n == 0) return out;
  }
  out.consumed = used;
  out.keep_alive = parser.get().keep_alive();
  auto parsed = to_request(parser, limits);
  if (auto* refusal = std::get_if<HttpResponse>(&parsed))
    out.refusal = std::move(*refusal);
  else
    out.request = std::move(std::get<HttpRequest>(parsed));
  return out;
}

bool media_type_is(std::string_view content_type, std::string_view type_subtype) {
  std::string_view value = trim_ows(content_type);
  if (value.size() < type_subtype.size() || !iequals(value.substr(0, type_subtype.size()), type_subtype))
    return false;
  std::string_view rest = trim_ows(value.substr(type_subtype.size()));
  return rest.empty() || rest.front() == ';';
}

std::optional<std::string_view> credentials_for_scheme(std::string_view authorization,
                                                       std::string_view scheme) {
  std::string_view value = trim_ows(authorization);
  if (value.size() <= scheme.size() || !iequals(value.substr(0, scheme.size()), scheme) ||
      value[scheme.size()] != ' ')
    return std::nullopt;
  std::string_view credentials = trim_ows(value.substr(scheme.size()));
  if (credentials.empty()) return std::nullopt;
  return credentials;
}

}  // namespace rtce
