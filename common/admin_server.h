// admin_server.h — the small HTTP server every rtcedge process runs for operators:
// /metrics (Prometheus text), /healthz, /readyz. Boost.Beast on its own thread, so a
// slow scraper never touches a media thread.
#pragma once

#include <prometheus/metric_family.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_server.h"
#include "net_address.h"

namespace rtce {

struct HttpReply {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class AdminServer {
 public:
  using Handler = std::function<HttpReply()>;

  explicit AdminServer(const SocketAddress& listen);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  void route(const std::string& path, Handler handler);
  // Binds and starts serving; throws std::runtime_error when the address is unusable.
  void start();
  void stop();
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Builds Prometheus metric families for a scrape.
class MetricsText {
 public:
  prometheus::MetricFamily& family(const std::string& name, const std::string& help,
                                   prometheus::MetricType type);
  void add(prometheus::MetricFamily& family, double value,
           std::vector<prometheus::ClientMetric::Label> labels = {});
  std::string serialize() const;

 private:
  std::deque<prometheus::MetricFamily> families_;  // stable references while building
};

// The families every HTTP server exports about itself (rtcedge_http_*), labelled
// server="<server>" ("admin", "signaling"): defined once, for every binary.
void add_http_server_metrics(MetricsText& metrics, const std::string& server, const HttpServer::Stats& stats);

}  // namespace rtce
