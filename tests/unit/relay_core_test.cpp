// relay_core_test.cpp — the userspace relay's decisions without sockets: first-packet
// routing by hint, the flow fast path, the return path, and every counted drop.
#include "relay_core.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "hint_keys.h"
#include "rtce_proxy_v2.h"
#include "test_support.h"

namespace {

using namespace rtce;

constexpr Nanos kSecond = 1'000'000'000;

class RelayCoreTest : public ::testing::Test {
 protected:
  RelayCoreTest() : keys_(HintKeys::generate(1)), core_(flow_options(), routing(keys_, 0)) {}

  static FlowTable::Options flow_options() {
    FlowTable::Options o;
    o.capacity = 4;
    o.idle_timeout = 30 * kSecond;
    o.evict_idle_after = 5 * kSecond;
    o.eviction_sample = 4;
    return o;
  }

  static std::shared_ptr<const RoutingTable> routing(const HintKeys& keys, uint8_t cluster) {
    auto t = std::make_shared<RoutingTable>();
    t->cluster_id = cluster;
    t->keys = keys.keyset();
    t->endpoints[1] = SocketAddress::parse("198.18.2.1:40001")->to_v6_mapped();
    t->endpoints[2] = SocketAddress::parse("[2001:db8::2]:40002")->to_v6_mapped();
    return t;
  }

  // A Binding request with USERNAME "<ufrag>:cl" in a buffer with framing headroom.
  uint8_t* binding_request(const std::string& ufrag) {
    std::string user = ufrag + ":cl";
    std::vector<uint8_t> p = {0x00, 0x01, 0, 0, 0x21, 0x12, 0xa4, 0x42};
    for (int i = 0; i < 12; i++) p.push_back(static_cast<uint8_t>(i));
    p.push_back(0x00);
    p.push_back(0x06);
    p.push_back(0);
    p.push_back(static_cast<uint8_t>(user.size()));
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

  std::optional<ToTransceiver> from_client(uint8_t* pkt, const char* client = "198.18.0.10:50000",
                                           Nanos now = 0) {
    return core_.on_client_packet(*SocketAddress::parse(client), vip_, 0, pkt, len_, now);
  }

  uint64_t dropped(DropReason r) const { return core_.counters().dropped[static_cast<size_t>(r)].get(); }
  uint64_t hint_failures(HintFailure f) const {
    return core_.counters().hint_failures[static_cast<size_t>(f)].get();
  }

  HintKeys keys_;
  RelayCore core_;
  SocketAddress vip_ = *SocketAddress::parse("198.18.0.1:3478");
  alignas(8) uint8_t buffer_[2048] = {};
  size_t len_ = 0;
};

TEST_F(RelayCoreTest, FirstStunGoesToTheEndpointItsHintNamesWithFraming) {
  auto out = from_client(binding_request(mint_ufrag(keys_, 0, 1)));
  ASSERT_TRUE(out);
  EXPECT_TRUE(same_endpoint(*out->endpoint, SocketAddress::parse("198.18.2.1:40001")->to_v6_mapped()));
  rtce_pp2_flow flow{};
  uint32_t off = 0;
  ASSERT_EQ(rtce_pp2_parse(out->data, static_cast<uint32_t>(out->len), &flow, &off), RTCE_PP2_OK);
  EXPECT_EQ(SocketAddress::from_bytes(flow.family, flow.client_addr, flow.client_port).to_string(),
            "198.18.0.10:50000");
  EXPECT_EQ(SocketAddress::from_bytes(flow.family, flow.vip_addr, flow.vip_port).to_string(),
            "198.18.0.1:3478");
  EXPECT_EQ(out->len - off, len_);
  EXPECT_EQ(out->data[off], 0x00) << "payload unchanged after the header";
  EXPECT_EQ(core_.counters().flows_created.get(), 1u);
}

TEST_F(RelayCoreTest, LaterPacketsFollowTheFlowWithoutParsing) {
  ASSERT_TRUE(from_client(binding_request(mint_ufrag(keys_, 0, 2))));
  auto out = from_client(load({0x80, 0x6f, 0x00, 0x01, 0xde, 0xad}));
  ASSERT_TRUE(out);
  EXPECT_TRUE(same_endpoint(*out->endpoint, SocketAddress::parse("[2001:db8::2]:40002")->to_v6_mapped()));
  EXPECT_EQ(out->len, RTCE_PP2_LEN_V4 + 6u);
  // The same bytes from another client port have no flow.
  EXPECT_FALSE(from_client(load({0x80, 0x6f, 0x00, 0x01}), "198.18.0.10:50001"));
  EXPECT_EQ(dropped(DropReason::no_flow), 1u);
}

TEST_F(RelayCoreTest, UnauthenticatedFirstPacketsCreateNoFlowAndAreCountedByReason) {
  std::string forged = mint_ufrag(keys_, 0, 1);
  forged[15] = forged[15] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(from_client(binding_request(forged)));
  EXPECT_EQ(hint_failures(HintFailure::bad_mac), 1u);

  HintKeys other = HintKeys::generate(1);
  EXPECT_FALSE(from_client(binding_request(mint_ufrag(other, 0, 1))));
  EXPECT_EQ(hint_failures(HintFailure::bad_mac), 2u) << "same key id, different secret";

  EXPECT_FALSE(from_client(binding_request(mint_ufrag(HintKeys::generate(9), 0, 1))));
  EXPECT_EQ(hint_failures(HintFailure::unknown_key), 1u);

  EXPECT_FALSE(from_client(binding_request(mint_ufrag(keys_, 3, 1))));
  EXPECT_EQ(hint_failures(HintFailure::wrong_cluster), 1u);

  EXPECT_FALSE(from_client(binding_request("abcd")));
  EXPECT_EQ(hint_failures(HintFailure::bad_length), 1u);
  EXPECT_EQ(dropped(DropReason::hint_rejected), 5u);

  EXPECT_FALSE(from_client(binding_request(mint_ufrag(keys_, 0, 999))));
  EXPECT_EQ(dropped(DropReason::unknown_endpoint), 1u);

  EXPECT_FALSE(from_client(load({0x00, 0x01, 0x00})));
  EXPECT_EQ(dropped(DropReason::stun_malformed), 1u);

  EXPECT_EQ(core_.flows().size(), 0u);
  EXPECT_EQ(core_.counters().flows_created.get(), 0u);
}

TEST_F(RelayCoreTest, ReturnPathStripsFramingAndAnswersFromTheVip) {
  ASSERT_TRUE(from_client(binding_request(mint_ufrag(keys_, 0, 1))));
  rtce_pp2_flow flow{};
  flow.family = RTCE_FAMILY_V4;
  SocketAddress::parse("198.18.0.10:50000")->to_bytes(flow.client_addr);
  flow.client_port = 50000;
  vip_.to_bytes(flow.vip_addr);
  flow.vip_port = 3478;
  std::vector<uint8_t> framed(RTCE_PP2_LEN_V4);
  rtce_pp2_write(framed.data(), RTCE_PP2_LEN_V4, &flow);
  for (uint8_t b : {0x01, 0x01, 0x00, 0x00}) framed.push_back(b);

  const sockaddr_in6 owner = SocketAddress::parse("198.18.2.1:40001")->to_v6_mapped();
  auto out = core_.on_transceiver_packet(owner, framed.data(), framed.size());
  ASSERT_TRUE(out);
  EXPECT_EQ(out->len, 4u);
  EXPECT_EQ(out->client.to_string(), "198.18.0.10:50000");
  EXPECT_EQ(out->vip.to_string(), "198.18.0.1:3478");

  const sockaddr_in6 stranger = SocketAddress::parse("198.18.2.9:40001")->to_v6_mapped();
  EXPECT_FALSE(core_.on_transceiver_packet(stranger, framed.data(), framed.size()));
  EXPECT_EQ(dropped(DropReason::return_wrong_sender), 1u);

  flow.client_port = 50001;
  rtce_pp2_write(framed.data(), RTCE_PP2_LEN_V4, &flow);
  EXPECT_FALSE(core_.on_transceiver_packet(owner, framed.data(), framed.size()));
  EXPECT_EQ(dropped(DropReason::return_no_flow), 1u);

  const uint8_t rtp[] = {0x80, 0x00, 0x00, 0x01};
  EXPECT_FALSE(core_.on_transceiver_packet(owner, rtp, sizeof rtp));
  EXPECT_EQ(dropped(DropReason::return_malformed), 1u);
}

TEST_F(RelayCoreTest, RoutingReloadKeepsFlowsAndAppliesToNewOnes) {
  ASSERT_TRUE(from_client(binding_request(mint_ufrag(keys_, 0, 1))));
  auto next = std::make_shared<RoutingTable>(*routing(keys_, 0));
  next->endpoints.erase(1);
  next->endpoints[3] = SocketAddress::parse("198.18.2.3:40003")->to_v6_mapped();
  core_.set_routing(next);
  EXPECT_TRUE(from_client(load({0x80, 0x00, 0x00, 0x02}))) << "existing flow survives the reload";
  EXPECT_TRUE(from_client(binding_request(mint_ufrag(keys_, 0, 3)), "198.18.0.11:50000"));
  EXPECT_FALSE(from_client(binding_request(mint_ufrag(keys_, 0, 1)), "198.18.0.12:50000"));
  EXPECT_EQ(dropped(DropReason::unknown_endpoint), 1u);
}

TEST_F(RelayCoreTest, FullTableDropsNewFlowsAndCountsThem) {
  for (int i = 0; i < 4; i++) {
    std::string client = "198.18.0." + std::to_string(20 + i) + ":5000";
    ASSERT_TRUE(from_client(binding_request(mint_ufrag(keys_, 0, 1)), client.c_str(), kSecond));
  }
  EXPECT_FALSE(from_client(binding_request(mint_ufrag(keys_, 0, 1)), "198.18.0.99:5000", 2 * kSecond));
  EXPECT_EQ(dropped(DropReason::flow_table_full), 1u);
  EXPECT_TRUE(from_client(binding_request(mint_ufrag(keys_, 0, 1)), "198.18.0.99:5000", 7 * kSecond))
      << "after evict_idle_after, the least recently active flow makes room";
  EXPECT_EQ(core_.counters().flows_evicted.get(), 1u);
}

TEST_F(RelayCoreTest, ExpiryCountsAndFreesFlows) {
  ASSERT_TRUE(from_client(binding_request(mint_ufrag(keys_, 0, 1))));
  core_.expire(31 * kSecond, 4);
  EXPECT_EQ(core_.counters().flows_expired.get(), 1u);
  EXPECT_EQ(core_.counters().flows_active.get(), 0u);
  EXPECT_FALSE(from_client(load({0x80, 0x00, 0x00, 0x02}))) << "expired flow no longer forwards";
}

TEST_F(RelayCoreTest, ChromesRealRequestIsRouted) {
  // The golden capture carries a hint for cluster 1 / endpoint 2 under the test key.
  auto keys = HintKeys::load_file(test::source_path("tests/golden/hint-keys.yaml"));
  auto t = std::make_shared<RoutingTable>();
  t->cluster_id = 1;
  t->keys = keys.keyset();
  t->endpoints[2] = SocketAddress::parse("198.18.2.2:40002")->to_v6_mapped();
  core_.set_routing(t);
  auto out = from_client(load(test::chrome_binding_request()));
  ASSERT_TRUE(out);
  EXPECT_TRUE(same_endpoint(*out->endpoint, t->endpoints[2]));
}

}  // namespace
