// sync_types.h — the values the registry and the flow store exchange (endpoint records,
// flow keys) and the counters both implementations keep, so that metrics and tests read
// one shape whichever backend is configured.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "flow_key.h"
#include "net_address.h"
#include "relaxed_counter.h"

namespace rtce {

// The 16-bit transceiver endpoint id carried in hints and in the BPF maps; 0 means none.
using EndpointId = uint16_t;

struct EndpointRecord {
  EndpointId id = 0;
  SocketAddress address;
  uint32_t capacity = 0;
  uint32_t load = 0;
  bool draining = false;
  // A transceiver endpoint's signaling API, "host:port" (its pod's HTTP listener): where any
  // pod forwards a request for a call this endpoint owns. "" = none (a relay ignores it).
  std::string signaling{};

  friend bool operator==(const EndpointRecord&, const EndpointRecord&) = default;
};

enum class RegistryChange { kAdded, kUpdated, kRemoved };

struct RegistryEvent {
  RegistryChange change = RegistryChange::kAdded;
  EndpointRecord record;  // for kRemoved: the last known record
};

// A relayed flow is keyed by the one flow key, struct rtce_flow_key (wire/rtce_flow.h):
// the client's address, the VIP it sent to, the transport.

// What a flow store record says about its flow (docs/redis.md, "Flow records"): a
// transceiver endpoint of this cluster (a `local` flow; the only record of version 1),
// another cluster whose relay owns the flow (an `ingress` flow of the global relay; the
// cluster, not its relay's address, is stored, so a recovered flow goes wherever that
// cluster's relay is now, peers.clusters), or a transceiver endpoint of this cluster that a
// peer's ingress relay forwards to (an `owner` flow: `via` is that relay's address, the one
// sender the recovered flow may come from, as the trust model wants).
// The record's kind is the role of the flow at the relay that wrote it (common/flow_key.h).
struct FlowRecord {
  FlowRole role = FlowRole::local;
  uint16_t id = 0;    // endpoint id (local, owner) or cluster id (ingress, 1..255)
  SocketAddress via;  // owner only: the ingress relay's address

  FlowRecord() = default;
  // Implicit: an endpoint id is the version-1 record, and what most callers store.
  FlowRecord(EndpointId endpoint) : id(endpoint) {}  // NOLINT(google-explicit-constructor)
  static FlowRecord peer_cluster(uint8_t cluster) {
    FlowRecord r;
    r.role = FlowRole::ingress;
    r.id = cluster;
    return r;
  }
  static FlowRecord owner(EndpointId endpoint, const SocketAddress& via) {
    FlowRecord r;
    r.role = FlowRole::owner;
    r.id = endpoint;
    r.via = via;
    return r;
  }

  friend bool operator==(const FlowRecord&, const FlowRecord&) = default;
};

struct FlowEntry {
  rtce_flow_key key;
  FlowRecord record;
};

// Written on the owner's io_context thread only; read from anywhere (metrics scrape).
struct SyncCounters {
  RelaxedCounter commands_sent;   // commands handed to the server (or the memory store)
  RelaxedCounter replies;         // replies received, error replies included
  RelaxedCounter errors;          // error replies, failed connects, commands lost to a disconnect
  RelaxedCounter timeouts;        // commands that got no reply within the command timeout
  RelaxedCounter reconnects;      // successful connects after the first one
  RelaxedCounter dropped;         // commands refused because the pending queue was full
  RelaxedCounter tls_errors;      // TLS setups and handshakes that failed (also counted in errors)
  RelaxedCounter redirects;       // Cluster: MOVED and ASK replies followed
  RelaxedCounter master_changes;  // Sentinel: a master other than the last one found
};

// How one asynchronous operation ended, for callers that care about more than ok/not ok.
enum class SyncStatus { kOk, kError, kDisconnected, kTimeout, kDropped };

using DoneCallback = std::function<void(bool ok)>;
using Millis = std::chrono::milliseconds;

}  // namespace rtce
