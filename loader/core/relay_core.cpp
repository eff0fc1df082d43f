// relay_core.cpp — see relay_core.h.
#include "relay_core.h"

#include <algorithm>
#include <cstring>

#include "rtce_stun.h"

namespace rtce {

namespace {
uint32_t limit_max(uint32_t configured) { return configured ? configured : RTCE_FLOW_LIMIT_NONE; }
}  // namespace

RelayCore::RelayCore(const FlowTable::Options& flow_options, std::shared_ptr<const RoutingTable> routing,
                     const FlowLimits& limits)
    : flows_(flow_options),
      limits_(limits),
      hint_limits_(flow_options.capacity, limit_max(limits.max_per_hint), limits.window),
      prefix_limits_(flow_options.capacity, limit_max(limits.max_per_source_prefix), limits.window),
      routing_(std::move(routing)) {}

void RelayCore::count_to_transceiver(const Flow& flow, size_t payload_len) {
  counters_.forwarded_packets[static_cast<size_t>(Direction::client_to_transceiver)].add();
  counters_.forwarded_bytes[static_cast<size_t>(Direction::client_to_transceiver)].add(payload_len);
  count_forwarded(flow.value.role, Direction::client_to_transceiver, payload_len);
  if (flow.value.role == FlowRole::ingress)
    counters_
        .peer_packets[static_cast<uint8_t>(flow.value.endpoint_id)]
                     [static_cast<size_t>(Direction::client_to_transceiver)]
        .add();
}

std::optional<ToTransceiver> RelayCore::on_client_packet(const rtce_flow_key& key, uint16_t vip_socket,
                                                         uint8_t* packet, size_t len, Nanos now) {
  counters_.received_packets[static_cast<size_t>(Direction::client_to_transceiver)].add();
  Flow* flow = flows_.find(key);
  if (flow)
    flow->last_seen = now;
  else if (!(flow = route_first_packet(key, vip_socket, packet, len, now)))
    return std::nullopt;
  count_to_transceiver(*flow, len);
  return frame(*flow, packet, len);
}

std::optional<ToTransceiver> RelayCore::on_stream_frame(const rtce_flow_key& key, uint16_t vip_socket,
                                                        uint8_t* frame_bytes, size_t len, Nanos now) {
  counters_.received_packets[static_cast<size_t>(Direction::client_to_transceiver)].add();
  Flow* flow = flows_.find(key);
  if (flow) {
    flow->last_seen = now;
  } else {
    // A connection's flow is its own: never waited for or recovered from the store (the
    // connection ended with the relay that held it), so only a verified check makes it.
    uint32_t ufrag_off = 0, ufrag_len = 0;
    switch (server_ufrag_of(frame_bytes, len, ufrag_off, ufrag_len)) {
      case Check::binding_request: break;
      case Check::not_stun: counters_.drop(DropReason::no_flow); return std::nullopt;
      case Check::dropped: return std::nullopt;
    }
    FlowValue value;
    value.vip_socket = vip_socket;
    flow =
        flow_from_check(key, frame_bytes + ufrag_off, ufrag_len, /*accept_peer_clusters=*/true, value, now);
    if (!flow) return std::nullopt;
  }
  count_to_transceiver(*flow, len);
  return frame(*flow, frame_bytes, len);
}

void RelayCore::forget_flow(const rtce_flow_key& key) {
  if (Flow* flow = flows_.find(key)) {
    flows_.erase(flow);
    counters_.flows_active.set(flows_.size());
  }
}

std::optional<RelayCore::Route> RelayCore::route_hint(const uint8_t* ufrag, uint32_t ufrag_len,
                                                      bool accept_peer_clusters, rtce_hint& hint) {
  const RoutingTable& routing = *routing_;
  rtce_hint_result r = rtce_hint_open(ufrag, ufrag_len, &routing.keys, &hint);
  // The cluster byte is readable whenever the characters decode; a peer cluster may sign
  // with keys of its own, so its hints are verified with those.
  const bool decoded = r == RTCE_HINT_OK || r == RTCE_HINT_UNKNOWN_KEY || r == RTCE_HINT_BAD_MAC;
  const PeerCluster* peer = nullptr;
  if (decoded && hint.cluster_id != routing.cluster_id && accept_peer_clusters) {
    auto it = routing.peer_clusters.find(hint.cluster_id);
    if (it != routing.peer_clusters.end()) {
      peer = &it->second;
      r = rtce_hint_open(ufrag, ufrag_len, &peer->keys, &hint);
    }
  }
  if (r != RTCE_HINT_OK || (hint.cluster_id != routing.cluster_id && !peer)) {
    const HintFailure failure = r != RTCE_HINT_OK ? static_cast<HintFailure>(r) : HintFailure::wrong_cluster;
    counters_.hint_failures[static_cast<size_t>(failure)].add();
    counters_.drop(DropReason::hint_rejected);
    return std::nullopt;
  }
  if (peer) return Route{peer->relay, hint.cluster_id, FlowRole::ingress};
  auto endpoint = routing.endpoints.find(hint.endpoint_id);
  if (endpoint == routing.endpoints.end()) {
    counters_.drop(DropReason::unknown_endpoint);
    return std::nullopt;
  }
  return Route{endpoint->second, hint.endpoint_id, FlowRole::local};
}

void RelayCore::limit_keys(const rtce_hint& hint, const rtce_flow_key& key, rtce_hint_limit_key& hint_key,
                           rtce_prefix_limit_key& prefix_key) const {
  rtce_hint_limit_key_of(&hint, &hint_key);
  rtce_prefix_limit_key_of(
      &key, key.family == RTCE_FAMILY_V6 ? limits_.source_prefix_v6 : limits_.source_prefix_v4, &prefix_key);
}

bool RelayCore::within_flow_limits(const rtce_hint& hint, const rtce_flow_key& key, Nanos now) {
  // Anyone gets a valid hint by POSTing an offer, and may replay it from spoofed sources:
  // bound the flows one hint and one source prefix create (same decision as the XDP
  // program, wire/rtce_flow_limit.h), before the flow can take a slot.
  rtce_hint_limit_key hint_key{};
  rtce_prefix_limit_key prefix_key{};
  limit_keys(hint, key, hint_key, prefix_key);
  if (!hint_limits_.allows(hint_key, now)) {
    counters_.drop(DropReason::hint_flow_limit);
    return false;
  }
  if (!prefix_limits_.allows(prefix_key, now)) {
    counters_.drop(DropReason::source_prefix_flow_limit);
    return false;
  }
  return true;
}

Flow* RelayCore::insert_flow(const rtce_flow_key& key, const rtce_hint& hint, const FlowValue& value,
                             Nanos now) {
  auto inserted = flows_.insert(key, value, now);
  switch (inserted.outcome) {
    case FlowTable::InsertOutcome::full: counters_.drop(DropReason::flow_table_full); return nullptr;
    case FlowTable::InsertOutcome::evicted_idle:
      counters_.flows_evicted.add();
      counters_.flows_created.add();
      break;
    case FlowTable::InsertOutcome::inserted: counters_.flows_created.add(); break;
    case FlowTable::InsertOutcome::updated: break;
  }
  if (inserted.outcome != FlowTable::InsertOutcome::updated) {
    rtce_hint_limit_key hint_key{};
    rtce_prefix_limit_key prefix_key{};
    limit_keys(hint, key, hint_key, prefix_key);
    hint_limits_.charge(hint_key, now);
    prefix_limits_.charge(prefix_key, now);
  }
  counters_.flows_active.set(flows_.size());
  if (store_.outbox && inserted.outcome != FlowTable::InsertOutcome::updated && stored_in_flow_store(key) &&
      put_to_store(key, value)) {
    inserted.flow->stored = now;
    counters_.flow_store_puts.add();
  }
  return inserted.flow;
}

bool RelayCore::put_to_store(const rtce_flow_key& key, const FlowValue& value) {
  // A local flow's record names its endpoint, an ingress flow's the owning cluster (its
  // endpoint_id), an owner flow's its endpoint and the ingress relay it comes from.
  flow_store_activity_ = true;
  switch (value.role) {
    case FlowRole::local: return store_.outbox->put(key, value.endpoint_id);
    case FlowRole::ingress: return store_.outbox->put_ingress(key, static_cast<uint8_t>(value.endpoint_id));
    case FlowRole::owner: return store_.outbox->put_owner(key, value.endpoint_id, value.via);
    default: return false;
  }
}

RelayCore::Check RelayCore::server_ufrag_of(const uint8_t* packet, size_t len, uint32_t& ufrag_off,
                                            uint32_t& ufrag_len) {
  switch (rtce_stun_server_ufrag(packet, static_cast<uint32_t>(len), &ufrag_off, &ufrag_len)) {
    case RTCE_STUN_OK: return Check::binding_request;
    case RTCE_STUN_NOT_STUN: return Check::not_stun;
    case RTCE_STUN_NOT_BINDING_REQUEST: counters_.drop(DropReason::stun_not_binding_request); break;
    case RTCE_STUN_NO_USERNAME: counters_.drop(DropReason::stun_no_username); break;
    default: counters_.drop(DropReason::stun_malformed); break;
  }
  return Check::dropped;
}

Flow* RelayCore::flow_from_check(const rtce_flow_key& key, const uint8_t* ufrag, uint32_t ufrag_len,
                                 bool accept_peer_clusters, FlowValue value, Nanos now) {
  rtce_hint hint{};
  const auto route = route_hint(ufrag, ufrag_len, accept_peer_clusters, hint);
  if (!route || !within_flow_limits(hint, key, now)) return nullptr;
  value.endpoint = route->endpoint;
  value.endpoint_id = route->endpoint_id;
  if (value.role == FlowRole::local) value.role = route->role;
  return insert_flow(key, hint, value, now);
}

Flow* RelayCore::route_first_packet(const rtce_flow_key& key, uint16_t vip_socket, uint8_t* packet,
                                    size_t len, Nanos now) {
  uint32_t ufrag_off = 0, ufrag_len = 0;
  switch (server_ufrag_of(packet, len, ufrag_off, ufrag_len)) {
    case Check::binding_request: break;
    case Check::not_stun: on_miss(key, vip_socket, packet, len, now); return nullptr;
    case Check::dropped: return nullptr;
  }
  FlowValue value;
  value.vip_socket = vip_socket;
  return flow_from_check(key, packet + ufrag_off, ufrag_len, /*accept_peer_clusters=*/true, value, now);
}

std::optional<ToTransceiver> RelayCore::on_peer_packet(const sockaddr_in6& from, uint8_t* packet, size_t len,
                                                       Nanos now) {
  counters_.received_packets[static_cast<size_t>(Direction::client_to_transceiver)].add();
  const RoutingTable& routing = *routing_;
  const SocketAddress sender =
      SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&from), sizeof from);
  const bool trusted = std::any_of(routing.trusted_peers.begin(), routing.trusted_peers.end(),
                                   [&](const IpPrefix& p) { return p.contains(sender); });
  if (!trusted) {
    counters_.drop(DropReason::peer_untrusted);
    return std::nullopt;
  }
  rtce_flow_key key;
  uint32_t payload_off = 0;
  if (rtce_pp2_parse_key(packet, static_cast<uint32_t>(len), &key, &payload_off) != RTCE_PP2_OK) {
    counters_.drop(DropReason::peer_malformed);
    return std::nullopt;
  }
  uint8_t* payload = packet + payload_off;
  const uint32_t payload_len = static_cast<uint32_t>(len - payload_off);
  Flow* flow = flows_.find(key);
  if (flow && (flow->value.role != FlowRole::owner || !same_endpoint(flow->value.via, from))) {
    // Another ingress for the same client and VIP: only a verified check moves the flow there
    // (the client's ingress relay restarted on another address); anything else is refused.
    uint32_t off = 0, ulen = 0;
    rtce_hint hint{};
    if (flow->value.role != FlowRole::owner ||
        rtce_stun_server_ufrag(payload, payload_len, &off, &ulen) != RTCE_STUN_OK ||
        !route_hint(payload + off, ulen, /*accept_peer_clusters=*/false, hint)) {
      counters_.drop(DropReason::peer_wrong_sender);
      return std::nullopt;
    }
    flow->value.via = from;
    // The store's record names the sender a recovery accepts: it moves with the flow.
    if (store_.outbox && stored_in_flow_store(key) && put_to_store(key, flow->value)) {
      flow->stored = now;
      counters_.flow_store_puts.add();
    }
  }
  if (!flow) {
    uint32_t off = 0, ulen = 0;
    switch (server_ufrag_of(payload, payload_len, off, ulen)) {
      case Check::binding_request: break;
      case Check::not_stun: on_miss(key, 0, packet, len, now, &from); return std::nullopt;
      case Check::dropped: return std::nullopt;
    }
    // The ingress verified the hint with this cluster's keys; verifying again costs one
    // SipHash and means a peer can never steer a client anywhere a hint does not say.
    FlowValue value;
    value.role = FlowRole::owner;
    value.via = from;
    flow = flow_from_check(key, payload + off, ulen, /*accept_peer_clusters=*/false, value, now);
    if (!flow) return std::nullopt;
  }
  flow->last_seen = now;
  count_to_transceiver(*flow, payload_len);  // an owner flow's: the client's payload
  return ToTransceiver{packet, len, &flow->value.endpoint};
}

std::optional<ToClient> RelayCore::on_transceiver_packet(const sockaddr_in6& from, const uint8_t* packet,
                                                         size_t len, Nanos now) {
  counters_.received_packets[static_cast<size_t>(Direction::transceiver_to_client)].add();
  rtce_flow_key key;
  uint32_t payload_off = 0;
  if (rtce_pp2_parse_key(packet, static_cast<uint32_t>(len), &key, &payload_off) != RTCE_PP2_OK) {
    counters_.drop(DropReason::return_malformed);
    return std::nullopt;
  }
  Flow* flow = flows_.find(key);
  if (!flow) {
    if (passed_up_) return on_passed_up_return(from, key, packet + payload_off, len - payload_off);
    counters_.drop(DropReason::return_no_flow);
    return std::nullopt;
  }
  if (!same_endpoint(flow->value.endpoint, from)) {
    counters_.drop(DropReason::return_wrong_sender);
    return std::nullopt;
  }
  const size_t payload_len = len - payload_off;
  counters_.forwarded_packets[static_cast<size_t>(Direction::transceiver_to_client)].add();
  counters_.forwarded_bytes[static_cast<size_t>(Direction::transceiver_to_client)].add(payload_len);
  count_forwarded(flow->value.role, Direction::transceiver_to_client, payload_len);
  if (flow->value.role == FlowRole::ingress) {
    const auto cluster = static_cast<uint8_t>(flow->value.endpoint_id);
    counters_.peer_packets[cluster][static_cast<size_t>(Direction::transceiver_to_client)].add();
    counters_.peer_last_reply[cluster].set(static_cast<uint64_t>(now));
  }
  if (flow->value.role == FlowRole::owner)  // framed as the ingress relay wants it: unchanged
    return ToClient{packet, len, key, 0, &flow->value.via};
  return ToClient{packet + payload_off, payload_len, key, flow->value.vip_socket};
}

void RelayCore::attach_passed_up_flows(const PassedUpFlows* flows, std::vector<VipSocketBinding> vips,
                                       uint32_t lookups_per_tick) {
  passed_up_ = flows;
  passed_up_vips_ = std::move(vips);
  passed_up_lookups_per_tick_ = lookups_per_tick;
  passed_up_lookups_left_ = lookups_per_tick;
}

std::optional<ToClient> RelayCore::on_passed_up_return(const sockaddr_in6& from, const rtce_flow_key& key,
                                                       const uint8_t* payload, size_t len) {
  // Not installed into this core's table: the XDP map stays the one owner of the flow (its
  // sweep expires it, its program forwards the client's packets), and a copy here would
  // outlive it. Only the replies the program passes up come this way, until the kernel has
  // resolved the client's neighbour entry.
  if (passed_up_lookups_left_ == 0) {
    counters_.drop(DropReason::return_lookup_rate_limited);
    return std::nullopt;
  }
  passed_up_lookups_left_--;
  sockaddr_in6 endpoint{};
  uint16_t endpoint_id = 0;
  if (!passed_up_->find(key, endpoint, endpoint_id)) {
    counters_.drop(DropReason::return_no_flow);
    return std::nullopt;
  }
  if (!same_endpoint(endpoint, from)) {
    counters_.drop(DropReason::return_wrong_sender);
    return std::nullopt;
  }
  const SocketAddress vip = flow_vip(key);  // a pass-up, after a map lookup: not the hot path
  size_t socket = passed_up_vips_.size();
  for (size_t i = 0; i < passed_up_vips_.size() && socket == passed_up_vips_.size(); i++) {
    const VipSocketBinding& b = passed_up_vips_[i];
    if (b.bound.family() == vip.family() && (b.wildcard ? b.bound.port() == vip.port() : b.bound == vip))
      socket = i;
  }
  if (socket == passed_up_vips_.size()) {
    counters_.drop(DropReason::return_no_flow);  // a VIP this worker does not listen on
    return std::nullopt;
  }
  counters_.returns_passed_up.add();
  counters_.forwarded_packets[static_cast<size_t>(Direction::transceiver_to_client)].add();
  counters_.forwarded_bytes[static_cast<size_t>(Direction::transceiver_to_client)].add(len);
  return ToClient{payload, len, key, static_cast<uint16_t>(socket)};
}

void RelayCore::expire(Nanos now, uint32_t max_slots) {
  passed_up_lookups_left_ = passed_up_lookups_per_tick_;
  const uint32_t n = flows_.expire(now, max_slots);
  if (n) counters_.flows_expired.add(n);
  counters_.flows_active.set(flows_.size());
  if (recovery_) {
    counters_.dropped[static_cast<size_t>(DropReason::flow_lookup_timeout)].add(recovery_->expire(now));
    refresh_stored_flows(now);
  }
}

void RelayCore::set_routing(std::shared_ptr<const RoutingTable> routing) {
  routing_ = std::move(routing);
  uint32_t gone = 0;
  flows_.for_each([&](Flow& f) {
    // An ingress flow's endpoint is the owning cluster's relay; the others' a transceiver.
    const sockaddr_in6* now_at = routing_->route_of(f.value.role, f.value.endpoint_id);
    if (!now_at) {
      flows_.erase(&f);  // slots stay put: erasing the visited flow is safe
      gone++;
    } else if (!same_endpoint(*now_at, f.value.endpoint)) {
      f.value.endpoint = *now_at;
    }
  });
  if (gone) {
    counters_.flows_endpoint_gone.add(gone);
    counters_.flows_active.set(flows_.size());
  }
}

void RelayCore::attach_flow_store(const FlowStoreLink& link) {
  store_ = link;
  FlowRecovery::Options recovery = link.recovery;
  recovery.headroom = std::max(recovery.headroom, kFramingHeadroom);  // frame() writes the header there
  recovery_ = std::make_unique<FlowRecovery>(recovery);
  resumed_.clear();
  resumed_.reserve(recovery.packets_per_flow);  // on_lookup_reply never allocates
}

void RelayCore::on_miss(const rtce_flow_key& key, uint16_t vip_socket, uint8_t* packet, size_t len, Nanos now,
                        const sockaddr_in6* from) {
  if (!recovery_ || !stored_in_flow_store(key)) {
    counters_.drop(DropReason::no_flow);
    return;
  }
  switch (recovery_->on_miss(key, vip_socket, packet, len, now, from)) {
    case FlowRecovery::MissOutcome::lookup_started:
      counters_.packets_waited.add();
      counters_.flow_lookups.add();
      flow_store_activity_ = true;
      store_.outbox->lookup(key);  // a lost request times out like an unanswered one
      break;
    case FlowRecovery::MissOutcome::queued: counters_.packets_waited.add(); break;
    case FlowRecovery::MissOutcome::queue_full: counters_.drop(DropReason::flow_lookup_queue_full); break;
    case FlowRecovery::MissOutcome::rate_limited: counters_.drop(DropReason::flow_lookup_rate_limited); break;
    case FlowRecovery::MissOutcome::known_missing: counters_.drop(DropReason::no_flow); break;
    case FlowRecovery::MissOutcome::wrong_sender: counters_.drop(DropReason::peer_wrong_sender); break;
  }
}

ToTransceiver RelayCore::forward_waited(const Flow& flow, uint8_t* packet, size_t len) {
  if (flow.value.role != FlowRole::owner) {
    count_to_transceiver(flow, len);
    return frame(flow, packet, len);
  }
  // Framed by the ingress relay, parsed when it waited: counted as on_peer_packet counts,
  // the client's payload, and sent on unchanged.
  const size_t header = RTCE_PP2_FIXED_LEN + rtce_load_be16(packet + 14);
  count_to_transceiver(flow, len - header);
  return ToTransceiver{packet, len, &flow.value.endpoint};
}

Flow* RelayCore::install_recovered(const rtce_flow_key& key, FlowRole role, uint16_t endpoint_id,
                                   const sockaddr_in6& target, const sockaddr_in6* via, uint16_t vip_socket,
                                   Nanos now) {
  FlowValue value;
  value.endpoint = target;
  value.endpoint_id = endpoint_id;
  value.role = role;
  if (role == FlowRole::owner)
    value.via = *via;
  else
    value.vip_socket = vip_socket;
  const auto inserted = flows_.insert(key, value, now);
  if (!inserted.flow) return nullptr;
  inserted.flow->stored = now;  // the store has it already
  counters_.flows_recovered.add();
  if (inserted.outcome == FlowTable::InsertOutcome::evicted_idle) counters_.flows_evicted.add();
  counters_.flows_active.set(flows_.size());
  return inserted.flow;
}

LookupResumed RelayCore::on_lookup_reply(const rtce_flow_key& key, uint16_t endpoint_id, Nanos now,
                                         FlowRole role, const sockaddr_in6* via) {
  resumed_.clear();
  if (!recovery_) return {};
  const auto resumed = [&](const Flow* flow) { return LookupResumed{flow, resumed_}; };
  const auto drop_all = [&](bool found, DropReason why) {
    const uint32_t n = recovery_->on_reply(key, found, now, [](const uint8_t*, size_t, uint16_t) {});
    counters_.dropped[static_cast<size_t>(why)].add(n);
  };
  // Packets a peer relay forwarded wait for an owner record that names that relay; a
  // client's packets for a record of theirs. Anything else is not this flow's sender.
  const sockaddr_in6* sender = recovery_->waiting_sender(key);
  const auto sent_by_sender = [&](FlowRole r, const sockaddr_in6* r_via) {
    return sender ? r == FlowRole::owner && r_via && same_endpoint(*r_via, *sender) : r != FlowRole::owner;
  };
  if (Flow* existing = flows_.find(key)) {
    // A STUN created the flow while these packets waited: its hint is newer than the store.
    if (!sent_by_sender(existing->value.role, &existing->value.via)) {
      drop_all(true, DropReason::peer_wrong_sender);
      return resumed(existing);
    }
    recovery_->on_reply(key, true, now, [&](uint8_t* packet, size_t len, uint16_t) {
      resumed_.push_back(forward_waited(*existing, packet, len));
    });
    return resumed(existing);
  }
  if (endpoint_id && !sent_by_sender(role, via)) {
    // Found, but for another sender: not remembered as missing, so the record's own sender
    // still recovers the flow.
    drop_all(true, DropReason::peer_wrong_sender);
    return {};
  }
  // An ingress flow's record names its cluster: it goes to that cluster's relay as
  // peers.clusters has it now, so a flow whose cluster moved while this relay was down
  // follows it.
  const sockaddr_in6* target = routing_->route_of(role, endpoint_id);
  if (!target) {
    // Not found, no answer, or an endpoint (a cluster) this relay does not route to (any
    // more): all remembered as missing, so the flow's next packets do not spend the lookup
    // budget.
    drop_all(false, !endpoint_id                ? DropReason::flow_not_recovered
                    : role == FlowRole::ingress ? DropReason::flow_cluster_gone
                                                : DropReason::unknown_endpoint);
    return {};
  }
  Flow* flow = nullptr;
  bool refused = false;
  recovery_->on_reply(key, true, now, [&](uint8_t* packet, size_t len, uint16_t vip_socket) {
    if (!flow && !refused) {
      flow = install_recovered(key, role, endpoint_id, *target, via, vip_socket, now);
      refused = !flow;
    }
    if (refused)
      counters_.drop(DropReason::flow_table_full);
    else
      resumed_.push_back(forward_waited(*flow, packet, len));
  });
  return resumed(flow);
}

void RelayCore::refresh_stored_flows(Nanos now) {
  // Rewrite (SET with a fresh TTL) flows with client packets since their last write, once
  // per refresh_interval: the store keeps live flows, and a store that lost its data (a
  // Redis restart without persistence) gets them back within one interval.
  uint32_t budget = store_.refresh_per_tick;
  // Slices in proportion to the time since the last call, so that a pass over the whole
  // table takes at most one refresh_interval however short it is set (a fixed slice made a
  // pass take 5 s at a 100 ms tick, whatever the interval).
  const Nanos elapsed = last_refresh_ ? now - last_refresh_ : 0;
  last_refresh_ = now;
  const uint64_t capacity = flows_.capacity();
  uint64_t slots = store_.refresh_interval > 0
                       ? capacity * static_cast<uint64_t>(std::max<Nanos>(elapsed, 0)) /
                                 static_cast<uint64_t>(store_.refresh_interval) +
                             1
                       : capacity;
  slots = std::clamp<uint64_t>(slots, std::min<uint64_t>(capacity, std::max<uint64_t>(256, capacity / 50)),
                               capacity);
  flows_.visit_slots(refresh_cursor_, static_cast<uint32_t>(slots), [&](Flow& f) {
    if (budget == 0 || f.last_seen <= f.stored || now - f.stored < store_.refresh_interval ||
        !stored_in_flow_store(f.key))
      return;
    budget--;
    if (put_to_store(f.key, f.value)) {
      f.stored = now;
      counters_.flow_store_puts.add();
    }
  });
}

}  // namespace rtce
