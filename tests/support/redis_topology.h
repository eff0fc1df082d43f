// redis_topology.h — the Redis deployments of issue 28 as test fixtures, real processes on
// 127.0.0.1 (free ports, temporary directories, killed on destruction and with the parent):
// TestCertificates (a CA, server/client/expired certificates and an unrelated CA, made with
// the openssl CLI), RedisSentinelGroup (master + replicas + sentinels) and RedisClusterNodes
// (a Redis Cluster made with redis-cli --cluster create). Each has an optional password
// and TLS. Every wait takes a deadline; nothing sleeps a fixed time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.h"

namespace rtce::test {

inline constexpr const char* kOpensslPath = "/usr/bin/openssl";

// EC P-256 keys, generated in a temporary directory by the constructor (ok() says whether
// it worked, error() what failed); the directory is removed by the destructor. The server
// certificates carry subjectAltName IP:127.0.0.1 and DNS:redis.test.
class TestCertificates {
 public:
  TestCertificates();
  ~TestCertificates();
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  const std::string& dir() const { return dir_; }
  std::string ca_cert() const { return path("ca.crt"); }
  std::string ca_key() const { return path("ca.key"); }
  std::string server_cert() const { return path("server.crt"); }
  std::string server_key() const { return path("server.key"); }
  std::string client_cert() const { return path("client.crt"); }
  std::string client_key() const { return path("client.key"); }
  std::string other_ca_cert() const { return path("other-ca.crt"); }  // signed nothing here
  std::string other_ca_key() const { return path("other-ca.key"); }
  std::string expired_cert() const { return path("expired.crt"); }  // by ca.crt, expired in 2020
  std::string expired_key() const { return path("expired.key"); }

  // openssl x509 -checkend 0: whether the certificate at `path` has expired now.
  static bool expired(const std::string& path);

 private:
  std::string path(const char* name) const { return dir_ + "/" + name; }
  bool generate();
  bool openssl(const std::vector<std::string>& args);
  bool write(const char* name, const std::string& content);

  std::string dir_;
  std::string error_;
};

struct RedisSentinelOptions {
  size_t replicas = 1;
  size_t sentinels = 3;
  std::string master_name = "rtce";
  std::string password;                   // requirepass + masterauth on the data nodes
  std::string sentinel_password;          // requirepass on the sentinels (they use it with each other)
  const TestCertificates* tls = nullptr;  // TLS only, everywhere (replication, sentinels)
};

class RedisSentinelGroup {
 public:
  explicit RedisSentinelGroup(RedisSentinelOptions options = {});
  ~RedisSentinelGroup() = default;
  RedisSentinelGroup(const RedisSentinelGroup&) = delete;
  RedisSentinelGroup& operator=(const RedisSentinelGroup&) = delete;

  // Starts the master, the replicas (until their links are up) and the sentinels, and waits
  // until every sentinel reports the master with all replicas and all other sentinels.
  bool start(std::chrono::milliseconds deadline = std::chrono::milliseconds(20000));

  // "redis+sentinel://127.0.0.1:p1,127.0.0.1:p2,.../rtce" ("rediss+sentinel://" with TLS).
  std::string url() const;
  const std::string& master_name() const { return options_.master_name; }

  // The current master's port as a live sentinel names it (SENTINEL get-master-addr-by-name);
  // 0 when none answers.
  uint16_t master_port() const;
  // SIGKILLs the current master; returns its port (0: none).
  uint16_t kill_master();
  // Waits until the sentinels name a master other than old_port and it answers ROLE as master.
  bool wait_for_failover(uint16_t old_port,
                         std::chrono::milliseconds deadline = std::chrono::milliseconds(20000));
  // Starts a killed data node or sentinel again on its port (a data node rejoins as a
  // replica: the sentinels reconfigure it).
  bool restart(uint16_t port, std::chrono::milliseconds deadline = std::chrono::milliseconds(5000));

  // Data nodes: 0 is the initial master, then the replicas.
  size_t data_node_count() const { return data_.size(); }
  RedisServer& data_node(size_t i) { return *data_.at(i); }
  size_t sentinel_count() const { return sentinels_.size(); }
  RedisServer& sentinel(size_t i) { return *sentinels_.at(i); }
  // The data node or sentinel on `port`, or nullptr.
  RedisServer* node_by_port(uint16_t port);

 private:
  bool sentinels_agree() const;

  RedisSentinelOptions options_;
  std::vector<std::unique_ptr<RedisServer>> data_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

struct RedisClusterOptions {
  size_t masters = 3;
  size_t replicas_per_master = 0;
  std::string password;                   // requirepass + masterauth
  const TestCertificates* tls = nullptr;  // TLS only, cluster bus and replication too
};

class RedisClusterNodes {
 public:
  explicit RedisClusterNodes(RedisClusterOptions options = {});
  ~RedisClusterNodes() = default;
  RedisClusterNodes(const RedisClusterNodes&) = delete;
  RedisClusterNodes& operator=(const RedisClusterNodes&) = delete;

  // Starts every node, creates the cluster (redis-cli --cluster create) and waits until
  // every node reports cluster_state:ok with all 16384 slots assigned and knows every node.
  bool start(std::chrono::milliseconds deadline = std::chrono::milliseconds(20000));

  // "redis+cluster://127.0.0.1:p1,127.0.0.1:p2" (two seeds; "rediss+cluster://" with TLS).
  std::string url() const;

  // Nodes in creation order: redis-cli makes the first `masters` ones masters.
  size_t size() const { return nodes_.size(); }
  RedisServer& node(size_t i) { return *nodes_.at(i); }
  void kill(size_t i) { nodes_.at(i)->kill(); }
  // Starts a killed node again with its nodes.conf: it rejoins the cluster.
  bool restart(size_t i, std::chrono::milliseconds deadline = std::chrono::milliseconds(5000));
  // Every running node: cluster_state:ok, 16384 slots assigned.
  bool wait_state_ok(std::chrono::milliseconds deadline = std::chrono::milliseconds(10000));

  // The port of the master serving `slot` (CLUSTER NODES of a running node), 0 if unknown.
  uint16_t master_of_slot(uint16_t slot) const;
  // The index of the node on `port`, or size() when none.
  size_t index_of_port(uint16_t port) const;
  // Moves slots first..last with their keys to master `to_index` (SETSLOT IMPORTING /
  // MIGRATING, MIGRATE ... KEYS, SETSLOT NODE on every master), then waits until every
  // running node agrees.
  bool migrate_slots(uint16_t first, uint16_t last, size_t to_index,
                     std::chrono::milliseconds deadline = std::chrono::milliseconds(10000));
  // CLUSTER FAILOVER on replica i; waits until it is a master and the cluster is ok.
  bool failover_replica(size_t i, std::chrono::milliseconds deadline = std::chrono::milliseconds(10000));

 private:
  // CLUSTER NODES of the first running node.
  std::string nodes_text() const;
  std::string node_id(size_t i) const;
  bool all_agree_slot(uint16_t slot, uint16_t port) const;

  RedisClusterOptions options_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace rtce::test
