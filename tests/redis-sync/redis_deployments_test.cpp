// redis_deployments_test.cpp — the registry and the flow store through every deployment an
// operator has (docs/redis.md, "Deployments"), against real servers: TLS (mutual TLS, SNI,
// and the refusals: wrong CA, expired certificate, plaintext server, wrong name), a
// password file read at every connect, Sentinel (a master killed mid-write: the client
// follows the failover; the sentinels' own password from a file), Redis Cluster (flows
// spread over the shards, restored from all) and TLS on both. One process per test: each
// starts its own deployment.
#include <fstream>
#include <map>

#include "redis_topology.h"
#include "sync_test_support.h"

namespace rtce::test {
namespace {

rtce_flow_key flow(int i) {
  const std::string client = "198.51." + std::to_string(i / 250 % 250) + "." + std::to_string(i % 250 + 1) +
                             ":" + std::to_string(10000 + i % 50000);
  return make_flow_key(addr(client.c_str()), addr("203.0.113.10:3478"));
}

RedisOptions options_from(const std::string& url) {
  auto options = RedisOptions::from_url(url);
  EXPECT_TRUE(options) << url;
  RedisOptions out = options ? *options : RedisOptions{};
  out.command_timeout = 1000ms;
  out.connect_timeout = 1000ms;
  out.backoff_max = 500ms;
  return out;
}

std::string tls_query(const TestCertificates& certs, bool client_cert) {
  std::string q = "?tls_ca_file=" + certs.ca_cert();
  if (client_cert) q += "&tls_cert_file=" + certs.client_cert() + "&tls_key_file=" + certs.client_key();
  return q;
}

class Deployment : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisServer::available())
      GTEST_FAIL() << kRedisServerPath << " is missing (scripts/install-deps.sh)";
  }

  std::optional<bool> done(std::function<void(DoneCallback)> start,
                           std::chrono::milliseconds timeout = 3000ms) {
    return await<bool>(io_, start, timeout);
  }
  std::optional<FlowRecord> get(FlowStore& store, const rtce_flow_key& key) {
    auto result = await<std::optional<FlowRecord>>(io_, [&](auto cb) { store.get(key, cb); });
    return result ? *result : std::nullopt;
  }
  std::optional<std::vector<FlowEntry>> restore(FlowStore& store) {
    auto all = std::make_shared<std::vector<FlowEntry>>();
    const auto ok = await<bool>(
        io_,
        [&](auto cb) {
          store.restore(
              [all](std::span<const FlowEntry> batch) {
                all->insert(all->end(), batch.begin(), batch.end());
              },
              cb);
        },
        10000ms);
    if (!ok || !*ok) return std::nullopt;
    return *all;
  }
  // The registry and the flow store, both through `url`: register, list, put, get, restore.
  void exercise(const std::string& url, int flows = 100) {
    const uint8_t cluster = next_cluster();
    RegistryOptions registry_options;
    registry_options.cluster = cluster;
    RedisRegistry registry(io_, options_from(url), registry_options);
    RedisFlowStore store(io_, options_from(url), FlowStoreOptions{cluster});
    ASSERT_TRUE(run_until(
        io_, [&] { return registry.connected() && store.connected(); }, 10000ms))
        << url;
    EndpointRecord record{.id = 7, .address = addr("10.0.0.7:7000"), .capacity = 10};
    EXPECT_EQ(done([&](auto cb) { registry.register_endpoint(record, cb); }), true);
    const auto listed =
        await<std::optional<std::vector<EndpointRecord>>>(io_, [&](auto cb) { registry.list(cb); });
    ASSERT_TRUE(listed && *listed);
    ASSERT_EQ((*listed)->size(), 1u);
    EXPECT_EQ((*listed)->front().address, record.address);

    std::vector<FlowEntry> entries;
    for (int i = 0; i < flows; ++i)
      entries.push_back(FlowEntry{flow(i), FlowRecord(static_cast<EndpointId>(i % 9 + 1))});
    store.put_many(entries, 60s);
    EXPECT_EQ(done([&](auto cb) { store.put(flow(flows), FlowRecord(3), 60s, cb); }), true);
    EXPECT_EQ(get(store, flow(flows - 1)), entries.back().record);
    const auto restored = restore(store);
    ASSERT_TRUE(restored);
    EXPECT_EQ(restored->size(), static_cast<size_t>(flows) + 1);
  }

  boost::asio::io_context io_;
};

// A store that must never connect: its TLS handshakes fail, are counted, and nothing is
// written in the clear.
void expect_tls_refused(boost::asio::io_context& io, const std::string& url, const char* why) {
  const uint8_t cluster = next_cluster();
  RedisFlowStore store(io, options_from(url), FlowStoreOptions{cluster});
  ASSERT_TRUE(run_until(
      io, [&] { return store.counters().tls_errors.get() >= 2; }, 10000ms))
      << why << ": " << store.counters().tls_errors.get() << " TLS errors";
  EXPECT_FALSE(store.connected()) << why;
  auto ok = await<bool>(
      io, [&](auto cb) { store.put(flow(1), FlowRecord(1), 60s, cb); }, 3000ms);
  EXPECT_EQ(ok, false) << why << ": a put must fail (time out), not succeed";
}

TEST_F(Deployment, MutualTlsCarriesTheRegistryAndTheFlows) {
  TestCertificates certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  RedisServer server(RedisServerOptions{.tls = &certs, .tls_auth_clients = true});
  ASSERT_TRUE(server.start());
  exercise(server.url() + tls_query(certs, true));
  // The name in the certificate (SNI + DNS SAN) instead of the IP address.
  exercise(server.url() + tls_query(certs, true) + "&tls_server_name=redis.test", 10);
}

TEST_F(Deployment, TlsRefusesWrongCaExpiredCertificatePlaintextServerAndWrongName) {
  TestCertificates certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  RedisServer server(RedisServerOptions{.tls = &certs});
  ASSERT_TRUE(server.start());
  expect_tls_refused(io_, server.url() + "?tls_ca_file=" + certs.other_ca_cert(), "wrong CA");
  expect_tls_refused(io_, server.url() + tls_query(certs, false) + "&tls_server_name=other.test",
                     "wrong name");

  RedisServer plaintext;
  ASSERT_TRUE(plaintext.start());
  expect_tls_refused(io_, "rediss://127.0.0.1:" + std::to_string(plaintext.port()) + tls_query(certs, false),
                     "plaintext server");
  EXPECT_EQ(plaintext.command({"DBSIZE"}), "0");

  // The expired certificate (signed by the right CA): a server of its own.
  ASSERT_TRUE(TestCertificates::expired(certs.expired_cert()));
  RedisServer expired(RedisServerOptions{
      .tls = &certs, .tls_cert_file = certs.expired_cert(), .tls_key_file = certs.expired_key()});
  ASSERT_TRUE(expired.start());
  expect_tls_refused(io_, expired.url() + tls_query(certs, false), "expired certificate");
}

TEST_F(Deployment, PasswordFileIsReadAtEveryConnect) {
  RedisServer server(0, "first-secret");
  ASSERT_TRUE(server.start());
  const std::string file = server.dir() + "/redis-password";
  std::ofstream(file) << "first-secret\n";
  const uint8_t cluster = next_cluster();
  RedisFlowStore store(io_, options_from(server.url() + "?password_file=" + file), FlowStoreOptions{cluster});
  EXPECT_EQ(done([&](auto cb) { store.put(flow(1), FlowRecord(1), 60s, cb); }), true);

  // Rotation: the server and the Secret change, the open connection is cut; the next
  // connect reads the new password.
  std::ofstream(file) << "second-secret\n";
  server.command({"CONFIG", "SET", "requirepass", "second-secret"});
  const uint64_t reconnects = store.counters().reconnects.get();
  const auto killed = run_process({kRedisCliPath, "-p", std::to_string(server.port()), "--no-auth-warning",
                                   "-a", "second-secret", "CLIENT", "KILL", "TYPE", "normal"});
  EXPECT_EQ(killed.exit_code, 0) << killed.err;
  ASSERT_TRUE(run_until(
      io_, [&] { return store.counters().reconnects.get() > reconnects && store.connected(); }, 5000ms));
  EXPECT_EQ(done([&](auto cb) { store.put(flow(2), FlowRecord(2), 60s, cb); }), true);
  EXPECT_EQ(get(store, flow(2)), FlowRecord(2));
}

TEST_F(Deployment, SentinelFollowsAKilledMasterAndKeepsWriting) {
  RedisSentinelGroup group;
  ASSERT_TRUE(group.start()) << "sentinel group did not start";
  exercise(group.url(), 50);

  const uint8_t cluster = next_cluster();
  RedisFlowStore store(io_, options_from(group.url()), FlowStoreOptions{cluster});
  ASSERT_TRUE(run_until(
      io_, [&] { return store.connected(); }, 10000ms));
  EXPECT_EQ(done([&](auto cb) { store.put(flow(1), FlowRecord(1), 60s, cb); }), true);

  const auto killed_at = Clock::now();
  const uint16_t old_master = group.kill_master();
  ASSERT_NE(old_master, 0);
  // Writes during the switch fail (counted) and never block: keep writing until one lands.
  std::optional<Clock::time_point> writable_at;
  int attempts = 0;
  while (!writable_at && Clock::now() - killed_at < 30s) {
    ++attempts;
    if (done([&](auto cb) { store.put(flow(2), FlowRecord(2), 60s, cb); }, 1500ms) == true)
      writable_at = Clock::now();
  }
  ASSERT_TRUE(writable_at) << "no write landed within 30 s of the master's death";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*writable_at - killed_at).count();
  std::printf("sentinel failover: first write on the new master %lld ms after the kill (%d attempts)\n",
              static_cast<long long>(ms), attempts);
  EXPECT_NE(group.master_port(), old_master);
  EXPECT_EQ(get(store, flow(2)), FlowRecord(2));
  EXPECT_GE(store.counters().master_changes.get(), 1u);
  EXPECT_GT(store.counters().timeouts.get() + store.counters().errors.get(), 0u);
}

TEST_F(Deployment, SentinelOverTls) {
  TestCertificates certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  RedisSentinelGroup group(RedisSentinelOptions{.tls = &certs});
  ASSERT_TRUE(group.start()) << "TLS sentinel group did not start";
  exercise(group.url() + tls_query(certs, false), 50);
}

// Sentinels with a password of their own (requirepass), from a file as the data nodes' is (a
// Kubernetes Secret): without it the client never learns the master and counts the refusals.
TEST_F(Deployment, SentinelPasswordFromAFile) {
  RedisSentinelGroup group(
      RedisSentinelOptions{.password = "data-secret", .sentinel_password = "sentinel-secret"});
  ASSERT_TRUE(group.start()) << "sentinel group with passwords did not start";
  const std::string data_file = group.sentinel(0).dir() + "/data-password";
  const std::string sentinel_file = group.sentinel(0).dir() + "/sentinel-password";
  std::ofstream(data_file) << "data-secret\n";
  std::ofstream(sentinel_file) << "sentinel-secret\n";
  {
    RedisFlowStore store(io_, options_from(group.url() + "?password_file=" + data_file),
                         FlowStoreOptions{next_cluster()});
    ASSERT_TRUE(run_until(
        io_, [&] { return store.counters().errors.get() >= 2; }, 10000ms))
        << "a sentinel that wants a password must refuse the client (counted)";
    EXPECT_FALSE(store.connected());
  }
  exercise(group.url() + "?password_file=" + data_file + "&sentinel_password_file=" + sentinel_file, 20);
}

TEST_F(Deployment, ClusterSpreadsFlowsOverTheShardsAndRestoresThemFromAll) {
  RedisClusterNodes cluster;
  ASSERT_TRUE(cluster.start()) << "cluster did not start";
  constexpr int kFlows = 3000;
  exercise(cluster.url(), kFlows);
  // Every master holds about a third of the flows (the registry's few keys sit in one slot).
  for (size_t i = 0; i < 3; ++i) {
    const int keys = std::stoi(cluster.node(i).command({"DBSIZE"}));
    EXPECT_GT(keys, kFlows / 3 * 85 / 100) << "master " << i;
    EXPECT_LT(keys, kFlows / 3 * 115 / 100 + 10) << "master " << i;
  }
}

TEST_F(Deployment, ClusterOverTls) {
  TestCertificates certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  RedisClusterNodes cluster(RedisClusterOptions{.tls = &certs});
  ASSERT_TRUE(cluster.start()) << "TLS cluster did not start";
  exercise(cluster.url() + tls_query(certs, false), 300);
}

}  // namespace
}  // namespace rtce::test
