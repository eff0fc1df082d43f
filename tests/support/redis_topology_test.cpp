// redis_topology_test.cpp — the Redis fixtures of redis_topology.h do what they promise: the
// certificates (one really expired, one CA unrelated), TLS servers, a Sentinel group that
// fails over, a Redis Cluster that migrates a slot and fails a replica over — plaintext and
// TLS. Skipped when redis-server, redis-cli or openssl is missing.
#include "redis_topology.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace rtce::test {
namespace {

using namespace std::chrono_literals;

bool tools_available() {
  return RedisServer::available() && access(kRedisCliPath, X_OK) == 0 && access(kOpensslPath, X_OK) == 0;
}

#define SKIP_WITHOUT_TOOLS() \
  if (!tools_available()) GTEST_SKIP() << "needs /usr/bin/redis-server, redis-cli and openssl"

// Certificates are generated once per process: a few hundred ms of openssl each time.
const TestCertificates& certs() {
  static TestCertificates certificates;
  return certificates;
}

// Polls `predicate` until it holds or `deadline` passes.
template <typename F>
bool eventually(F predicate, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

TEST(TestCertificates, GeneratesAValidChainAnExpiredCertificateAndAnUnrelatedCa) {
  SKIP_WITHOUT_TOOLS();
  ASSERT_TRUE(certs().ok()) << certs().error();
  EXPECT_FALSE(TestCertificates::expired(certs().server_cert()));
  EXPECT_FALSE(TestCertificates::expired(certs().client_cert()));
  EXPECT_TRUE(TestCertificates::expired(certs().expired_cert()));
  auto verify = [](const std::string& ca, const std::string& cert) {
    return run_process({kOpensslPath, "verify", "-CAfile", ca, cert}).exit_code == 0;
  };
  EXPECT_TRUE(verify(certs().ca_cert(), certs().server_cert()));
  EXPECT_TRUE(verify(certs().ca_cert(), certs().client_cert()));
  EXPECT_FALSE(verify(certs().other_ca_cert(), certs().server_cert()));
  EXPECT_FALSE(verify(certs().ca_cert(), certs().expired_cert()));  // signed by it, but expired
  const auto text =
      run_process({kOpensslPath, "x509", "-in", certs().server_cert(), "-noout", "-ext", "subjectAltName"});
  EXPECT_NE(text.out.find("IP Address:127.0.0.1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("DNS:redis.test"), std::string::npos) << text.out;
}

TEST(RedisServerTls, AnswersOverTlsAndRefusesAnUnrelatedCa) {
  SKIP_WITHOUT_TOOLS();
  ASSERT_TRUE(certs().ok()) << certs().error();
  RedisServer server(RedisServerOptions{.password = "s3cret", .tls = &certs()});
  ASSERT_TRUE(server.start());
  EXPECT_EQ(server.url(), "rediss://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(server.plain_port(), 0);
  EXPECT_EQ(server.command({"SET", "k", "a\nb\"c"}), "OK");
  EXPECT_EQ(server.command({"GET", "k"}), "a\nb\"c");  // redis-cli's escapes undone
  EXPECT_EQ(server.command({"INCR", "n"}), "1");
  EXPECT_EQ(server.command({"GET", "missing"}), "");
  EXPECT_EQ(server.command({"NOSUCHCOMMAND"}), "");
  EXPECT_EQ(server.command_array({"ROLE"}).at(0), "master");
  EXPECT_NE(server.command({"INFO", "server"}).find("redis_version:"), std::string::npos);  // raw text
  EXPECT_EQ(server.command_array({"CONFIG", "GET", "port"}),
            (std::vector<std::string>{"port", "0"}));  // TLS only

  auto cli = server.cli_args();
  EXPECT_EQ(run_process([&] {
              auto args = cli;
              args.push_back("PING");
              return args;
            }())
                .out,
            "PONG\n");
  for (auto& arg : cli) {
    if (arg == certs().ca_cert()) arg = certs().other_ca_cert();
  }
  cli.push_back("PING");
  const auto refused = run_process(cli);
  EXPECT_EQ(refused.out.find("PONG"), std::string::npos) << refused.out;
  EXPECT_NE(refused.exit_code, 0);
}

TEST(RedisServerTls, ClientCertificatesWhenAsked) {
  SKIP_WITHOUT_TOOLS();
  ASSERT_TRUE(certs().ok()) << certs().error();
  RedisServer server(RedisServerOptions{.tls = &certs(), .tls_only = false, .tls_auth_clients = true});
  ASSERT_TRUE(server.start());
  EXPECT_EQ(server.command({"PING"}), "PONG");  // command() presents client.crt
  ASSERT_NE(server.plain_port(), 0);
  RedisServer plain(server.plain_port());  // the same server through its plaintext port
  EXPECT_EQ(plain.command({"PING"}), "PONG");
  const auto no_cert = run_process(
      {kRedisCliPath, "-p", std::to_string(server.port()), "--tls", "--cacert", certs().ca_cert(), "PING"});
  EXPECT_EQ(no_cert.out.find("PONG"), std::string::npos) << no_cert.out;
}

void sentinel_failover(const TestCertificates* tls) {
  RedisSentinelGroup group(RedisSentinelOptions{.password = "pw", .tls = tls});
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(group.start());
  std::cout << "sentinel group started in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                     started)
                   .count()
            << " ms\n";
  ASSERT_EQ(group.data_node_count(), 2u);
  ASSERT_EQ(group.sentinel_count(), 3u);
  const std::string scheme = tls != nullptr ? "rediss+sentinel://" : "redis+sentinel://";
  EXPECT_EQ(group.url(), scheme + "127.0.0.1:" + std::to_string(group.sentinel(0).port()) +
                             ",127.0.0.1:" + std::to_string(group.sentinel(1).port()) +
                             ",127.0.0.1:" + std::to_string(group.sentinel(2).port()) + "/rtce");
  const uint16_t master = group.master_port();
  ASSERT_EQ(master, group.data_node(0).port());
  ASSERT_EQ(group.data_node(0).command({"SET", "k", "v"}), "OK");
  ASSERT_EQ(group.data_node(0).command({"WAIT", "1", "2000"}), "1");

  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(group.kill_master(), master);
  ASSERT_TRUE(group.wait_for_failover(master));
  std::cout << "failover in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                     killed)
                   .count()
            << " ms\n";
  EXPECT_EQ(group.master_port(), group.data_node(1).port());
  EXPECT_EQ(group.data_node(1).command({"GET", "k"}), "v");

  ASSERT_TRUE(group.restart(master));
  // The sentinels turn the returning old master into a replica of the new one.
  EXPECT_TRUE(eventually(
      [&] {
        const auto role = group.data_node(0).command_array({"ROLE"});
        return !role.empty() && role[0] == "slave" && group.data_node(0).command({"GET", "k"}) == "v";
      },
      20s));
}

TEST(RedisSentinelGroup, FailsOverToTheReplica) {
  SKIP_WITHOUT_TOOLS();
  sentinel_failover(nullptr);
}

TEST(RedisSentinelGroup, FailsOverToTheReplicaOverTls) {
  SKIP_WITHOUT_TOOLS();
  ASSERT_TRUE(certs().ok()) << certs().error();
  sentinel_failover(&certs());
}

void cluster_migrate_and_failover(const TestCertificates* tls, size_t replicas) {
  RedisClusterNodes cluster(
      RedisClusterOptions{.replicas_per_master = replicas, .password = "pw", .tls = tls});
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster.start());
  std::cout << "cluster of " << cluster.size() << " started in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                     started)
                   .count()
            << " ms\n";
  ASSERT_EQ(cluster.size(), 3 * (1 + replicas));
  const std::string scheme = tls != nullptr ? "rediss+cluster://" : "redis+cluster://";
  EXPECT_EQ(cluster.url(), scheme + "127.0.0.1:" + std::to_string(cluster.node(0).port()) +
                               ",127.0.0.1:" + std::to_string(cluster.node(1).port()));

  // A key of the registry's shape, on whichever master serves its slot.
  const std::string key = "rtce:{c1}:eps";
  const auto slot = static_cast<uint16_t>(std::stoi(cluster.node(0).command({"CLUSTER", "KEYSLOT", key})));
  const uint16_t owner = cluster.master_of_slot(slot);
  const size_t from = cluster.index_of_port(owner);
  ASSERT_LT(from, 3u);
  ASSERT_EQ(cluster.node(from).command({"SADD", key, "7"}), "1");
  const size_t to = (from + 1) % 3;
  ASSERT_TRUE(cluster.migrate_slots(slot, slot, to));
  EXPECT_EQ(cluster.master_of_slot(slot), cluster.node(to).port());
  EXPECT_EQ(cluster.node(to).command_array({"SMEMBERS", key}), std::vector<std::string>{"7"});
  EXPECT_EQ(cluster.node(from).command({"EXISTS", key}), "");  // MOVED now: an error reply
  EXPECT_TRUE(cluster.wait_state_ok());

  if (replicas == 0) return;
  // A replica of the slot's new owner takes over.
  size_t replica = cluster.size();
  for (size_t i = 0; i < cluster.size(); ++i) {
    const auto role = cluster.node(i).command_array({"ROLE"});
    if (role.size() >= 3 && role[0] == "slave" && role[2] == std::to_string(cluster.node(to).port()))
      replica = i;
  }
  ASSERT_LT(replica, cluster.size());
  ASSERT_TRUE(cluster.failover_replica(replica));
  EXPECT_EQ(cluster.master_of_slot(slot), cluster.node(replica).port());
  EXPECT_EQ(cluster.node(replica).command_array({"SMEMBERS", key}), std::vector<std::string>{"7"});
}

TEST(RedisClusterNodes, MigratesASlot) {
  SKIP_WITHOUT_TOOLS();
  cluster_migrate_and_failover(nullptr, 0);
}

TEST(RedisClusterNodes, MigratesASlotAndFailsAReplicaOverOverTls) {
  SKIP_WITHOUT_TOOLS();
  ASSERT_TRUE(certs().ok()) << certs().error();
  cluster_migrate_and_failover(&certs(), 1);
}

TEST(RedisClusterNodes, RestartedMasterRejoins) {
  SKIP_WITHOUT_TOOLS();
  RedisClusterNodes cluster;
  ASSERT_TRUE(cluster.start());
  cluster.kill(2);
  ASSERT_TRUE(cluster.restart(2));
  EXPECT_TRUE(cluster.wait_state_ok());
  EXPECT_EQ(cluster.node(2).command({"CLUSTER", "COUNTKEYSINSLOT", "0"}), "0");
}

}  // namespace
}  // namespace rtce::test
