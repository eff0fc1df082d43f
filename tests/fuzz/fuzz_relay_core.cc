// fuzz_relay_core.cc — libFuzzer target for the whole userspace relay decision path
// (loader/relay_core.h): hostile datagrams from clients, on the return socket and on
// peers.listen (the global relay's forwarded flows).
// The first input byte picks the direction and the client; the rest is the datagram.
// The core has a flow store attached: non-STUN misses start lookups, and selector values
// with bit 0x40 answer the oldest pending one (found, missing, or an unknown endpoint).
// Invariants: no crash or out-of-bounds access, the flow table and the waiting pool stay
// within their bounds, and every forwarded datagram is a well-formed frame.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "hint_keys.h"
#include "relay_core.h"

namespace {

// Remembers the lookups the core asks for; puts are accepted and forgotten.
struct QueueOutbox : rtce::FlowStoreOutbox {
  bool put(const rtce_flow_key&, uint16_t) override { return true; }
  bool put_ingress(const rtce_flow_key&, uint8_t) override { return true; }
  bool put_owner(const rtce_flow_key&, uint16_t, const sockaddr_in6&) override { return true; }
  bool lookup(const rtce_flow_key& key) override {
    if (lookups.size() >= 64) return false;
    lookups.push_back(key);
    return true;
  }
  std::deque<rtce_flow_key> lookups;
};

void check_frame(const rtce::ToTransceiver& out, size_t payload_len) {
  rtce_flow_key flow{};
  uint32_t off = 0;
  if (rtce_pp2_parse_key(out.data, static_cast<uint32_t>(out.len), &flow, &off) != RTCE_PP2_OK) abort();
  if (out.len - off != payload_len) abort();
}

struct Harness {
  Harness() {
    keys = std::make_unique<rtce::HintKeys>(
        rtce::HintKeys::parse("keys: [{id: 1, secret: 000102030405060708090a0b0c0d0e0f}]", "fuzz"));
    auto table = std::make_shared<rtce::RoutingTable>();
    table->keys = keys->keyset();
    table->cluster_id = 1;
    table->endpoints[2] = rtce::SocketAddress::parse("198.18.2.2:40002")->to_v6_mapped();
    // The global relay: hints for cluster 2 go to its relay; peers.listen trusts one /24.
    table->peer_clusters[2] =
        rtce::PeerCluster{rtce::SocketAddress::parse("198.18.100.2:3480")->to_v6_mapped(), keys->keyset()};
    table->trusted_peers.push_back(*rtce::IpPrefix::parse("198.18.100.0/24"));
    rtce::FlowTable::Options o;
    o.capacity = 8;
    core = std::make_unique<rtce::RelayCore>(o, table);
    endpoint = table->endpoints[2];
    peer_relay = table->peer_clusters[2].relay;
    rtce::FlowStoreLink link;
    link.outbox = &outbox;
    link.recovery.max_waiting_flows = 4;
    link.recovery.packets_per_flow = 3;
    link.recovery.pool_packets = 8;
    link.recovery.lookups_per_second = 1000;
    link.recovery.lookup_timeout = 50'000'000;
    core->attach_flow_store(link);
  }
  QueueOutbox outbox;
  std::unique_ptr<rtce::HintKeys> keys;
  std::unique_ptr<rtce::RelayCore> core;
  sockaddr_in6 endpoint{};
  sockaddr_in6 peer_relay{};
  rtce::Nanos now = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  if (size < 1 || size > 4096) return 0;
  alignas(8) static uint8_t buffer[rtce::kFramingHeadroom + 4096];
  const uint8_t selector = data[0];
  std::memcpy(buffer + rtce::kFramingHeadroom, data + 1, size - 1);
  h.now += 1'000'000;
  if ((selector & 0xc0) == 0x40 && !h.outbox.lookups.empty()) {
    const rtce_flow_key key = h.outbox.lookups.front();
    h.outbox.lookups.pop_front();
    const uint16_t endpoint_ids[4] = {0, 2, 3, 2};  // missing, known, unknown, known
    // Bit 5: the record of an ingress flow, naming a cluster (2: served, 3: not). Bit 4: of
    // an owner flow, naming the trusted peer that sends (bit 2 clear) or another one.
    const rtce::FlowRole role = selector & 0x20   ? rtce::FlowRole::ingress
                                : selector & 0x10 ? rtce::FlowRole::owner
                                                  : rtce::FlowRole::local;
    const sockaddr_in6 via =
        rtce::SocketAddress::parse(selector & 0x04 ? "198.18.100.9:40100" : "198.18.100.1:40100")
            ->to_v6_mapped();
    // A flow already there (made by a STUN, or by an earlier answer for the same key) keeps
    // its endpoint; otherwise the record's kind says where the packets go.
    const rtce::Flow* existing = h.core->flows().find(key);
    const sockaddr_in6 target = existing                          ? existing->value.endpoint
                                : role == rtce::FlowRole::ingress ? h.peer_relay
                                                                  : h.endpoint;
    for (const rtce::ToTransceiver& out :
         h.core->on_lookup_reply(key, endpoint_ids[selector & 3], h.now, role, &via).packets) {
      rtce_flow_key flow{};
      uint32_t off = 0;
      if (rtce_pp2_parse_key(out.data, static_cast<uint32_t>(out.len), &flow, &off) != RTCE_PP2_OK) abort();
      if (!rtce::same_endpoint(*out.endpoint, target)) abort();
      if (out.len - off > 1500) abort();  // only what fits a waiting slot waits
    }
  } else if (selector & 0x80) {
    auto out = h.core->on_transceiver_packet(h.endpoint, buffer + rtce::kFramingHeadroom, size - 1);
    if (out && out->len > size) abort();
  } else if ((selector & 0x30) == 0x30) {
    // A datagram on peers.listen, from a trusted peer or (bit 0) from outside the range.
    const char* from = selector & 1 ? "198.18.200.1:40100" : "198.18.100.1:40100";
    auto out = h.core->on_peer_packet(rtce::SocketAddress::parse(from)->to_v6_mapped(),
                                      buffer + rtce::kFramingHeadroom, size - 1, h.now);
    if (out && (selector & 1)) abort();  // untrusted: never forwarded
    // Forwarded unchanged: the same bytes, a valid frame.
    if (out && (out->data != buffer + rtce::kFramingHeadroom || out->len != size - 1)) abort();
    rtce_flow_key flow{};
    uint32_t off = 0;
    if (out && rtce_pp2_parse_key(out->data, static_cast<uint32_t>(out->len), &flow, &off) != RTCE_PP2_OK)
      abort();
  } else {
    const std::string client = "198.18.0." + std::to_string(selector & 0x0f) + ":5000";
    auto vip = *rtce::SocketAddress::parse("198.18.0.1:3478");
    auto out = h.core->on_client_packet(*rtce::SocketAddress::parse(client), vip, 0,
                                        buffer + rtce::kFramingHeadroom, size - 1, h.now);
    if (out) check_frame(*out, size - 1);
  }
  if (selector == 0x7f) h.core->expire(h.now + 60'000'000'000, 8);
  if (h.core->flows().size() > h.core->flows().capacity()) abort();
  return 0;
}
