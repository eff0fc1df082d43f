// sync_metrics.h — the Prometheus view of a Redis client's SyncCounters, one event
// vocabulary for every client a binary runs (the relay's flow store and registry, the
// transceiver's registry): error, timeout, reconnect, dropped, tls_error, redirect,
// master_change (docs/operations.md).
#pragma once

#include <string>

#include "admin_server.h"
#include "sync_types.h"

namespace rtce {

// `<name>` (a counter family, labelled `event`) from the counters; extra_dropped adds
// requests the caller dropped before they reached the client (its own queues).
void add_sync_events(MetricsText& m, const std::string& name, const std::string& what, const SyncCounters& sc,
                     double extra_dropped = 0);

}  // namespace rtce
