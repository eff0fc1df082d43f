// http_server.cpp — see http_server.h.
#include "http_server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <fstream>
#include <list>
#include <optional>
#include <stdexcept>
#include <thread>
#include <variant>

#include "config_layers.h"

namespace rtce {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
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
  return request;
}

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
  }
  void accept();
  // Closes the idlest idle connection; false when every connection is busy (or none is open).
  bool evict_idlest(std::atomic<uint64_t>& counter);
  void publish_open_count() { stats.connections_open.store(connections.size(), std::memory_order_relaxed); }

  SocketAddress listen;
  HttpServer::Limits limits;
  HttpServer::Handler handler;
  HttpServer::Stats stats;
  ConnectionSet connections;  // declared before io: connections leave it as io destroys them
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::steady_timer accept_retry;
  std::chrono::milliseconds accept_backoff{0};
  std::thread thread;
};

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
    // The handler may answer later, from another thread: the answer hops back here.
    auto self = shared_from_this();
    auto responder = [self](HttpResponse response) {
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(response)]() mutable { self->write(std::move(r), self->keep_alive_); });
    };
    try {
      handler_(request, std::move(responder));
    } catch (const std::exception& e) {
      write(HttpResponse::text(500, std::string("internal error: ") + e.what()), false);
    }
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
