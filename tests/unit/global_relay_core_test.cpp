// global_relay_core_test.cpp — the global relay's two roles in RelayCore, without sockets:
// an ingress relay (cluster 1) forwarding a flow whose hint names cluster 2 to cluster 2's
// relay, which owns it and hands it to its transceiver; replies back the same way; the
// trust rules of peers.listen; forwarding chains refused; reloads of the peer table.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "hint_keys.h"
#include "relay_core.h"
#include "rtce_proxy_v2.h"

namespace {

using namespace rtce;

constexpr Nanos kSecond = 1'000'000'000;

sockaddr_in6 mapped(const char* text) { return SocketAddress::parse(text)->to_v6_mapped(); }

FlowTable::Options flow_options() {
  FlowTable::Options o;
  o.capacity = 16;
  o.idle_timeout = 30 * kSecond;
  o.evict_idle_after = 5 * kSecond;
  o.eviction_sample = 4;
  return o;
}

// What flows into the owner: PROXY v2 (client, ingress VIP) + payload, as bytes.
struct Datagram {
  std::vector<uint8_t> bytes;
};

class GlobalRelayCoreTest : public ::testing::Test {
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

  // A Binding request with USERNAME "<ufrag>:cl", in a buffer with framing headroom.
  uint8_t* binding_request(const std::string& ufrag) {
    std::string user = ufrag + ":cl";
    std::vector<uint8_t> p = {0x00, 0x01, 0, 0, 0x21, 0x12, 0xa4, 0x42};
    for (int i = 0; i < 12; i++) p.push_back(static_cast<uint8_t>(i));
    p.insert(p.end(), {0x00, 0x06, 0, static_cast<uint8_t>(user.size())});
    p.insert(p.end(), user.begin(), user.end());
    while (p.size() % 4) p.push_back(0);
    p[3] = static_cast<uint8_t>(p.size() - 20);
    return load(p);
  }
  uint8_t* load(const std::vector<uint8_t>& bytes) {
    std::memcpy(buffer_ + kFramingHeadroom, bytes.data(), bytes.size());
    len_ = bytes.size();
    return buffer_ + kFramingHeadroom;
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
  alignas(8) uint8_t buffer_[2048] = {};
  size_t len_ = 0;
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
  EXPECT_EQ(to_client->client, client_);
  EXPECT_EQ(to_client->vip, vip_);

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

}  // namespace
