// ingress_selector_test.cpp — which ingress VIPs an answer names (the global relay): the
// front door's region header first, then the client's address, then this cluster's own
// relay.vips, which always follow as fallbacks; and the relay.ingress_regions parser.
#include "ingress_selector.h"

#include <gtest/gtest.h>

#include "error.h"

namespace {

using namespace rtce;

SocketAddress A(const char* text) { return *SocketAddress::parse(text); }

class IngressSelectorTest : public ::testing::Test {
 protected:
  IngressSelectorTest()
      : selector_({A("198.18.10.1:3478")},
                  parse_ingress_regions(
                      {"region=eu-west;vips=198.18.20.1:3478 [2001:db8::20]:3478;sources=198.18.64.0/18",
                       "region=ap;vips=198.18.30.1:3478"},
                      "test")) {}
  IngressSelector selector_;
};

TEST_F(IngressSelectorTest, TheFrontDoorsHeaderWinsCaseInsensitively) {
  auto c = selector_.choose("AP", A("198.18.64.9:50000"));  // the address says eu-west
  EXPECT_EQ(c.how, IngressChoice::header);
  ASSERT_NE(c.region, nullptr);
  EXPECT_EQ(c.region->name, "ap");
  EXPECT_EQ(c.vips, (std::vector<SocketAddress>{A("198.18.30.1:3478"), A("198.18.10.1:3478")}));
}

TEST_F(IngressSelectorTest, TheClientAddressChoosesWhenNoHeaderMatches) {
  for (const char* header : {"", "mars"}) {
    auto c = selector_.choose(header, A("198.18.64.9:50000"));
    EXPECT_EQ(c.how, IngressChoice::source) << header;
    EXPECT_EQ(c.vips, (std::vector<SocketAddress>{A("198.18.20.1:3478"), A("[2001:db8::20]:3478"),
                                                  A("198.18.10.1:3478")}));
  }
}

TEST_F(IngressSelectorTest, NoMatchFallsBackToThisClustersVips) {
  auto c = selector_.choose("", A("198.18.1.9:50000"));
  EXPECT_EQ(c.how, IngressChoice::fallback);
  EXPECT_EQ(c.region, nullptr);
  EXPECT_EQ(c.vips, std::vector<SocketAddress>{A("198.18.10.1:3478")});
}

TEST_F(IngressSelectorTest, AnOwnVipListedInARegionIsNotRepeated) {
  IngressSelector s({A("198.18.10.1:3478")}, parse_ingress_regions({"home=198.18.10.1:3478"}, "test"));
  EXPECT_EQ(s.choose("home", A("198.18.1.1:1")).vips, std::vector<SocketAddress>{A("198.18.10.1:3478")});
}

TEST(IngressRegions, BadItemsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"eu", "is not region=vip:port"},
      {"eu=", "has no vips"},
      {"e u=198.18.0.1:3478", "must be 1..64"},
      {"eu=0.0.0.0:3478", "needs a concrete address"},
      {"eu=198.18.0.1:0", "needs a concrete address"},
      {"region=eu;vips=198.18.0.1:3478;colour=red", "field 'colour' is unknown"},
      {"region=eu;vips=198.18.0.1:3478;sources=not-a-prefix", "region eu"},
  };
  for (const auto& [item, why] : bad) {
    try {
      parse_ingress_regions({item}, "relay.ingress_regions");
      ADD_FAILURE() << item << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << item << ": " << e.what();
    }
  }
  EXPECT_THROW(parse_ingress_regions({"eu=198.18.0.1:3478", "EU=198.18.0.2:3478"}, "x"), ConfigError);
}

}  // namespace
