// test_ws_server.cpp — see test_ws_server.h.
#include "test_ws_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <optional>

namespace rtce::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

struct TestWsServer::Connection : std::enable_shared_from_this<TestWsServer::Connection> {
  Connection(TestWsServer& server, tcp::socket socket) : server(server), stream(std::move(socket)) {}

  void start() {
    http::async_read(stream, buffer, request, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return;
      {
        std::lock_guard lock(self->server.mutex_);
        self->server.target_ = std::string(self->request.target());
        for (const auto& field : self->request) {
          self->server.headers_[std::string(field.name_string())] = std::string(field.value());
        }
      }
      self->ws.emplace(std::move(self->stream));
      self->ws->async_accept(self->request, [self](beast::error_code ec) {
        if (ec) return;
        {
          std::lock_guard lock(self->server.mutex_);
          ++self->server.accepted_upgrades_;
        }
        self->open = true;
        if (self->server.mode_ == Mode::normal) self->read();
        self->write_next();
      });
    });
  }

  void read() {
    ws->async_read(read_buffer, [self = shared_from_this()](beast::error_code ec, size_t) {
      std::lock_guard lock(self->server.mutex_);
      if (ec) {
        self->server.peer_closed_ = true;
        return;
      }
      self->server.messages_.push_back(
          {self->ws->got_text(), beast::buffers_to_string(self->read_buffer.cdata())});
      self->read_buffer.consume(self->read_buffer.size());
      self->read();
    });
  }

  void queue(bool text, std::string data) {
    outbox.emplace_back(text, std::move(data));
    write_next();
  }

  void write_next() {
    if (!open || writing || outbox.empty()) return;
    writing = true;
    auto& [text, data] = outbox.front();
    ws->text(text);
    ws->async_write(asio::buffer(data), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing = false;
      self->outbox.pop_front();
      if (!ec) self->write_next();
    });
  }

  TestWsServer& server;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  http::request<http::string_body> request;
  std::optional<websocket::stream<beast::tcp_stream>> ws;
  beast::flat_buffer read_buffer;
  std::deque<std::pair<bool, std::string>> outbox;
  bool open = false;
  bool writing = false;
};

TestWsServer::TestWsServer(Mode mode) : mode_(mode), acceptor_(io_) {
  tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  // Inherited by accepted sockets: a stalled backend then fills up after a few kilobytes.
  if (mode_ == Mode::stalled) acceptor_.set_option(asio::socket_base::receive_buffer_size(4096));
  acceptor_.bind(endpoint);
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] {
    auto guard = asio::make_work_guard(io_);
    io_.run();
  });
}

TestWsServer::~TestWsServer() {
  asio::post(io_, [this] {
    connection_.reset();
    io_.stop();
  });
  thread_.join();
}

void TestWsServer::accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec) return;
    connection_ = std::make_shared<Connection>(*this, std::move(socket));
    connection_->start();
    accept();
  });
}

std::string TestWsServer::url(const std::string& path) const {
  return "ws://127.0.0.1:" + std::to_string(port_) + path;
}

int TestWsServer::accepted_upgrades() const {
  std::lock_guard lock(mutex_);
  return accepted_upgrades_;
}

std::vector<ReceivedMessage> TestWsServer::messages() const {
  std::lock_guard lock(mutex_);
  return messages_;
}

size_t TestWsServer::message_count() const {
  std::lock_guard lock(mutex_);
  return messages_.size();
}

std::string TestWsServer::request_target() const {
  std::lock_guard lock(mutex_);
  return target_;
}

std::string TestWsServer::request_header(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = headers_.find(name);
  return it == headers_.end() ? "" : it->second;
}

bool TestWsServer::peer_closed() const {
  std::lock_guard lock(mutex_);
  return peer_closed_;
}

void TestWsServer::send_text(std::string text) {
  asio::post(io_, [this, text = std::move(text)]() mutable {
    if (connection_) connection_->queue(true, std::move(text));
  });
}

void TestWsServer::send_binary(std::string bytes) {
  asio::post(io_, [this, bytes = std::move(bytes)]() mutable {
    if (connection_) connection_->queue(false, std::move(bytes));
  });
}

void TestWsServer::close(uint16_t code, std::string reason) {
  asio::post(io_, [this, code, reason = std::move(reason)] {
    if (!connection_ || !connection_->ws) return;
    websocket::close_reason close_reason;
    close_reason.code = code;
    close_reason.reason = reason;
    connection_->ws->async_close(close_reason, [conn = connection_](beast::error_code) {});
  });
}

}  // namespace rtce::testing
