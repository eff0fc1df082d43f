// global_relay_core_test.cpp — the global relay's two roles in RelayCore, without sockets:
// an ingress relay (cluster 1) forwarding a flow whose hint names cluster 2 to cluster 2's
// relay, which owns it and hands it to its transceiver; replies back the same way; the
// trust rules of peers.listen; forwarding chains refused; reloads of the peer table; ingress
// flows in the flow store (put with their cluster, recovered to its current relay).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hint_keys.h"
#include "relay_core.h"
#include "relay_core_harness.h"
#include "rtce_proxy_v2.h"
#include "stun_payloads.h"

namespace {

using namespace rtce;

constexpr Nanos kSecond = 1'000'000'000;

sockaddr_in6 mapped(const char* text) { return SocketAddress::parse(text)->to_v6_mapped(); }

FlowTable::Options flow_options() { return rtce::testing::small_flow_options(16); }

// What flows into the owner: PROXY v2 (client, ingress VIP) + payload, as bytes.
struct Datagram {
  std::vector<uint8_t> bytes;
};

class GlobalRelayCoreTest : public ::testing::Test, public rtce::testing::FramedBuffer {
 protected:
  GlobalRelayCoreTest()
      : keys1_(HintKeys::generate(1)),
        keys2_(HintKeys::generate(3)),
        ingress_(flow_options(), ingress_routing()),
        owner_(flow_options(), owner_routing()) {}

  std::shared_ptr<RoutingTable> ingress_routing() const {
    auto t = std::make_shared<RoutingTable>();
    t->cluster_id = 1;
    t->keys = keys1_.keyset();
    t->endpoints[1] = mapped("198.18.2.1:40001");
    t->peer_clusters[2] = PeerCluster{mapped(kOwnerPeerListen), keys2_.keyset()};
    return t;
  }
  std::shared_ptr<RoutingTable> owner_routing() const {
    auto t = std::make_shared<RoutingTable>();
    t->cluster_id = 2;
    t->keys = keys2_.keyset();
    t->endpoints[7] = mapped(kOwnerTransceiver);
    t->trusted_peers.push_back(*IpPrefix::parse("198.18.100.0/24"));
    return t;
  }

  std::optional<ToTransceiver> from_client(uint8_t* pkt, Nanos now = 0) {
    return ingress_.on_client_packet(client_, vip_, 0, pkt, len_, now);
  }
  // The ingress's output delivered to the owner's peers.listen from `from`.
  std::optional<ToTransceiver> to_owner(const ToTransceiver& out, const char* from = kIngressReturn,
                                        Nanos now = 0) {
    peer_bytes_.assign(out.data, out.data + out.len);
    return owner_.on_peer_packet(mapped(from), peer_bytes_.data(), peer_bytes_.size(), now);
  }
  std::vector<uint8_t> transceiver_reply(const std::vector<uint8_t>& payload) const {
    rtce_pp2_flow f{};
    f.family = client_.to_bytes(f.client_addr);
    vip_.to_bytes(f.vip_addr);
    f.client_port = client_.port();
    f.vip_port = vip_.port();
    std::vector<uint8_t> framed(rtce_pp2_header_len(f.family));
    rtce_pp2_write(framed.data(), static_cast<uint32_t>(framed.size()), &f);
    framed.insert(framed.end(), payload.begin(), payload.end());
    return framed;
  }
  static uint64_t dropped(const RelayCore& c, DropReason r) {
    return c.counters().dropped[static_cast<size_t>(r)].get();
  }
  static uint64_t role_packets(const RelayCore& c, FlowRole role, Direction d) {
    return c.counters().role_packets[static_cast<size_t>(role)][static_cast<size_t>(d)].get();
  }

  static constexpr const char* kOwnerPeerListen = "198.18.100.2:3480";
  static constexpr const char* kOwnerTransceiver = "198.18.102.7:40007";
  static constexpr const char* kIngressReturn = "198.18.100.1:40100";
  HintKeys keys1_, keys2_;
  RelayCore ingress_, owner_;
  SocketAddress client_ = *SocketAddress::parse("198.18.0.10:50000");
  SocketAddress vip_ = *SocketAddress::parse("198.18.255.1:3478");  // the ingress's VIP
  std::vector<uint8_t> peer_bytes_;
};

TEST_F(GlobalRelayCoreTest, AFlowOfAnotherClusterCrossesBothRelaysAndItsRepliesComeBack) {
  auto out = from_client(binding_request(mint_ufrag(keys2_, 2, 7)));
  ASSERT_TRUE(out);
  EXPECT_TRUE(same_endpoint(*out->endpoint, mapped(kOwnerPeerListen)));
  rtce_pp2_flow pp{};
  uint32_t payload_off = 0;
  ASSERT_EQ(rtce_pp2_parse(out->data, static_cast<uint32_t>(out->len), &pp, &payload_off), RTCE_PP2_OK);
  EXPECT_EQ(SocketAddress::from_bytes(pp.family, pp.client_addr, pp.client_port), client_);
  EXPECT_EQ(SocketAddress::from_bytes(pp.family, pp.vip_addr, pp.vip_port), vip_);

  // The owner hands the datagram to its transceiver unchanged: the framing is already what
  // the transceiver reads (the client and the VIP it used, as if it had come here directly).
  const std::vector<uint8_t> sent(out->data, out->data + out->len);
  auto owned = to_owner(*out);
  ASSERT_TRUE(owned);
  EXPECT_TRUE(same_endpoint(*owned->endpoint, mapped(kOwnerTransceiver)));
  EXPECT_EQ(std::vector<uint8_t>(owned->data, owned->data + owned->len), sent);

  // Reply: transceiver -> owner (framed) -> the ingress, unchanged -> client, stripped.
  auto reply = transceiver_reply({0x01, 0x01, 0x00, 0x00});
  auto back = owner_.on_transceiver_packet(mapped(kOwnerTransceiver), reply.data(), reply.size());
  ASSERT_TRUE(back);
  ASSERT_NE(back->peer, nullptr);
  EXPECT_TRUE(same_endpoint(*back->peer, mapped(kIngressReturn)));
  EXPECT_EQ(std::vector<uint8_t>(back->data, back->data + back->len), reply);
  std::vector<uint8_t> relayed(back->data, back->data + back->len);
  auto to_client = ingress_.on_transceiver_packet(mapped(kOwnerPeerListen), relayed.data(), relayed.size());
  ASSERT_TRUE(to_client);
  EXPECT_EQ(to_client->peer, nullptr);
  EXPECT_EQ(to_client->len, 4u);
  EXPECT_EQ(to_client->client(), client_);
  EXPECT_EQ(to_client->vip(), vip_);

  // Later media follows the flows in both relays without a hint.
  auto media = from_client(load({0x80, 0x6f, 0x00, 0x02, 0xee}), kSecond);
  ASSERT_TRUE(media);
  ASSERT_TRUE(to_owner(*media, kIngressReturn, kSecond));

  EXPECT_EQ(role_packets(ingress_, FlowRole::ingress, Direction::client_to_transceiver), 2u);
  EXPECT_EQ(role_packets(ingress_, FlowRole::ingress, Direction::transceiver_to_client), 1u);
  EXPECT_EQ(role_packets(owner_, FlowRole::owner, Direction::client_to_transceiver), 2u);
  EXPECT_EQ(role_packets(owner_, FlowRole::owner, Direction::transceiver_to_client), 1u);
  EXPECT_EQ(role_packets(ingress_, FlowRole::local, Direction::client_to_transceiver), 0u);
  EXPECT_EQ(ingress_.flows().size(), 1u);
  EXPECT_EQ(owner_.flows().size(), 1u);
}

TEST_F(GlobalRelayCoreTest, ALocalHintStaysLocal) {
  auto out = from_client(binding_request(mint_ufrag(keys1_, 1, 1)));
  ASSERT_TRUE(out);
  EXPECT_TRUE(same_endpoint(*out->endpoint, mapped("198.18.2.1:40001")));
  EXPECT_EQ(role_packets(ingress_, FlowRole::local, Direction::client_to_transceiver), 1u);
}

TEST_F(GlobalRelayCoreTest, AHintForAClusterNobodyServesIsCountedAndLeavesNoState) {
  // Signed with a key this relay holds (a fleet-wide key), for cluster 3: wrong_cluster.
  EXPECT_FALSE(from_client(binding_request(mint_ufrag(keys1_, 3, 7))));
  EXPECT_EQ(ingress_.counters().hint_failures[static_cast<size_t>(HintFailure::wrong_cluster)].get(), 1u);
  // With a key it does not hold: it cannot tell the cluster from a forgery.
  EXPECT_FALSE(from_client(binding_request(mint_ufrag(HintKeys::generate(9), 3, 7))));
  EXPECT_EQ(ingress_.counters().hint_failures[static_cast<size_t>(HintFailure::unknown_key)].get(), 1u);
  EXPECT_EQ(dropped(ingress_, DropReason::hint_rejected), 2u);
  EXPECT_EQ(ingress_.flows().size(), 0u);
}

TEST_F(GlobalRelayCoreTest, APeerClustersHintIsVerifiedWithThatClustersKeys) {
  // Signed with the ingress's own keys but naming cluster 2: cluster 2 signs with others.
  EXPECT_FALSE(from_client(binding_request(mint_ufrag(keys1_, 2, 7))));
  const uint64_t bad = ingress_.counters().hint_failures[static_cast<size_t>(HintFailure::bad_mac)].get() +
                       ingress_.counters().hint_failures[static_cast<size_t>(HintFailure::unknown_key)].get();
  EXPECT_EQ(bad, 1u);
  EXPECT_EQ(ingress_.flows().size(), 0u);
}

TEST_F(GlobalRelayCoreTest, PeersListenTakesOnlyTrustedWellFramedDatagrams) {
  auto out = from_client(binding_request(mint_ufrag(keys2_, 2, 7)));
  ASSERT_TRUE(out);
  EXPECT_FALSE(to_owner(*out, "198.18.200.1:40100"));  // outside peers.trusted
  EXPECT_EQ(dropped(owner_, DropReason::peer_untrusted), 1u);
  EXPECT_EQ(owner_.flows().size(), 0u);

  std::vector<uint8_t> junk = {0x0d, 0x0a, 0x0d, 0x0a, 0x00};
  EXPECT_FALSE(owner_.on_peer_packet(mapped(kIngressReturn), junk.data(), junk.size(), 0));
  EXPECT_EQ(dropped(owner_, DropReason::peer_malformed), 1u);

  // A framed non-STUN datagram of a flow the owner does not have.
  auto media = transceiver_reply({0x80, 0x6f, 0x00, 0x01});
  EXPECT_FALSE(owner_.on_peer_packet(mapped(kIngressReturn), media.data(), media.size(), 0));
  EXPECT_EQ(dropped(owner_, DropReason::no_flow), 1u);
  EXPECT_EQ(owner_.flows().size(), 0u);
}

TEST_F(GlobalRelayCoreTest, OnlyAVerifiedCheckMovesAFlowToAnotherIngress) {
  auto out = from_client(binding_request(mint_ufrag(keys2_, 2, 7)));
  ASSERT_TRUE(out);
  const std::vector<uint8_t> check(out->data, out->data + out->len);
  ASSERT_TRUE(to_owner(*out));
  // Media for the flow from another (trusted) peer: refused.
  auto media = from_client(load({0x80, 0x6f, 0x00, 0x03}));
  ASSERT_TRUE(media);
  EXPECT_FALSE(to_owner(*media, "198.18.100.9:40100"));
  EXPECT_EQ(dropped(owner_, DropReason::peer_wrong_sender), 1u);
  // The same client's check arriving from that peer (its ingress restarted elsewhere) moves it.
  peer_bytes_ = check;
  ASSERT_TRUE(owner_.on_peer_packet(mapped("198.18.100.9:40100"), peer_bytes_.data(), peer_bytes_.size(), 0));
  auto reply = transceiver_reply({0x01});
  auto back = owner_.on_transceiver_packet(mapped(kOwnerTransceiver), reply.data(), reply.size());
  ASSERT_TRUE(back);
  EXPECT_TRUE(same_endpoint(*back->peer, mapped("198.18.100.9:40100")));
}

TEST_F(GlobalRelayCoreTest, TheOwnerDoesNotForwardFurther) {
  // A peer forwarding a hint of a third cluster (or the ingress's own) to the owner: no chains.
  uint8_t* stun = binding_request(mint_ufrag(keys2_, 1, 1));
  std::vector<uint8_t> framed = transceiver_reply(std::vector<uint8_t>(stun, stun + len_));
  EXPECT_FALSE(owner_.on_peer_packet(mapped(kIngressReturn), framed.data(), framed.size(), 0));
  EXPECT_EQ(owner_.counters().hint_failures[static_cast<size_t>(HintFailure::wrong_cluster)].get(), 1u);
  EXPECT_EQ(owner_.flows().size(), 0u);
}

TEST_F(GlobalRelayCoreTest, IngressFlowsFollowTheirClustersRelayAcrossReloads) {
  ASSERT_TRUE(from_client(binding_request(mint_ufrag(keys2_, 2, 7))));
  auto moved = ingress_routing();
  moved->peer_clusters[2].relay = mapped("198.18.100.22:3480");
  ingress_.set_routing(moved);
  EXPECT_EQ(ingress_.flows().size(), 1u);
  auto media = from_client(load({0x80, 0x6f, 0x00, 0x04}));
  ASSERT_TRUE(media);
  EXPECT_TRUE(same_endpoint(*media->endpoint, mapped("198.18.100.22:3480")));

  auto gone = ingress_routing();
  gone->peer_clusters.clear();
  ingress_.set_routing(gone);
  EXPECT_EQ(ingress_.flows().size(), 0u);
  EXPECT_EQ(ingress_.counters().flows_endpoint_gone.get(), 1u);
}

// ---- Ingress flows in the flow store (docs/global-relay.md, "Flow store"). ----

// Records the core's flow store traffic, by kind of record.
class RecordingOutbox : public FlowStoreOutbox {
 public:
  struct Put {
    rtce_flow_key key;
    uint16_t id;
    bool ingress;
    bool owner = false;
    sockaddr_in6 via{};
  };
  bool put(const rtce_flow_key& key, uint16_t endpoint_id) override {
    puts.push_back({key, endpoint_id, false});
    return true;
  }
  bool put_ingress(const rtce_flow_key& key, uint8_t cluster) override {
    puts.push_back({key, cluster, true});
    return true;
  }
  bool put_owner(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& via) override {
    puts.push_back({key, endpoint_id, false, true, via});
    return true;
  }
  bool lookup(const rtce_flow_key& key) override {
    lookups.push_back(key);
    return true;
  }
  std::vector<Put> puts;
  std::vector<rtce_flow_key> lookups;
};

class GlobalRelayFlowStoreTest : public GlobalRelayCoreTest {
 protected:
  GlobalRelayFlowStoreTest() {
    ingress_.attach_flow_store(link());
    owner_.attach_flow_store(link());
  }
  FlowStoreLink link() {
    FlowStoreLink l;
    l.outbox = &outbox_;
    l.recovery.max_waiting_flows = 4;
    l.recovery.packets_per_flow = 4;
    l.recovery.pool_packets = 16;
    l.recovery.lookups_per_second = 100;
    l.refresh_interval = 10 * kSecond;
    return l;
  }
  // The ingress relay after a restart: an empty table, the same routing and store.
  RelayCore& restarted(std::shared_ptr<RoutingTable> routing = nullptr) {
    fresh_ = std::make_unique<RelayCore>(flow_options(), routing ? routing : ingress_routing());
    fresh_->attach_flow_store(link());
    return *fresh_;
  }
  std::optional<ToTransceiver> media(RelayCore& core, uint8_t seq, Nanos now) {
    uint8_t* p = load({0x80, 0x6f, 0x00, seq, 'm'});
    return core.on_client_packet(client_, vip_, 0, p, len_, now);
  }
  // The store's answer for the client's flow, as the flow sync delivers it.
  const Flow* answer(RelayCore& core, uint16_t id, FlowRole role, Nanos now,
                     const sockaddr_in6* via = nullptr) {
    const LookupResumed resumed = core.on_lookup_reply(make_flow_key(client_, vip_), id, now, role, via);
    for (const ToTransceiver& out : resumed.packets)
      sent_.push_back({std::vector<uint8_t>(out.data, out.data + out.len), *out.endpoint});
    return resumed.flow;
  }
  // The owner after a restart: an empty table, the same routing and store.
  RelayCore& restarted_owner() {
    fresh_ = std::make_unique<RelayCore>(flow_options(), owner_routing());
    fresh_->attach_flow_store(link());
    return *fresh_;
  }
  // A media datagram of the client's flow as the ingress forwards it, delivered to `owner`
  // from `from`; `forwarded` keeps the bytes the ingress sent.
  std::optional<ToTransceiver> peer_media(RelayCore& owner, const char* from, uint8_t seq, Nanos now) {
    auto out = media(ingress_, seq, now);
    if (!out) return std::nullopt;
    forwarded_.assign(out->data, out->data + out->len);
    peer_bytes_ = forwarded_;
    return owner.on_peer_packet(mapped(from), peer_bytes_.data(), peer_bytes_.size(), now);
  }
  std::vector<uint8_t> forwarded_;

  struct Sent {
    std::vector<uint8_t> bytes;
    sockaddr_in6 to;
  };
  RecordingOutbox outbox_;
  std::unique_ptr<RelayCore> fresh_;
  std::vector<Sent> sent_;
};

TEST_F(GlobalRelayFlowStoreTest, AnIngressFlowIsStoredWithItsClusterAndAnOwnerFlowWithItsIngress) {
  auto out = from_client(binding_request(mint_ufrag(keys2_, 2, 7)), 10 * kSecond);
  ASSERT_TRUE(out);
  ASSERT_EQ(outbox_.puts.size(), 1u);
  EXPECT_TRUE(outbox_.puts[0].ingress);
  EXPECT_EQ(outbox_.puts[0].id, 2u);  // the cluster, not an endpoint, not an address
  EXPECT_TRUE(outbox_.puts[0].key == make_flow_key(client_, vip_));
  ASSERT_TRUE(to_owner(*out, kIngressReturn, 10 * kSecond));
  ASSERT_EQ(outbox_.puts.size(), 2u) << "the owner did not store its flow";
  EXPECT_TRUE(outbox_.puts[1].owner);
  EXPECT_EQ(outbox_.puts[1].id, 7u);  // the endpoint, and the one ingress it may come from
  EXPECT_TRUE(same_endpoint(outbox_.puts[1].via, mapped(kIngressReturn)));
  EXPECT_TRUE(outbox_.puts[1].key == make_flow_key(client_, vip_));
  EXPECT_EQ(owner_.counters().flow_store_puts.get(), 1u);

  // Refreshed like a local flow: media since the last write, one interval later.
  ASSERT_TRUE(media(ingress_, 1, 15 * kSecond));
  ingress_.expire(21 * kSecond, 16);
  ASSERT_EQ(outbox_.puts.size(), 3u);
  EXPECT_TRUE(outbox_.puts[2].ingress);
  EXPECT_EQ(outbox_.puts[2].id, 2u);
  ASSERT_TRUE(peer_media(owner_, kIngressReturn, 2, 15 * kSecond));
  owner_.expire(21 * kSecond, 16);
  ASSERT_EQ(outbox_.puts.size(), 4u);
  EXPECT_TRUE(outbox_.puts[3].owner);
  EXPECT_TRUE(same_endpoint(outbox_.puts[3].via, mapped(kIngressReturn)));
}

TEST_F(GlobalRelayFlowStoreTest, ARestartedOwnerForwardsMediaFromTheRecordsIngressBeforeAnyCheck) {
  auto out = from_client(binding_request(mint_ufrag(keys2_, 2, 7)), kSecond);
  ASSERT_TRUE(out);
  ASSERT_TRUE(to_owner(*out, kIngressReturn, kSecond));
  RelayCore& owner = restarted_owner();
  EXPECT_FALSE(peer_media(owner, kIngressReturn, 1, 2 * kSecond));
  const std::vector<uint8_t> first = forwarded_;
  EXPECT_FALSE(peer_media(owner, kIngressReturn, 2, 2 * kSecond));
  ASSERT_EQ(outbox_.lookups.size(), 1u);
  const sockaddr_in6 via = mapped(kIngressReturn);
  const Flow* flow = answer(owner, 7, FlowRole::owner, 2 * kSecond + 1, &via);
  ASSERT_NE(flow, nullptr);
  EXPECT_EQ(flow->value.role, FlowRole::owner);
  EXPECT_TRUE(same_endpoint(flow->value.via, via));
  EXPECT_EQ(owner.counters().flows_recovered.get(), 1u);
  // Both datagrams that waited go to the transceiver as the ingress framed them, in order.
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[0].bytes, first);
  EXPECT_EQ(sent_[1].bytes, forwarded_);
  for (const auto& s : sent_) EXPECT_TRUE(same_endpoint(s.to, mapped(kOwnerTransceiver)));
  EXPECT_EQ(role_packets(owner, FlowRole::owner, Direction::client_to_transceiver), 2u);
  // The transceiver's replies go back to that ingress unchanged; the rest is a table hit.
  auto reply = transceiver_reply({0x80, 0x6f, 0x00, 0x09});
  auto back = owner.on_transceiver_packet(mapped(kOwnerTransceiver), reply.data(), reply.size(), 3 * kSecond);
  ASSERT_TRUE(back);
  ASSERT_NE(back->peer, nullptr);
  EXPECT_TRUE(same_endpoint(*back->peer, via));
  EXPECT_EQ(back->len, reply.size());
  EXPECT_TRUE(peer_media(owner, kIngressReturn, 3, 3 * kSecond));
}

TEST_F(GlobalRelayFlowStoreTest, ARecoveredOwnerFlowBelongsToTheIngressItsRecordNames) {
  auto out = from_client(binding_request(mint_ufrag(keys2_, 2, 7)), kSecond);
  ASSERT_TRUE(out);
  RelayCore& owner = restarted_owner();
  // Another trusted relay sends the client's media first: it waits, and a third sender's
  // datagram cannot join it.
  constexpr const char* kOtherIngress = "198.18.100.9:40100";
  EXPECT_FALSE(peer_media(owner, kOtherIngress, 1, 2 * kSecond));
  EXPECT_FALSE(peer_media(owner, kIngressReturn, 2, 2 * kSecond));
  EXPECT_EQ(dropped(owner, DropReason::peer_wrong_sender), 1u);
  // The record names kIngressReturn: the other relay's datagram is refused, no flow.
  const sockaddr_in6 via = mapped(kIngressReturn);
  EXPECT_EQ(answer(owner, 7, FlowRole::owner, 2 * kSecond, &via), nullptr);
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(owner.flows().size(), 0u);
  EXPECT_EQ(dropped(owner, DropReason::peer_wrong_sender), 2u);
  // Not remembered as missing: the record's own sender recovers the flow.
  EXPECT_FALSE(peer_media(owner, kIngressReturn, 3, 2 * kSecond + 1));
  ASSERT_EQ(outbox_.lookups.size(), 2u);
  ASSERT_NE(answer(owner, 7, FlowRole::owner, 2 * kSecond + 2, &via), nullptr);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].bytes, forwarded_);
  // A local record for a forwarded datagram is not an owner flow either.
  RelayCore& again = restarted_owner();
  EXPECT_FALSE(peer_media(again, kIngressReturn, 4, 3 * kSecond));
  EXPECT_EQ(answer(again, 7, FlowRole::local, 3 * kSecond), nullptr);
  EXPECT_EQ(again.flows().size(), 0u);
}

TEST_F(GlobalRelayFlowStoreTest, AnOwnerFlowThatMovesToAnotherIngressIsStoredAgainWithIt) {
  auto out = from_client(binding_request(mint_ufrag(keys2_, 2, 7)), kSecond);
  ASSERT_TRUE(out);
  ASSERT_TRUE(to_owner(*out, kIngressReturn, kSecond));
  ASSERT_EQ(outbox_.puts.size(), 2u);
  // The client's ingress relay came back on another address: its verified check moves the
  // flow, and the record follows at once (a recovery accepts only the record's sender).
  constexpr const char* kMovedIngress = "198.18.100.1:40200";
  auto check = from_client(binding_request(mint_ufrag(keys2_, 2, 7)), 2 * kSecond);
  ASSERT_TRUE(check);
  ASSERT_TRUE(to_owner(*check, kMovedIngress, 2 * kSecond));
  ASSERT_EQ(outbox_.puts.size(), 3u);
  EXPECT_TRUE(outbox_.puts[2].owner);
  EXPECT_TRUE(same_endpoint(outbox_.puts[2].via, mapped(kMovedIngress)));
}

TEST_F(GlobalRelayFlowStoreTest, ARestartedIngressForwardsMediaFromTheStoreBeforeAnyCheck) {
  RelayCore& core = restarted();
  EXPECT_FALSE(media(core, 1, kSecond));
  EXPECT_FALSE(media(core, 2, kSecond));
  ASSERT_EQ(outbox_.lookups.size(), 1u);
  const Flow* flow = answer(core, 2, FlowRole::ingress, kSecond + 1);
  ASSERT_NE(flow, nullptr);
  EXPECT_EQ(flow->value.role, FlowRole::ingress);
  EXPECT_EQ(flow->value.endpoint_id, 2u);
  EXPECT_EQ(core.counters().flows_recovered.get(), 1u);
  // Both packets that waited go to cluster 2's relay, framed (client, VIP), in order.
  ASSERT_EQ(sent_.size(), 2u);
  for (size_t i = 0; i < sent_.size(); i++) {
    EXPECT_TRUE(same_endpoint(sent_[i].to, mapped(kOwnerPeerListen)));
    rtce_pp2_flow pp{};
    uint32_t off = 0;
    ASSERT_EQ(rtce_pp2_parse(sent_[i].bytes.data(), static_cast<uint32_t>(sent_[i].bytes.size()), &pp, &off),
              RTCE_PP2_OK);
    EXPECT_EQ(SocketAddress::from_bytes(pp.family, pp.client_addr, pp.client_port), client_);
    EXPECT_EQ(SocketAddress::from_bytes(pp.family, pp.vip_addr, pp.vip_port), vip_);
    EXPECT_EQ(sent_[i].bytes[off + 3], i + 1);
  }
  EXPECT_EQ(role_packets(core, FlowRole::ingress, Direction::client_to_transceiver), 2u);
  EXPECT_EQ(core.counters().peer_packets[2][static_cast<size_t>(Direction::client_to_transceiver)].get(), 2u);
  // The rest of the call is a table hit; the owner's replies are accepted and stripped.
  auto next = media(core, 3, 2 * kSecond);
  ASSERT_TRUE(next);
  EXPECT_TRUE(same_endpoint(*next->endpoint, mapped(kOwnerPeerListen)));
  auto reply = transceiver_reply({0x80, 0x6f, 0x00, 0x09});
  auto back = core.on_transceiver_packet(mapped(kOwnerPeerListen), reply.data(), reply.size(), 2 * kSecond);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->peer, nullptr);
  EXPECT_EQ(back->client(), client_);
  EXPECT_EQ(back->len, 4u);
  EXPECT_EQ(outbox_.puts.size(), 0u) << "a recovered flow is in the store already";
}

TEST_F(GlobalRelayFlowStoreTest, ARecoveredIngressFlowGoesToItsClustersRelayAsConfiguredNow) {
  // Cluster 2's relay moved while this relay was down: the record names the cluster, so the
  // flow follows it; a reload after that re-points it again, like a live flow.
  auto moved = ingress_routing();
  moved->peer_clusters[2].relay = mapped("198.18.100.22:3480");
  RelayCore& core = restarted(moved);
  EXPECT_FALSE(media(core, 1, kSecond));
  ASSERT_NE(answer(core, 2, FlowRole::ingress, kSecond), nullptr);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_TRUE(same_endpoint(sent_[0].to, mapped("198.18.100.22:3480")));
  auto again = ingress_routing();
  again->peer_clusters[2].relay = mapped("198.18.100.23:3480");
  core.set_routing(again);
  auto next = media(core, 2, kSecond);
  ASSERT_TRUE(next);
  EXPECT_TRUE(same_endpoint(*next->endpoint, mapped("198.18.100.23:3480")));
}

TEST_F(GlobalRelayFlowStoreTest, ARecordOfAClusterNoLongerServedIsSkippedAndCounted) {
  auto without = ingress_routing();
  without->peer_clusters.clear();
  RelayCore& core = restarted(without);
  EXPECT_FALSE(media(core, 1, kSecond));
  EXPECT_FALSE(media(core, 2, kSecond));
  EXPECT_EQ(answer(core, 2, FlowRole::ingress, kSecond), nullptr);
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(core.flows().size(), 0u);
  EXPECT_EQ(dropped(core, DropReason::flow_cluster_gone), 2u);
  EXPECT_EQ(dropped(core, DropReason::unknown_endpoint), 0u);
  // Remembered as missing: the flow's next packet asks the store no more.
  EXPECT_FALSE(media(core, 3, kSecond + 1));
  EXPECT_EQ(outbox_.lookups.size(), 1u);
  EXPECT_EQ(dropped(core, DropReason::no_flow), 1u);
}

TEST_F(GlobalRelayFlowStoreTest, ALocalRecordIsNotReadAsACluster) {
  // Endpoint 2 of this cluster does not exist; cluster 2 does. A local record names an
  // endpoint, so it must not land on cluster 2's relay.
  RelayCore& core = restarted();
  EXPECT_FALSE(media(core, 1, kSecond));
  EXPECT_EQ(answer(core, 2, FlowRole::local, kSecond), nullptr);
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(dropped(core, DropReason::unknown_endpoint), 1u);
}

}  // namespace
