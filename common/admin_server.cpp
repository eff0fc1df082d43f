// admin_server.cpp — see admin_server.h.
#include "admin_server.h"

#include <prometheus/text_serializer.h>

#include <stdexcept>

#include "http_server.h"

namespace rtce {

struct AdminServer::Impl {
  explicit Impl(const SocketAddress& listen)
      : server(listen,
               HttpServer::Limits{.max_body_bytes = 4096,
                                  .max_header_bytes = 8192,
                                  .max_target_bytes = 4096,
                                  .idle_timeout_s = 10},
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
    // The server's own connection metrics join every /metrics scrape, whoever owns the route.
    if (request.path == "/metrics" && reply.status == 200) {
      MetricsText own;
      add_http_server_metrics(own, "admin", server.stats());
      reply.body += own.serialize();
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

void add_http_server_metrics(MetricsText& m, const std::string& server, const HttpServer::Stats& stats) {
  using prometheus::MetricType;
  const std::vector<prometheus::ClientMetric::Label> labels = {{"server", server}};
  auto& open = m.family("rtcedge_http_connections_open", "open HTTP connections", MetricType::Gauge);
  m.add(open, static_cast<double>(stats.connections_open.load(std::memory_order_relaxed)), labels);
  auto& evicted = m.family("rtcedge_http_connections_evicted_total",
                           "idle HTTP connections closed to make room, by reason", MetricType::Counter);
  m.add(evicted, static_cast<double>(stats.evicted_at_cap.load(std::memory_order_relaxed)),
        {{"server", server}, {"reason", "at_cap"}});
  m.add(evicted, static_cast<double>(stats.evicted_out_of_descriptors.load(std::memory_order_relaxed)),
        {{"server", server}, {"reason", "out_of_descriptors"}});
  auto& refused = m.family("rtcedge_http_connections_refused_total",
                           "new HTTP connections closed at once: at the cap with every connection busy",
                           MetricType::Counter);
  m.add(refused, static_cast<double>(stats.refused_at_cap.load(std::memory_order_relaxed)), labels);
  auto& pauses = m.family("rtcedge_http_accept_pauses_total",
                          "times accept failed with no connection to close and waited before retrying",
                          MetricType::Counter);
  m.add(pauses, static_cast<double>(stats.accept_pauses.load(std::memory_order_relaxed)), labels);
  auto& ws_open = m.family("rtcedge_http_websockets_open",
                           "open WebSockets, handshakes included (not in rtcedge_http_connections_open)",
                           MetricType::Gauge);
  m.add(ws_open, static_cast<double>(stats.websockets_open.load(std::memory_order_relaxed)), labels);
  auto& ws_accepted = m.family("rtcedge_http_websockets_accepted_total", "WebSocket handshakes completed",
                               MetricType::Counter);
  m.add(ws_accepted, static_cast<double>(stats.websockets_accepted.load(std::memory_order_relaxed)), labels);
  auto& ws_refused =
      m.family("rtcedge_http_websockets_refused_total",
               "WebSocket upgrades answered 503 because max_websockets were open", MetricType::Counter);
  m.add(ws_refused, static_cast<double>(stats.websockets_refused_at_cap.load(std::memory_order_relaxed)),
        labels);
}

std::string MetricsText::serialize() const {
  return prometheus::TextSerializer().Serialize({families_.begin(), families_.end()});
}

}  // namespace rtce
