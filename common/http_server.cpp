// http_server.cpp — see http_server.h.
#include "http_server.h"

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

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

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const HttpServer::Limits& limits, const HttpServer::Handler& handler)
      : stream_(std::move(socket)), limits_(limits), handler_(handler) {
    beast::error_code ec;
    auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = SocketAddress::from_sockaddr(remote.data(), static_cast<socklen_t>(remote.size()));
  }

  void run() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(limits_.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    stream_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      write(HttpResponse::text(
                413, "request body larger than " + std::to_string(limits_.max_body_bytes) + " bytes"),
            false);
      return;
    }
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted)
      return;
    if (ec) {  // malformed request: say so, then close
      write(HttpResponse::text(400, "malformed HTTP request: " + ec.message()), false);
      return;
    }
    auto& message = parser_->get();
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
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  SocketAddress peer_;
  bool keep_alive_ = false;
  bool head_ = false;
  unsigned version_ = 11;
  size_t discarded_ = 0;
  std::array<char, 16384> drain_buffer_{};
};

}  // namespace

struct HttpServer::Impl {
  Impl(const SocketAddress& l, Limits lim, Handler h)
      : listen(l), limits(lim), handler(std::move(h)), acceptor(io) {}
  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Connection>(std::move(socket), limits, handler)->run();
      accept();
    });
  }
  SocketAddress listen;
  Limits limits;
  Handler handler;
  asio::io_context io;
  tcp::acceptor acceptor;
  std::thread thread;
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

}  // namespace rtce
