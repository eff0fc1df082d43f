// call_forwarder.cpp — see call_forwarder.h.
#include "call_forwarder.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <optional>

#include "realtime_signaling.h"

namespace rtce {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kMaxAnswerBytes = 1 << 20;
constexpr size_t kMaxMessageBytes = 64 * 1024;

// Headers that belong to one hop (RFC 9110 §7.6.1) or that each side sets for itself.
bool hop_header(std::string_view lowercase_name) {
  return lowercase_name == "connection" || lowercase_name == "keep-alive" || lowercase_name == "upgrade" ||
         lowercase_name == "transfer-encoding" || lowercase_name == "te" || lowercase_name == "trailer" ||
         lowercase_name == "host" || lowercase_name == "content-length" ||
         lowercase_name == "proxy-connection" || lowercase_name.starts_with("sec-websocket-") ||
         lowercase_name == kForwardedHeader;
}

// The owner's headers a client may need (the pod that answers adds its own CORS and Server).
bool passed_back(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !hop_header(lower) && lower != "server" && lower != "content-type" &&
         !lower.starts_with("access-control-");
}

std::string target_of(const HttpRequest& request) {
  return request.query.empty() ? request.path : request.path + "?" + request.query;
}

HttpResponse unreachable(const SocketAddress& owner, std::string_view why) {
  spdlog::warn("forwarding to the call's owner {}: {}", owner.to_string(), why);
  return realtime_error_response(RealtimeError::owner_unreachable, why);
}

tcp::endpoint endpoint_of(const SocketAddress& a) {
  return {asio::ip::make_address(a.ip_string()), a.port()};
}

// One HTTP exchange with the owner.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(asio::io_context& io, SocketAddress owner, Nanos timeout, HttpServer::Responder respond,
           std::atomic<uint64_t>& unreachable_count)
      : stream_(io),
        owner_(std::move(owner)),
        timeout_(timeout),
        respond_(std::move(respond)),
        unreachable_(unreachable_count) {}

  void run(const HttpRequest& request) {
    request_.method_string(request.method);
    request_.target(target_of(request));
    request_.version(11);
    for (const auto& [name, value] : request.headers)
      if (!hop_header(name)) request_.set(name, value);
    request_.set(http::field::host, owner_.to_string());
    // What the client asked for (a provider signs the URL with it): the owner's view of the request.
    if (!request.header("host").empty() && request.header(kForwardedHostHeader).empty())
      request_.set(beast::string_view(kForwardedHostHeader.data(), kForwardedHostHeader.size()),
                   std::string(request.header("host")));
    request_.set(beast::string_view(kForwardedHeader.data(), kForwardedHeader.size()), "1");
    request_.keep_alive(false);
    request_.body() = request.body;
    request_.prepare_payload();
    parser_.body_limit(kMaxAnswerBytes);
    stream_.expires_after(std::chrono::nanoseconds(timeout_));
    stream_.async_connect(endpoint_of(owner_), [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail("connect: " + ec.message());
      http::async_write(self->stream_, self->request_, [self](beast::error_code ec2, size_t) {
        if (ec2) return self->fail("write: " + ec2.message());
        http::async_read(self->stream_, self->buffer_, self->parser_, [self](beast::error_code ec3, size_t) {
          if (ec3) return self->fail("read: " + ec3.message());
          self->answer();
        });
      });
    });
  }

 private:
  void fail(const std::string& why) {
    unreachable_.fetch_add(1, std::memory_order_relaxed);
    respond_(unreachable(owner_, why));
  }
  void answer() {
    auto& message = parser_.get();
    HttpResponse response;
    response.status = message.result_int();
    const auto content_type = message[http::field::content_type];
    response.content_type.assign(content_type.data(), content_type.size());
    response.body = std::move(message.body());
    for (const auto& field : message) {
      const std::string name(field.name_string()), value(field.value());
      if (passed_back(name)) response.headers.emplace_back(name, value);
    }
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    respond_(std::move(response));
  }

  beast::tcp_stream stream_;
  SocketAddress owner_;
  Nanos timeout_;
  HttpServer::Responder respond_;
  std::atomic<uint64_t>& unreachable_;
  http::request<http::string_body> request_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
};

// A sideband bridged to the owner: the client's WebSocket (the HTTP server's) on one side, ours
// to the owner on the other. State is touched on the forwarder's thread only; the client's
// callbacks hop here.
class Bridge : public std::enable_shared_from_this<Bridge> {
 public:
  Bridge(asio::io_context& io, SocketAddress owner, Nanos timeout, HttpServer::Responder respond,
         std::atomic<uint64_t>& unreachable_count)
      : io_(io),
        upstream_(io),
        owner_(std::move(owner)),
        timeout_(timeout),
        respond_(std::move(respond)),
        unreachable_(unreachable_count) {}

  void run(const HttpRequest& request) {
    target_ = target_of(request);
    for (const auto& [name, value] : request.headers)
      if (!hop_header(name)) headers_.emplace_back(name, value);
    beast::get_lowest_layer(upstream_).expires_after(std::chrono::nanoseconds(timeout_));
    beast::get_lowest_layer(upstream_).async_connect(endpoint_of(owner_),
                                                     [self = shared_from_this()](beast::error_code ec) {
                                                       if (ec) return self->fail("connect: " + ec.message());
                                                       self->handshake();
                                                     });
  }

 private:
  void handshake() {
    upstream_.set_option(websocket::stream_base::decorator([headers = headers_](websocket::request_type& r) {
      for (const auto& [name, value] : headers) r.set(name, value);
      r.set(beast::string_view(kForwardedHeader.data(), kForwardedHeader.size()), "1");
    }));
    upstream_.read_message_max(kMaxMessageBytes);
    upstream_.async_handshake(
        declined_, owner_.to_string(), target_, [self = shared_from_this()](beast::error_code ec) {
          if (ec == websocket::error::upgrade_declined) {
            // The owner's refusal (404, 409, 401...) is the answer, as it came.
            HttpResponse response;
            response.status = self->declined_.result_int();
            const auto content_type = self->declined_[http::field::content_type];
            response.content_type.assign(content_type.data(), content_type.size());
            response.body = self->declined_.body();
            return self->respond_(std::move(response));
          }
          if (ec) return self->fail("handshake: " + ec.message());
          beast::get_lowest_layer(self->upstream_).expires_never();
          self->upstream_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
          self->accept_client();
        });
  }

  void accept_client() {
    WebSocketHandlers handlers;
    auto self = shared_from_this();
    handlers.on_open = [self](std::shared_ptr<WebSocketConnection> client) {
      asio::post(self->io_, [self, client] {
        self->client_ = client;
        if (self->closed_) return client->close(1000, "the owner closed");
        self->read_upstream();
      });
    };
    handlers.on_text = [self](std::string text) {
      asio::post(self->io_,
                 [self, text = std::move(text)]() mutable { self->write_upstream(std::move(text)); });
    };
    handlers.on_closed = [self](uint16_t code, std::string_view reason) {
      asio::post(self->io_,
                 [self, code, reason = std::string(reason)] { self->close_upstream(code, reason); });
    };
    handlers.max_message_bytes = kMaxMessageBytes;
    respond_(HttpResponse::accept_websocket(std::move(handlers)));
  }

  void read_upstream() {
    upstream_.async_read(incoming_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        self->closed_ = true;
        const auto reason = self->upstream_.reason();
        const uint16_t code = reason.code == websocket::close_code::none ? 1011 : reason.code;
        if (self->client_)
          self->client_->close(code, std::string(reason.reason.data(), reason.reason.size()));
        return;
      }
      if (self->client_) self->client_->send_text(beast::buffers_to_string(self->incoming_.data()));
      self->incoming_.consume(self->incoming_.size());
      self->read_upstream();
    });
  }

  void write_upstream(std::string text) {
    if (closed_) return;
    outgoing_.push_back(std::move(text));
    if (outgoing_.size() == 1) write_next();
  }
  void write_next() {
    upstream_.text(true);
    upstream_.async_write(asio::buffer(outgoing_.front()),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return;
                            self->outgoing_.pop_front();
                            if (!self->outgoing_.empty()) self->write_next();
                          });
  }

  void close_upstream(uint16_t code, const std::string& reason) {
    if (closed_) return;
    closed_ = true;
    websocket::close_reason why(code == 1006 || code == 1005 || code < 1000 ? uint16_t{1000} : code);
    why.reason = reason.substr(0, 120);
    upstream_.async_close(why, [self = shared_from_this()](beast::error_code) {});
  }

  void fail(const std::string& why) {
    unreachable_.fetch_add(1, std::memory_order_relaxed);
    respond_(unreachable(owner_, why));
  }

  asio::io_context& io_;
  websocket::stream<beast::tcp_stream> upstream_;
  SocketAddress owner_;
  Nanos timeout_;
  HttpServer::Responder respond_;
  std::atomic<uint64_t>& unreachable_;
  std::string target_;
  std::vector<std::pair<std::string, std::string>> headers_;
  websocket::response_type declined_;
  std::shared_ptr<WebSocketConnection> client_;
  beast::flat_buffer incoming_;
  std::deque<std::string> outgoing_;
  bool closed_ = false;
};

}  // namespace

struct CallForwarder::Impl {
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{asio::make_work_guard(io)};
  std::thread thread;
  Nanos timeout = 0;
};

CallForwarder::CallForwarder(Nanos timeout) : impl_(std::make_shared<Impl>()) {
  impl_->timeout = timeout;
  impl_->thread = std::thread([impl = impl_] { impl->io.run(); });
}

CallForwarder::~CallForwarder() {
  impl_->work.reset();
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void CallForwarder::forward(const HttpRequest& request, const SocketAddress& owner,
                            HttpServer::Responder respond) {
  if (request.websocket_upgrade) {
    stats_.websockets.fetch_add(1, std::memory_order_relaxed);
    auto bridge = std::make_shared<Bridge>(impl_->io, owner, impl_->timeout, std::move(respond),
                                           stats_.owner_unreachable);
    return asio::post(impl_->io, [bridge, request] { bridge->run(request); });
  }
  stats_.requests.fetch_add(1, std::memory_order_relaxed);
  auto exchange = std::make_shared<Exchange>(impl_->io, owner, impl_->timeout, std::move(respond),
                                             stats_.owner_unreachable);
  asio::post(impl_->io, [exchange, request] { exchange->run(request); });
}

}  // namespace rtce
