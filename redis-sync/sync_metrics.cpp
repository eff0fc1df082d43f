// sync_metrics.cpp — see sync_metrics.h.
#include "sync_metrics.h"

namespace rtce {

void add_sync_events(MetricsText& m, const std::string& name, const std::string& what, const SyncCounters& sc,
                     double extra_dropped) {
  auto& family = m.family(name,
                          what +
                              " client events: errors (error replies, failed connects, commands lost to a "
                              "disconnect), timeouts, reconnects, requests dropped because a queue was full, "
                              "TLS handshakes that failed, Redis Cluster redirects followed, and Sentinel "
                              "master changes.",
                          prometheus::MetricType::Counter);
  const auto add = [&](double value, const char* event) { m.add(family, value, {{"event", event}}); };
  add(static_cast<double>(sc.errors.get()), "error");
  add(static_cast<double>(sc.timeouts.get()), "timeout");
  add(static_cast<double>(sc.reconnects.get()), "reconnect");
  add(static_cast<double>(sc.dropped.get()) + extra_dropped, "dropped");
  add(static_cast<double>(sc.tls_errors.get()), "tls_error");
  add(static_cast<double>(sc.redirects.get()), "redirect");
  add(static_cast<double>(sc.master_changes.get()), "master_change");
}

}  // namespace rtce
