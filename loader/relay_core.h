// relay_core.h — the userspace relay's per-worker forwarding logic, without sockets.
//
// Inputs are datagrams with their addresses and the monotonic time; outputs are "send
// these bytes to that address" decisions and counters. udp_worker.cpp does the I/O. One
// RelayCore belongs to one worker thread: nothing here locks or allocates per packet.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>

#include "flow_table.h"
#include "net_address.h"
#include "relaxed_counter.h"
#include "rtce_hint.h"
#include "rtce_proxy_v2.h"

namespace rtce {

// Bytes reserved in front of every receive buffer so the PROXY v2 header is prepended in
// place, without copying the payload.
inline constexpr size_t kFramingHeadroom = 64;
static_assert(kFramingHeadroom >= RTCE_PP2_LEN_V6);

enum class DropReason : uint8_t {
  no_flow,                   // non-STUN packet from a client with no flow
  stun_malformed,            // truncated STUN, bad length, bad attribute, bad USERNAME
  stun_not_binding_request,  // STUN, but not a Binding request
  stun_no_username,          // Binding request without USERNAME
  hint_rejected,             // server ufrag is not a valid hint (see HintFailure)
  unknown_endpoint,          // valid hint naming an endpoint this relay does not know
  flow_table_full,           // table full and no flow idle long enough to evict
  return_malformed,          // datagram on the return socket without a valid PROXY v2 header
  return_no_flow,            // framed datagram for a flow this worker does not have
  return_wrong_sender,       // framed datagram from an address that does not own the flow
  oversize,                  // datagram larger than the receive buffer (truncated by the kernel)
  send_error,                // the kernel refused to send (e.g. socket buffer full)
  count
};

enum class HintFailure : uint8_t {
  bad_length,
  bad_char,
  bad_version,
  unknown_key,
  bad_mac,
  wrong_cluster,
  count
};

enum class Direction : uint8_t { client_to_transceiver, transceiver_to_client, count };

const char* drop_reason_name(DropReason r);
const char* hint_failure_name(HintFailure f);
const char* direction_name(Direction d);

struct RelayCounters {
  std::array<RelaxedCounter, static_cast<size_t>(Direction::count)> received_packets;
  std::array<RelaxedCounter, static_cast<size_t>(Direction::count)> forwarded_packets;
  std::array<RelaxedCounter, static_cast<size_t>(Direction::count)> forwarded_bytes;
  std::array<RelaxedCounter, static_cast<size_t>(DropReason::count)> dropped;
  std::array<RelaxedCounter, static_cast<size_t>(HintFailure::count)> hint_failures;
  RelaxedCounter flows_created;
  RelaxedCounter flows_expired;
  RelaxedCounter flows_evicted;
  RelaxedCounter flows_active;

  void drop(DropReason r) { dropped[static_cast<size_t>(r)].add(); }
};

// What the relay knows about transceivers: hint keys, its cluster, the endpoint table.
// Immutable once published; a reload publishes a new one.
struct RoutingTable {
  uint8_t cluster_id = 0;
  rtce_hint_keyset keys{};
  std::unordered_map<uint16_t, sockaddr_in6> endpoints;  // v4-mapped for IPv4
};

struct ToTransceiver {
  const uint8_t* data;  // PROXY v2 header + client payload
  size_t len;
  const sockaddr_in6* endpoint;
};

struct ToClient {
  const uint8_t* data;  // client payload
  size_t len;
  SocketAddress client;
  SocketAddress vip;
  uint16_t vip_socket;
};

class RelayCore {
 public:
  RelayCore(const FlowTable::Options& flow_options, std::shared_ptr<const RoutingTable> routing);

  // Swaps the routing table; existing flows are kept (they carry their endpoint address).
  void set_routing(std::shared_ptr<const RoutingTable> routing) { routing_ = std::move(routing); }

  // A datagram from a client to a VIP. `packet` must have kFramingHeadroom writable bytes
  // before it. Returns the framed datagram to send, or nullopt (dropped and counted).
  std::optional<ToTransceiver> on_client_packet(const SocketAddress& client, const SocketAddress& vip,
                                                uint16_t vip_socket, uint8_t* packet, size_t len, Nanos now);

  // A datagram on the return socket. `from` as received on the dual-stack socket.
  std::optional<ToClient> on_transceiver_packet(const sockaddr_in6& from, const uint8_t* packet, size_t len);

  // Housekeeping: expires idle flows, visiting at most max_slots slots.
  void expire(Nanos now, uint32_t max_slots);

  RelayCounters& counters() { return counters_; }
  const RelayCounters& counters() const { return counters_; }
  FlowTable& flows() { return flows_; }

 private:
  std::optional<ToTransceiver> route_first_packet(const rtce_flow_key& key, uint16_t vip_socket,
                                                  uint8_t* packet, size_t len, Nanos now);
  ToTransceiver frame(const Flow& flow, uint8_t* packet, size_t len);

  FlowTable flows_;
  std::shared_ptr<const RoutingTable> routing_;
  RelayCounters counters_;
};

rtce_flow_key make_flow_key(const SocketAddress& client, const SocketAddress& vip);
bool same_endpoint(const sockaddr_in6& a, const sockaddr_in6& b);

}  // namespace rtce
