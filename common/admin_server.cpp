// admin_server.cpp — see admin_server.h.
#include "admin_server.h"

#include <prometheus/text_serializer.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <stdexcept>

namespace rtce {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const std::map<std::string, AdminServer::Handler>& routes)
      : stream_(std::move(socket)), routes_(routes) {}

  void run() { read(); }

 private:
  void read() {
    request_ = {};
    parser_.emplace();
    parser_->body_limit(4096);
    stream_.expires_after(std::chrono::seconds(10));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) return;  // closed, timed out or malformed: just drop the connection
    request_ = parser_->release();
    HttpReply reply;
    std::string target(request_.target());
    if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
    auto it = routes_.find(target);
    if (request_.method() != http::verb::get && request_.method() != http::verb::head) {
      reply = {405, "text/plain; charset=utf-8", "method not allowed\n"};
    } else if (it == routes_.end()) {
      reply = {404, "text/plain; charset=utf-8", "not found\n"};
    } else {
      try {
        reply = it->second();
      } catch (const std::exception& e) {
        reply = {500, "text/plain; charset=utf-8", std::string("error: ") + e.what() + "\n"};
      }
    }
    response_ = {};
    response_.result(reply.status);
    response_.version(request_.version());
    response_.set(http::field::content_type, reply.content_type);
    response_.set(http::field::server, "rtcedge");
    response_.keep_alive(request_.keep_alive());
    if (request_.method() != http::verb::head) response_.body() = std::move(reply.body);
    response_.prepare_payload();
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code ec2, size_t) {
      if (!ec2 && self->response_.keep_alive()) self->read();
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  const std::map<std::string, AdminServer::Handler>& routes_;
};

}  // namespace

struct AdminServer::Impl {
  explicit Impl(const SocketAddress& l) : listen(l), acceptor(io) {}
  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Session>(std::move(socket), routes)->run();
      accept();
    });
  }
  SocketAddress listen;
  asio::io_context io;
  tcp::acceptor acceptor;
  std::map<std::string, Handler> routes;
  std::thread thread;
};

AdminServer::AdminServer(const SocketAddress& listen) : impl_(std::make_unique<Impl>(listen)) {}

AdminServer::~AdminServer() { stop(); }

void AdminServer::route(const std::string& path, Handler handler) {
  impl_->routes[path] = std::move(handler);
}

void AdminServer::start() {
  const auto address = asio::ip::make_address(impl_->listen.ip_string());
  tcp::endpoint endpoint(address, impl_->listen.port());
  beast::error_code ec;
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("admin server on " + impl_->listen.to_string() + ": " + ec.message());
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

void AdminServer::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->io.stop();
  impl_->thread.join();
}

uint16_t AdminServer::port() const { return impl_->acceptor.local_endpoint().port(); }

prometheus::MetricFamily& MetricsText::family(const std::string& name, const std::string& help,
                                              prometheus::MetricType type) {
  families_.push_back(prometheus::MetricFamily{name, help, type, {}});
  return families_.back();
}

void MetricsText::add(prometheus::MetricFamily& family, double value,
                      std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (family.type == prometheus::MetricType::Counter)
    m.counter.value = value;
  else if (family.type == prometheus::MetricType::Gauge)
    m.gauge.value = value;
  else
    m.untyped.value = value;
  family.metric.push_back(std::move(m));
}

std::string MetricsText::serialize() const {
  return prometheus::TextSerializer().Serialize({families_.begin(), families_.end()});
}

}  // namespace rtce
