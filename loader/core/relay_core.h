// relay_core.h — the userspace relay's per-worker forwarding logic, without sockets.
//
// Inputs are datagrams with their addresses and the monotonic time; outputs are "send
// these bytes to that address" decisions and counters. udp_worker.cpp does the I/O. One
// RelayCore belongs to one worker thread: nothing here locks or allocates per packet.
#pragma once

#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "flow_key.h"
#include "flow_recovery.h"
#include "flow_table.h"
#include "net_address.h"
#include "relaxed_counter.h"
#include "rtce_hint.h"
#include "rtce_proxy_v2.h"
#include "rtce_relay_vocab.h"
#include "vocab.h"

namespace rtce {

// Bytes reserved in front of every receive buffer so the PROXY v2 header is prepended in
// place, without copying the payload.
inline constexpr size_t kFramingHeadroom = 64;
static_assert(kFramingHeadroom >= RTCE_PP2_LEN_V6);

// UDP GSO needs equal-size datagrams, so the relay pads a framed datagram for a transceiver
// (a PROXY v2 NOOP TLV) up to its size class: four classes per power of two, at least 32
// bytes apart, so padding adds less than one such step (a 228-byte datagram: 28 bytes to
// 256; a 1228-byte one: 52 to 1280). Returns the padded length, never above max_len: len
// itself when it is a class already, when it is max_len or longer, or when it is 1 or 2
// bytes short (no TLV is that short: it goes unpadded, in a GSO message only with datagrams
// of its exact length). A padded length pads to itself: padding twice adds nothing.
inline size_t gso_padded_length(size_t len, size_t max_len) {
  if (len == 0 || len >= max_len) return len;
  const size_t step = std::max<size_t>(32, std::bit_floor(len) / 4);
  const size_t padded = std::min((len + step - 1) / step * step, max_len);
  return padded - len >= RTCE_PP2_TLV_HEADER_LEN ? padded : len;
}
// The most gso_padded_length adds for a max_len: under a step of the highest octave (the
// head room a padded header needs).
inline size_t gso_max_padding(size_t max_len) { return std::max<size_t>(32, std::bit_floor(max_len) / 4); }
// The C++ face of the relay's vocabularies (wire/rtce_relay_vocab.h, wire/rtce_hint.h):
// the same values, so a counter index is the wire enum's value, and the same labels.
#define RTCE_DROP_REASON_(E, name) name = RTCE_RELAY_DROP_##E,
#define RTCE_HINT_FAILURE_(E, name) name = RTCE_HINT_##E,
#define RTCE_DIRECTION_(E, name) name = RTCE_XDP_DIR_##E,
enum class DropReason : uint8_t { RTCE_RELAY_DROP_REASONS(RTCE_DROP_REASON_) count = RTCE_RELAY_DROP_COUNT };
// Why a first packet's hint was rejected: an error of rtce_hint_open is its own
// rtce_hint_result value (so value 0, ok, is never counted), then wrong_cluster. The XDP
// program's hint_failures map has the same layout.
enum class HintFailure : uint8_t { RTCE_HINT_FAILURES(RTCE_HINT_FAILURE_) count = RTCE_HINT_FAILURE_SLOTS };
enum class Direction : uint8_t { RTCE_RELAY_DIRECTIONS(RTCE_DIRECTION_) count = RTCE_XDP_DIR_COUNT };
#undef RTCE_DROP_REASON_
#undef RTCE_HINT_FAILURE_
#undef RTCE_DIRECTION_

// Every value of each, in order, for the loops that export them.
#define RTCE_VOCAB_VALUE_(E, name) DropReason::name,
inline constexpr DropReason kDropReasons[] = {RTCE_RELAY_DROP_REASONS(RTCE_VOCAB_VALUE_)};
#undef RTCE_VOCAB_VALUE_
#define RTCE_VOCAB_VALUE_(E, name) HintFailure::name,
inline constexpr HintFailure kHintFailures[] = {RTCE_HINT_FAILURES(RTCE_VOCAB_VALUE_)};
#undef RTCE_VOCAB_VALUE_
#define RTCE_VOCAB_VALUE_(E, name) Direction::name,
inline constexpr Direction kDirections[] = {RTCE_RELAY_DIRECTIONS(RTCE_VOCAB_VALUE_)};
#undef RTCE_VOCAB_VALUE_

inline const char* drop_reason_name(DropReason r) { return vocab_name(rtce_relay_drop_reason_names, r); }
inline const char* hint_failure_name(HintFailure f) { return vocab_name(rtce_hint_failure_names, f); }
inline const char* direction_name(Direction d) { return vocab_name(rtce_xdp_direction_names, d); }

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
  RelaxedCounter flows_recovered;      // installed from a flow store lookup
  RelaxedCounter flows_endpoint_gone;  // removed because their endpoint left the routing table
  RelaxedCounter flow_lookups;         // lookups this worker asked the flow store for
  RelaxedCounter flow_store_puts;      // new and refreshed flows handed to the flow store
  RelaxedCounter packets_waited;       // packets that waited for a lookup (forwarded or not)
  RelaxedCounter returns_passed_up;    // replies of XDP flows the program passed up, sent here
  // UDP GSO towards transceivers (the worker's, not the core's: counted here to be exported
  // with the rest): messages and the datagrams in them, padding bytes added, and GSO messages
  // the kernel refused (sent again one by one).
  RelaxedCounter gso_messages;
  RelaxedCounter gso_datagrams;
  RelaxedCounter gso_padding_bytes;
  RelaxedCounter gso_fallbacks;
  // Forwarded, by flow role and direction (the global relay's view of the same traffic).
  std::array<std::array<RelaxedCounter, static_cast<size_t>(Direction::count)>,
             static_cast<size_t>(FlowRole::count)>
      role_packets;
  std::array<std::array<RelaxedCounter, static_cast<size_t>(Direction::count)>,
             static_cast<size_t>(FlowRole::count)>
      role_bytes;
  // Ingress role, per peer cluster (the owning cluster's relay): datagrams each way, and the
  // monotonic time of its last reply (0 = none yet): the peer's health as this relay sees it.
  std::array<std::array<RelaxedCounter, static_cast<size_t>(Direction::count)>, 256> peer_packets;
  std::array<RelaxedCounter, 256> peer_last_reply;

  void drop(DropReason r) { dropped[static_cast<size_t>(r)].add(); }
};

// What the relay knows about transceivers: hint keys, its cluster, the endpoint table.
// Immutable once published; a reload publishes a new one.
// Another cluster this relay is an ingress for (docs/global-relay.md): where its relay takes
// forwarded flows (peers.listen there), and the keys its transceivers sign hints with.
struct PeerCluster {
  sockaddr_in6 relay{};  // v4-mapped for IPv4
  rtce_hint_keyset keys{};
};

struct RoutingTable {
  uint8_t cluster_id = 0;
  rtce_hint_keyset keys{};
  std::unordered_map<uint16_t, sockaddr_in6> endpoints;    // v4-mapped for IPv4
  std::unordered_map<uint8_t, PeerCluster> peer_clusters;  // cluster id -> its relay
  std::vector<IpPrefix> trusted_peers;                     // who may send forwarded flows (peers.trusted)

  // Where a flow of `role` whose id is `id` goes now: an ingress flow to its owning
  // cluster's relay (id = the cluster), the others to this cluster's endpoint `id`.
  // nullptr when the table has no such endpoint or cluster (or id is 0).
  const sockaddr_in6* route_of(FlowRole role, uint16_t id) const {
    if (id == 0) return nullptr;
    if (role == FlowRole::ingress) {
      const auto peer = peer_clusters.find(static_cast<uint8_t>(id));
      return peer != peer_clusters.end() ? &peer->second.relay : nullptr;
    }
    const auto endpoint = endpoints.find(id);
    return endpoint != endpoints.end() ? &endpoint->second : nullptr;
  }
};

struct ToTransceiver {
  const uint8_t* data;  // PROXY v2 header + client payload
  size_t len;
  const sockaddr_in6* endpoint;
};

struct ToClient {
  const uint8_t* data;  // client payload; the whole framed datagram when `peer` is set
  size_t len;
  rtce_flow_key key;  // the flow: the client it goes to, the VIP it leaves from
  uint16_t vip_socket;
  // Owner role: the client entered at this peer relay; send `data` there unchanged, from
  // the peers.listen socket (the ingress relay strips the framing and answers from its VIP).
  const sockaddr_in6* peer = nullptr;

  SocketAddress client() const { return flow_client(key); }
  SocketAddress vip() const { return flow_vip(key); }
};

// What a flow store reply resumed (RelayCore::on_lookup_reply): the flow it installed or
// found (nullptr if none), and the packets that waited for it, framed and counted, to send
// now (they live in the core's recovery pool until its next miss).
struct LookupResumed {
  const Flow* flow = nullptr;
  std::span<const ToTransceiver> packets;
};

// Where RelayCore hands work for the shared flow store (FlowSyncChannel in the relay, a
// recorder in tests). Both calls return at once; false = not accepted (counted by the
// implementation).
class FlowStoreOutbox {
 public:
  virtual ~FlowStoreOutbox() = default;
  virtual bool put(const rtce_flow_key& key, uint16_t endpoint_id) = 0;
  // An ingress flow of the global relay: the record names the owning cluster, which a
  // recovery resolves to that cluster's relay as peers.clusters has it then. An outbox that
  // keeps no such records refuses them.
  virtual bool put_ingress(const rtce_flow_key& key, uint8_t cluster) {
    (void)key;
    (void)cluster;
    return false;
  }
  // An owner flow: this cluster's endpoint and the ingress relay the flow comes from, the
  // one sender a recovery accepts for it.
  virtual bool put_owner(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& via) {
    (void)key;
    (void)endpoint_id;
    (void)via;
    return false;
  }
  virtual bool lookup(const rtce_flow_key& key) = 0;
};

struct FlowStoreLink {
  FlowStoreOutbox* outbox = nullptr;
  FlowRecovery::Options recovery;
  Nanos refresh_interval = 40'000'000'000;
  uint32_t refresh_per_tick = 1000;  // bounds the refresh rate per worker and housekeeping tick
};

// Flows a worker did not create but answers for: the XDP program's flows map. The program
// passes a reply up to the kernel when it cannot send it itself (no neighbour entry for an
// on-link client yet, no route, PROXY v2 TLVs, no UDP checksum); the kernel delivers it to
// the workers' sockets on xdp.return_port, and sending it from a socket also makes the
// kernel resolve the neighbour, so the flow's next replies take the fast path again.
// Implemented by the XDP data path; find() is a map lookup (a syscall), which is why the
// core calls it only on a return-path miss and at most a bounded number of times per tick.
class PassedUpFlows {
 public:
  virtual ~PassedUpFlows() = default;
  // The flow's endpoint (v4-mapped for IPv4) and id; false if the map has no such flow.
  virtual bool find(const rtce_flow_key& key, sockaddr_in6& endpoint, uint16_t& endpoint_id) const = 0;
};

// A VIP socket of the worker, for replies of flows it did not create (PassedUpFlows): the
// socket the reply leaves from is the one bound to the flow's VIP, or a wildcard on its port.
struct VipSocketBinding {
  SocketAddress bound;
  bool wildcard = false;
};

// Bounds on the flows one hint and one client prefix may create per window
// (wire/rtce_flow_limit.h; the flows.max_per_hint ... keys). Each worker applies them to
// the flows it creates: a hint replayed across all workers gets at most
// workers x max_per_hint flows per window. 0 = no limit.
struct FlowLimits {
  uint32_t max_per_hint = RTCE_FLOW_LIMIT_DEFAULT_PER_HINT;
  uint32_t max_per_source_prefix = RTCE_FLOW_LIMIT_DEFAULT_PER_SOURCE_PREFIX;
  Nanos window = static_cast<Nanos>(RTCE_FLOW_LIMIT_DEFAULT_WINDOW_NS);
  uint8_t source_prefix_v4 = RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V4;
  uint8_t source_prefix_v6 = RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V6;
  bool operator==(const FlowLimits&) const = default;
};

class RelayCore {
 public:
  RelayCore(const FlowTable::Options& flow_options, std::shared_ptr<const RoutingTable> routing,
            const FlowLimits& limits = {});

  // Swaps the routing table. Flows keep going where they went, except flows of an endpoint
  // the new table no longer has (removed: its sessions are gone) and flows of an endpoint
  // whose address changed (they follow it).
  void set_routing(std::shared_ptr<const RoutingTable> routing);

  // Connects the shared flow store: new flows are put, active flows refreshed every
  // refresh_interval, and non-STUN packets of unknown flows wait for a lookup.
  void attach_flow_store(const FlowStoreLink& link);
  bool has_flow_store() const { return recovery_ != nullptr; }

  // The flow store's answer for `key` (endpoint_id 0: no such flow, or no answer; with
  // role ingress, endpoint_id is the owning cluster; with role owner, `via` is the ingress
  // relay the record names, which must be the sender of the packets that waited). Returns
  // the packets that waited, to forward, and the flow it installed or found, so the caller
  // can mirror it (into the XDP flows map, say): the shape of Envoy's continueFilterChain.
  LookupResumed on_lookup_reply(const rtce_flow_key& key, uint16_t endpoint_id, Nanos now,
                                FlowRole role = FlowRole::local, const sockaddr_in6* via = nullptr);

  // True once since the last call if this core handed the outbox anything (the caller
  // then wakes the flow sync once per batch).
  bool take_flow_store_activity() {
    const bool was = flow_store_activity_;
    flow_store_activity_ = false;
    return was;
  }

  // A datagram of flow `key` from a client to a VIP. `packet` must have kFramingHeadroom
  // writable bytes before it. Returns the framed datagram to send, or nullopt (dropped and
  // counted).
  std::optional<ToTransceiver> on_client_packet(const rtce_flow_key& key, uint16_t vip_socket,
                                                uint8_t* packet, size_t len, Nanos now);
  std::optional<ToTransceiver> on_client_packet(const SocketAddress& client, const SocketAddress& vip,
                                                uint16_t vip_socket, uint8_t* packet, size_t len, Nanos now) {
    return on_client_packet(make_flow_key(client, vip), vip_socket, packet, len, now);
  }

  // A frame of an ICE-TCP connection (tcp_streams.h) of flow `key` (transport TCP), with
  // kFramingHeadroom writable bytes before it. Like on_client_packet, except that a frame of
  // an unknown flow must be a Binding request with a valid hint (else dropped and counted):
  // a connection's flow is never looked up in or written to the flow store. nullopt = no
  // flow (the caller closes the connection).
  std::optional<ToTransceiver> on_stream_frame(const rtce_flow_key& key, uint16_t vip_socket,
                                               uint8_t* frame_bytes, size_t len, Nanos now);
  // Removes a flow whose connection closed.
  void forget_flow(const rtce_flow_key& key);

  // A datagram on peers.listen: PROXY v2 (client, the VIP it used) + client payload from
  // the ingress relay of another cluster. The framing is the one this relay would write,
  // so the datagram goes on to the transceiver unchanged. Returns it, or nullopt (counted).
  std::optional<ToTransceiver> on_peer_packet(const sockaddr_in6& from, uint8_t* packet, size_t len,
                                              Nanos now);

  // A datagram on the return socket. `from` as received on the dual-stack socket.
  // `now` (the batch's clock read) dates replies of peer clusters (peer_last_reply).
  std::optional<ToClient> on_transceiver_packet(const sockaddr_in6& from, const uint8_t* packet, size_t len,
                                                Nanos now = 0);

  // Answers replies of flows this core does not have from `flows` (the XDP flows map),
  // sending them from the matching socket of `vips`; at most lookups_per_tick lookups
  // between two expire() calls. `flows` must outlive the core.
  void attach_passed_up_flows(const PassedUpFlows* flows, std::vector<VipSocketBinding> vips,
                              uint32_t lookups_per_tick);

  // Housekeeping: expires idle flows, visiting at most max_slots slots.
  void expire(Nanos now, uint32_t max_slots);

  RelayCounters& counters() { return counters_; }
  const RelayCounters& counters() const { return counters_; }
  FlowTable& flows() { return flows_; }

 private:
  // A client's first packet of an unknown flow: the flow its check made (nullptr: dropped
  // and counted, or waiting for a flow store lookup).
  Flow* route_first_packet(const rtce_flow_key& key, uint16_t vip_socket, uint8_t* packet, size_t len,
                           Nanos now);
  // Copies the flow's PROXY v2 header in front of the payload.
  static ToTransceiver frame(const Flow& flow, uint8_t* packet, size_t len) {
    uint8_t* start = packet - flow.framing_len;
    std::memcpy(start, flow.framing, flow.framing_len);
    return ToTransceiver{start, flow.framing_len + len, &flow.value.endpoint};
  }
  // Counts a datagram of `flow` forwarded towards its transceiver (`payload_len`: the
  // client's payload).
  void count_to_transceiver(const Flow& flow, size_t payload_len);
  // Where a verified hint's flow goes: this cluster's endpoint, or another cluster's relay.
  struct Route {
    sockaddr_in6 endpoint;
    uint16_t endpoint_id;
    FlowRole role;
  };
  // Opens the hint in a first packet's ufrag and finds its route; nullopt = dropped and
  // counted. `accept_peer_clusters`: false on the owner's path (no forwarding chains).
  std::optional<Route> route_hint(const uint8_t* ufrag, uint32_t ufrag_len, bool accept_peer_clusters,
                                  rtce_hint& hint);
  bool within_flow_limits(const rtce_hint& hint, const rtce_flow_key& key, Nanos now);
  void limit_keys(const rtce_hint& hint, const rtce_flow_key& key, rtce_hint_limit_key& hint_key,
                  rtce_prefix_limit_key& prefix_key) const;
  // Inserts a first packet's flow and charges its limits; nullptr = refused (counted).
  Flow* insert_flow(const rtce_flow_key& key, const rtce_hint& hint, const FlowValue& value, Nanos now);
  // What a first packet is: a Binding request (its server ufrag's offset and length), not
  // STUN (the caller decides), or dropped and counted.
  enum class Check : uint8_t { binding_request, not_stun, dropped };
  Check server_ufrag_of(const uint8_t* packet, size_t len, uint32_t& ufrag_off, uint32_t& ufrag_len);
  // The flow a first check's hint makes: `value` with the route's endpoint (and role, unless
  // the caller set one); nullptr when the hint, the limits or the table refuse it (counted).
  Flow* flow_from_check(const rtce_flow_key& key, const uint8_t* ufrag, uint32_t ufrag_len,
                        bool accept_peer_clusters, FlowValue value, Nanos now);
  void count_forwarded(FlowRole role, Direction d, size_t bytes) {
    counters_.role_packets[static_cast<size_t>(role)][static_cast<size_t>(d)].add();
    counters_.role_bytes[static_cast<size_t>(role)][static_cast<size_t>(d)].add(bytes);
  }

  // A non-STUN packet of an unknown flow: waits for a flow store lookup, or is dropped
  // (counted). `from`: the peer relay of a forwarded datagram (owner role), else nullptr.
  void on_miss(const rtce_flow_key& key, uint16_t vip_socket, uint8_t* packet, size_t len, Nanos now,
               const sockaddr_in6* from = nullptr);
  void refresh_stored_flows(Nanos now);
  // UDP flows only: a TCP flow lives and ends with its connection, which no other relay
  // can take over.
  static bool stored_in_flow_store(const rtce_flow_key& key) { return key.transport == RTCE_TRANSPORT_UDP; }
  // Hands a flow to the flow store by its role; true if the outbox took it.
  bool put_to_store(const rtce_flow_key& key, const FlowValue& value);
  std::optional<ToClient> on_passed_up_return(const sockaddr_in6& from, const rtce_flow_key& key,
                                              const uint8_t* payload, size_t len);
  // Installs a flow the store named for packets that waited; nullptr when the table refuses
  // it (counted).
  Flow* install_recovered(const rtce_flow_key& key, FlowRole role, uint16_t endpoint_id,
                          const sockaddr_in6& target, const sockaddr_in6* via, uint16_t vip_socket,
                          Nanos now);
  // Frames a packet that waited for a lookup and counts it forwarded. An owner flow's
  // packets came framed by the ingress relay and go on unchanged.
  ToTransceiver forward_waited(const Flow& flow, uint8_t* packet, size_t len);

  FlowTable flows_;
  FlowLimits limits_;
  FlowLimitTable hint_limits_;
  FlowLimitTable prefix_limits_;
  std::shared_ptr<const RoutingTable> routing_;
  RelayCounters counters_;
  FlowStoreLink store_;
  std::unique_ptr<FlowRecovery> recovery_;
  uint32_t refresh_cursor_ = 0;
  Nanos last_refresh_ = 0;
  bool flow_store_activity_ = false;
  const PassedUpFlows* passed_up_ = nullptr;
  std::vector<VipSocketBinding> passed_up_vips_;
  uint32_t passed_up_lookups_per_tick_ = 0;
  uint32_t passed_up_lookups_left_ = 0;
  std::vector<ToTransceiver> resumed_;  // on_lookup_reply's packets, sized once
};

}  // namespace rtce
