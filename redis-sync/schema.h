// schema.h — the Redis key layout of one cluster (docs/redis.md, "Key layout") and the
// text forms of the values stored under it. The registry's keys carry the hash tag
// {c<cluster>}: they live in one Redis Cluster slot, so its Lua scripts may touch them
// together. Flow keys carry none: one flow per key, single-key commands only, so they
// hash over every slot and a cluster's flows spread over all its shards.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sync_types.h"

namespace rtce {

class RedisSchema {
 public:
  explicit RedisSchema(uint8_t cluster);

  const std::string& prefix() const { return prefix_; }  // "rtce:{c<cluster>}:"
  std::string endpoint_key(EndpointId id) const;         // hash: address capacity load draining
  std::string endpoint_key_prefix() const;               // endpoint_key without the id
  std::string endpoint_set_key() const;                  // set of registered ids
  std::string endpoint_ids_key() const;                  // hash: "pod:<identity>" -> "base:count", "next"
  std::string events_channel() const;                    // pub/sub channel of registry changes
  // Sorted set of this cluster's relay peers.listen addresses ("ip:port"), scored by their
  // expiry in Redis's clock (ms): where other clusters' ingress relays forward (global relay).
  std::string ingress_key() const;
  // Counter of the calls one ek_ key made in the fleet (its principal, call_access.h); it
  // expires with the key.
  std::string key_calls_key(std::string_view principal) const;
  // string: the call id (rtc_…) that answered a provider's phone call (its CallSid), EX TTL.
  std::string provider_call_key(std::string_view provider, std::string_view provider_call_id) const;
  const std::string& flow_prefix() const { return flow_prefix_; }  // "rtce:c<cluster>:flow:"
  std::string flow_key(const rtce_flow_key& key) const;            // string: endpoint id, PX TTL
  // flow_key into a reused buffer, without the allocations of SocketAddress::to_string
  // (the write path formats one key per new flow).
  void format_flow_key(const rtce_flow_key& key, std::string& out) const;
  std::string flow_pattern() const;  // SCAN MATCH pattern of flow keys
  // Inverse of flow_key; nullopt for a key of another layout.
  std::optional<rtce_flow_key> parse_flow_key(std::string_view redis_key) const;

 private:
  std::string prefix_;
  std::string flow_prefix_;
};

// Strict decimal parse of an endpoint id (1..65535).
std::optional<EndpointId> parse_endpoint_id(std::string_view text);

// The text of a flow record, the value of a flow key (docs/redis.md, "Flow records"): an
// endpoint as its decimal id (version 1, which every relay reads), a peer cluster as
// "c<cluster>" (version 2), an owner flow as "o<endpoint>@<ingress ip:port>" (version 3).
// An older relay reads a later kind as no flow, so mixed fleets degrade to a STUN-recovered
// flow, never to a wrong one.
std::string format_flow_record(const FlowRecord& record);
void append_flow_record(const FlowRecord& record, std::string& out);
// Inverse of format_flow_record; nullopt for anything else (a record of a later version).
std::optional<FlowRecord> parse_flow_record(std::string_view text);

}  // namespace rtce
