// registry_peers_test.cpp — global relay peers learned from the registry: the choice among a
// cluster's published ingress addresses, the merge with the configured peers.clusters, and
// the configuration forms and errors of an entry without an address; the registry cache.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "error.h"
#include "registry_cache.h"
#include "registry_sync.h"
#include "relay_config.h"
#include "test_support.h"

namespace {

using namespace rtce;

const std::string kKeyFile = test::source_path("tests/golden/hint-keys.yaml");

RelayConfig resolve(const std::string& yaml, std::vector<std::string> flags = {}) {
  ConfigLayers c("RTCEDGE_RELAY_");
  declare_relay_config(c);
  CLI::App app;
  c.add_flags(app);
  c.load_yaml_text("hint_key_file: " + kKeyFile + "\ncluster_id: 1\n" + yaml, "config file 'relay.yaml'");
  std::vector<const char*> argv{"relay"};
  for (const auto& f : flags) argv.push_back(f.c_str());
  app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  c.apply_flags();
  return resolve_relay_config(c);
}

TEST(ChooseIngress, TheSmallestValidMemberWhateverTheOrder) {
  EXPECT_EQ(choose_ingress({"198.18.0.9:3480", "198.18.0.10:3480", "198.18.0.2:3480"})->to_string(),
            "198.18.0.10:3480");
  EXPECT_EQ(choose_ingress({"198.18.0.2:3480", "198.18.0.10:3480", "198.18.0.9:3480"})->to_string(),
            "198.18.0.10:3480");
  EXPECT_EQ(choose_ingress({"[2001:db8::1]:3480", "198.18.0.2:3480"})->to_string(), "198.18.0.2:3480");
}

TEST(ChooseIngress, SkipsMembersThatAreNoUsableAddress) {
  EXPECT_FALSE(choose_ingress({}));
  EXPECT_FALSE(choose_ingress({"", "garbage", "0.0.0.0:3480", "198.18.0.1:0", "198.18.0.1"}));
  EXPECT_EQ(choose_ingress({"0.0.0.0:3480", "1junk", "198.18.0.7:3480"})->to_string(), "198.18.0.7:3480");
}

TEST(MergePeerClusters, LearnedAddressesFillOnlyTheEntriesWithout) {
  PeerClusterConfig fixed{2, SocketAddress::parse_or_throw("198.18.2.1:3480", "t"), "", false};
  PeerClusterConfig learned{3, SocketAddress{}, "/keys3.yaml", true};
  PeerClusterConfig pending{4, SocketAddress{}, "", true};
  const std::map<uint8_t, SocketAddress> registry{
      {2, SocketAddress::parse_or_throw("198.18.9.9:3480", "t")},  // a static entry wins
      {3, SocketAddress::parse_or_throw("198.18.3.1:3480", "t")},
      {9, SocketAddress::parse_or_throw("198.18.9.1:3480", "t")}};  // not configured: ignored
  const auto merged = merge_peer_clusters({fixed, learned, pending}, registry);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].address.to_string(), "198.18.2.1:3480");
  EXPECT_EQ(merged[1].address.to_string(), "198.18.3.1:3480");
  EXPECT_EQ(merged[1].hint_key_file, "/keys3.yaml");
  EXPECT_TRUE(merged[2].address.is_unspecified());
  EXPECT_EQ(learned_clusters({fixed, learned, pending}), (std::vector<uint8_t>{3, 4}));
}

TEST(PeersFromRegistry, AnEntryWithoutAddressLearnsIt) {
  const RelayConfig cfg = resolve(
      "registry:\n  redis_url: redis://127.0.0.1:6379\npeers:\n  clusters:\n"
      "    - {cluster: 2, address: \"198.18.2.1:3480\"}\n    - {cluster: 3}\n");
  ASSERT_EQ(cfg.peer_clusters.size(), 2u);
  EXPECT_FALSE(cfg.peer_clusters[0].from_registry);
  EXPECT_TRUE(cfg.peer_clusters[1].from_registry);
  EXPECT_TRUE(cfg.peer_clusters[1].address.is_unspecified());
  EXPECT_NE(relay_config_yaml(cfg).find("{cluster: 3}"), std::string::npos) << relay_config_yaml(cfg);

  // Not learned yet: not in the routing table (a hint for it is rejected like any unknown).
  auto table = build_routing_table(cfg);
  EXPECT_EQ(table->peer_clusters.count(2), 1u);
  EXPECT_EQ(table->peer_clusters.count(3), 0u);
  auto learned = cfg;
  learned.peer_clusters =
      merge_peer_clusters(cfg.peer_clusters, {{3, SocketAddress::parse_or_throw("198.18.3.1:3480", "t")}});
  EXPECT_EQ(build_routing_table(learned)->peer_clusters.count(3), 1u);
}

TEST(PeersFromRegistry, FlagFormIsClusterEqualsRegistry) {
  const RelayConfig cfg = resolve("", {"--registry-redis-url", "redis://127.0.0.1:6379", "--peers-clusters",
                                       "2=198.18.2.1:3480,3=registry"});
  ASSERT_EQ(cfg.peer_clusters.size(), 2u);
  EXPECT_FALSE(cfg.peer_clusters[0].from_registry);
  EXPECT_TRUE(cfg.peer_clusters[1].from_registry);
  EXPECT_EQ(cfg.peer_clusters[1].cluster, 3);
}

TEST(PeersFromRegistry, WithoutARegistryItIsAConfigError) {
  try {
    resolve("peers:\n  clusters:\n    - {cluster: 3}\n");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("peers.clusters"), std::string::npos) << what;
    EXPECT_NE(what.find("cluster 3 has no address"), std::string::npos) << what;
    EXPECT_NE(what.find("registry.redis_url is not set"), std::string::npos) << what;
  }
  EXPECT_THROW(resolve("", {"--peers-clusters", "3=registry"}), ConfigError);
  // A concrete address is still required of an entry that gives one.
  EXPECT_THROW(
      resolve("registry:\n  redis_url: redis://127.0.0.1:6379\n", {"--peers-clusters", "3=0.0.0.0:3480"}),
      ConfigError);
}

}  // namespace

namespace rtce {
namespace {

// The registry cache (registry_cache.h): what a relay restarted during a Redis outage routes with.
TEST(RegistryCache, RoundTripsAndRefusesWhatItDidNotWrite) {
  const std::vector<EndpointConfig> endpoints{{1, *SocketAddress::parse("198.18.2.2:40000")},
                                              {7, *SocketAddress::parse("[2001:db8::7]:40001")}};
  const int64_t written = 1'800'000'000'000;
  const std::string text = format_registry_cache(endpoints, written);
  const auto parsed = parse_registry_cache(text, written + 1000, std::chrono::hours(1));
  ASSERT_TRUE(parsed);
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[1].id, 7);
  EXPECT_EQ((*parsed)[1].address, endpoints[1].address);
  EXPECT_TRUE(parse_registry_cache(format_registry_cache({}, written), written, std::chrono::hours(1)));

  EXPECT_FALSE(parse_registry_cache(text, written + 3'600'001, std::chrono::hours(1))) << "too old";
  EXPECT_FALSE(parse_registry_cache(text, written - 120'000, std::chrono::hours(1)))
      << "written in the future";
  EXPECT_FALSE(parse_registry_cache(text.substr(0, text.size() - 1), written, std::chrono::hours(1)))
      << "torn";
  const std::string head = "rtcedge-registry-cache 1 " + std::to_string(written) + "\n";
  for (const char* bad : {"0 1.2.3.4:5\n", "65536 1.2.3.4:5\n", "7 1.2.3.4:0\n", "7 nonsense\n", "7\n",
                          "7 1.2.3.4:5\n7 1.2.3.5:5\n", "x7 1.2.3.4:5\n"})
    EXPECT_FALSE(parse_registry_cache(head + bad, written, std::chrono::hours(1))) << bad;
  EXPECT_FALSE(parse_registry_cache("rtcedge-registry-cache 2 1\n", written, std::chrono::hours(1)));
  EXPECT_FALSE(parse_registry_cache("", written, std::chrono::hours(1)));
}

TEST(RegistryCache, SavesAtomicallyAndLoads) {
  char dir[] = "/tmp/rtce-registry-cache-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/cache";
  std::string why;
  const std::vector<EndpointConfig> endpoints{{3, *SocketAddress::parse("198.18.2.3:40000")}};
  ASSERT_TRUE(save_registry_cache(path, endpoints, &why)) << why;
  const auto loaded = load_registry_cache(path, std::chrono::hours(1), &why);
  ASSERT_TRUE(loaded) << why;
  EXPECT_EQ(loaded->front().address, endpoints.front().address);
  EXPECT_FALSE(save_registry_cache(std::string(dir) + "/missing/cache", endpoints, &why));
  EXPECT_NE(why.find("missing"), std::string::npos) << why;
  std::remove(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace rtce
