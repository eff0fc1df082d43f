// admin_server.cpp — see admin_server.h.
#include "admin_server.h"

#include <prometheus/text_serializer.h>

#include <stdexcept>

#include "http_server.h"

namespace rtce {

struct AdminServer::Impl {
  explicit Impl(const SocketAddress& listen)
      : server(listen, HttpServer::Limits{4096, 8192, 10},
               [this](const HttpRequest& request, HttpServer::Responder respond) {
                 dispatch(request, respond);
               }) {}

  void dispatch(const HttpRequest& request, const HttpServer::Responder& respond) {
    if (request.method != "GET" && request.method != "HEAD")
      return respond(HttpResponse::text(405, "method not allowed"));
    auto it = routes.find(request.path);
    if (it == routes.end()) return respond(HttpResponse::text(404, "not found"));
    HttpReply reply;
    try {
      reply = it->second();
    } catch (const std::exception& e) {
      reply = {500, "text/plain; charset=utf-8", std::string("error: ") + e.what() + "\n"};
    }
    respond(HttpResponse{reply.status, reply.content_type, std::move(reply.body), {}});
  }

  std::map<std::string, Handler> routes;  // filled before start(), read only on the server thread
  HttpServer server;
};

AdminServer::AdminServer(const SocketAddress& listen) : impl_(std::make_unique<Impl>(listen)) {}

AdminServer::~AdminServer() { stop(); }

void AdminServer::route(const std::string& path, Handler handler) {
  impl_->routes[path] = std::move(handler);
}

void AdminServer::start() {
  try {
    impl_->server.start();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("admin server: ") + e.what());
  }
}

void AdminServer::stop() {
  if (impl_) impl_->server.stop();
}

uint16_t AdminServer::port() const { return impl_->server.port(); }

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
