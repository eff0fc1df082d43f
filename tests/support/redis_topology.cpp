// redis_topology.cpp — test certificates (openssl CLI), a Sentinel group and a Redis Cluster
// built from RedisServer processes, and the waits that tell when each is ready.
#include "redis_topology.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace rtce::test {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(50);

// The remaining time until `until`, at least 1 ms (a RedisServer start with 0 fails at once).
std::chrono::milliseconds left(Clock::time_point until) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()));
}

// field -> value of a flat [field, value, ...] reply (SENTINEL master, ...).
std::map<std::string, std::string> pairs(const std::vector<std::string>& flat) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) out[flat[i]] = flat[i + 1];
  return out;
}

// A "field:value" line of INFO / CLUSTER INFO.
std::string info_field(const std::string& text, const std::string& field) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with(field + ":")) return line.substr(field.size() + 1);
  }
  return {};
}

// The redis-cli options of a server without its -h/-p (for --cluster create).
std::vector<std::string> cli_options(const RedisServer& server) {
  auto args = server.cli_args();
  args.erase(args.begin() + 1, args.begin() + 5);  // "-h 127.0.0.1 -p <port>"
  return args;
}

// One line of CLUSTER NODES:
// <id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
struct ClusterNode {
  std::string id;
  uint16_t port = 0;
  bool master = false;
  bool failed = false;
  std::vector<std::pair<int, int>> slots;  // ranges, inclusive
};

std::vector<ClusterNode> parse_cluster_nodes(const std::string& text) {
  std::vector<ClusterNode> nodes;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string word; fields >> word;) f.push_back(word);
    if (f.size() < 8) continue;
    ClusterNode node;
    node.id = f[0];
    const auto colon = f[1].rfind(':', f[1].find('@'));
    if (colon != std::string::npos) node.port = static_cast<uint16_t>(std::atoi(f[1].c_str() + colon + 1));
    std::istringstream flags(f[2]);
    for (std::string flag; std::getline(flags, flag, ',');) {
      node.master = node.master || flag == "master";
      node.failed = node.failed || flag == "fail";
    }
    for (size_t k = 8; k < f.size(); ++k) {
      if (f[k].starts_with("[")) continue;  // [slot->-importing] / [slot-<-migrating]
      const auto dash = f[k].find('-');
      const int a = std::atoi(f[k].c_str());
      node.slots.emplace_back(a, dash == std::string::npos ? a : std::atoi(f[k].c_str() + dash + 1));
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

// The port of the live master that serves `slot` in one node's view, 0 if none.
uint16_t owner_of(const std::vector<ClusterNode>& nodes, uint16_t slot) {
  for (const auto& node : nodes) {
    if (!node.master || node.failed) continue;
    for (const auto& [a, b] : node.slots) {
      if (slot >= a && slot <= b) return node.port;
    }
  }
  return 0;
}

}  // namespace

// ---- TestCertificates ---------------------------------------------------------------------

TestCertificates::TestCertificates() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "rtce-certs-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    error_ = "mkdtemp failed";
    return;
  }
  dir_ = tmpl;
  if (!generate() && error_.empty()) error_ = "certificate generation failed";
}

TestCertificates::~TestCertificates() {
  if (dir_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

bool TestCertificates::write(const char* name, const std::string& content) {
  std::ofstream out(path(name));
  out << content;
  return static_cast<bool>(out);
}

bool TestCertificates::openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kOpensslPath};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto run = run_process(argv, std::chrono::milliseconds(20000));
  if (run.exit_code == 0) return true;
  error_ = "openssl " + args.front() + " failed: " + run.err;
  return false;
}

bool TestCertificates::expired(const std::string& cert) {
  // -checkend 0 exits 1 when the certificate expires within 0 seconds, i.e. has expired.
  return run_process({kOpensslPath, "x509", "-in", cert, "-noout", "-checkend", "0"}).exit_code == 1;
}

bool TestCertificates::generate() {
  // Our own config: nothing depends on the machine's openssl.cnf, and `openssl ca` (the only
  // OpenSSL 3.0 command that signs with a chosen start and end date) needs its database.
  const std::string config = path("openssl.cnf");
  std::filesystem::create_directories(path("newcerts"));
  if (!write("index.txt", "") || !write("serial", "1000\n") ||
      !write("openssl.cnf",
             "[req]\n"
             "distinguished_name = dn\n"
             "prompt = no\n"
             "[dn]\n"
             "CN = unused\n"
             "[ca_ext]\n"
             "basicConstraints = critical, CA:TRUE\n"
             "keyUsage = critical, keyCertSign, cRLSign\n"
             "subjectKeyIdentifier = hash\n"
             "[server_ext]\n"
             "basicConstraints = CA:FALSE\n"
             "keyUsage = critical, digitalSignature\n"
             // Redis presents its server certificate as a client too (replication, the bus).
             "extendedKeyUsage = serverAuth, clientAuth\n"
             "subjectAltName = IP:127.0.0.1, DNS:redis.test\n"
             "[client_ext]\n"
             "basicConstraints = CA:FALSE\n"
             "keyUsage = critical, digitalSignature\n"
             "extendedKeyUsage = clientAuth\n"
             "[ca]\n"
             "default_ca = test_ca\n"
             "[test_ca]\n"
             "database = " +
                 path("index.txt") +
                 "\n"
                 "new_certs_dir = " +
                 path("newcerts") +
                 "\n"
                 "serial = " +
                 path("serial") +
                 "\n"
                 "default_md = sha256\n"
                 "policy = policy_any\n"
                 "unique_subject = no\n"
                 "copy_extensions = none\n"
                 "[policy_any]\n"
                 "commonName = supplied\n")) {
    error_ = "cannot write " + dir_;
    return false;
  }
  const std::vector<std::string> ec_key{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"};
  auto self_signed_ca = [&](const std::string& key, const std::string& cert, const std::string& cn) {
    std::vector<std::string> args{"req", "-config", config, "-x509"};
    args.insert(args.end(), ec_key.begin(), ec_key.end());
    args.insert(args.end(), {"-keyout", key, "-out", cert, "-days", "3650", "-subj", "/CN=" + cn,
                             "-extensions", "ca_ext"});
    return openssl(args);
  };
  auto request = [&](const std::string& key, const std::string& csr, const std::string& cn) {
    std::vector<std::string> args{"req", "-config", config, "-new"};
    args.insert(args.end(), ec_key.begin(), ec_key.end());
    args.insert(args.end(), {"-keyout", key, "-out", csr, "-subj", "/CN=" + cn});
    return openssl(args);
  };
  auto sign = [&](const std::string& csr, const std::string& cert, const std::string& serial,
                  const std::string& extensions) {
    return openssl({"x509", "-req", "-in", csr, "-CA", ca_cert(), "-CAkey", ca_key(), "-set_serial", serial,
                    "-days", "3650", "-sha256", "-extfile", config, "-extensions", extensions, "-out", cert});
  };
  return self_signed_ca(ca_key(), ca_cert(), "rtce test CA") &&
         self_signed_ca(other_ca_key(), other_ca_cert(), "rtce unrelated CA") &&
         request(server_key(), path("server.csr"), "redis.test") &&
         sign(path("server.csr"), server_cert(), "2", "server_ext") &&
         request(client_key(), path("client.csr"), "rtce-test-client") &&
         sign(path("client.csr"), client_cert(), "3", "client_ext") &&
         request(expired_key(), path("expired.csr"), "redis.test") &&
         openssl({"ca", "-config", config, "-batch", "-notext", "-in", path("expired.csr"), "-out",
                  expired_cert(), "-cert", ca_cert(), "-keyfile", ca_key(), "-startdate", "20200101000000Z",
                  "-enddate", "20200102000000Z", "-extensions", "server_ext"});
}

// ---- RedisSentinelGroup -------------------------------------------------------------------

RedisSentinelGroup::RedisSentinelGroup(RedisSentinelOptions options) : options_(std::move(options)) {
  // A replica's full sync starts at once (the diskless default waits 5 s for more replicas).
  std::vector<std::string> common{"--repl-diskless-sync-delay", "0"};
  // masterauth on the master too: after a failover it follows the new one.
  if (!options_.password.empty()) common.insert(common.end(), {"--masterauth", options_.password});
  if (options_.tls != nullptr) common.insert(common.end(), {"--tls-replication", "yes"});
  data_.push_back(std::make_unique<RedisServer>(
      RedisServerOptions{.password = options_.password, .extra_args = common, .tls = options_.tls}));
  const std::string master = std::to_string(data_.front()->port());
  for (size_t i = 0; i < options_.replicas; ++i) {
    auto args = common;
    args.insert(args.end(), {"--replicaof", "127.0.0.1", master});
    data_.push_back(std::make_unique<RedisServer>(
        RedisServerOptions{.password = options_.password, .extra_args = args, .tls = options_.tls}));
  }
  for (size_t i = 0; i < options_.sentinels; ++i) {
    std::vector<std::string> args;
    // The sentinels reach the master, the replicas and each other over TLS, and announce
    // their TLS port in their hello messages.
    if (options_.tls != nullptr) args.insert(args.end(), {"--tls-replication", "yes"});
    sentinels_.push_back(
        std::make_unique<RedisServer>(RedisServerOptions{.password = options_.sentinel_password,
                                                         .extra_args = args,
                                                         .tls = options_.tls,
                                                         .config_file = "sentinel.conf",
                                                         .sentinel = true}));
  }
}

std::string RedisSentinelGroup::url() const {
  std::string url = options_.tls != nullptr ? "rediss+sentinel://" : "redis+sentinel://";
  for (size_t i = 0; i < sentinels_.size(); ++i) {
    if (i > 0) url += ",";
    url += "127.0.0.1:" + std::to_string(sentinels_[i]->port());
  }
  return url + "/" + options_.master_name;
}

bool RedisSentinelGroup::start(std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  for (auto& node : data_) {
    if (!node->start(left(until))) return false;
  }
  // Replicas linked before the sentinels start: a sentinel learns the replicas from the
  // master's INFO, which it asks only every 10 s once it has asked the first time.
  const std::string replicas = std::to_string(options_.replicas);
  for (;;) {
    bool linked = info_field(data_[0]->command({"INFO", "replication"}), "connected_slaves") == replicas;
    for (size_t i = 1; linked && i < data_.size(); ++i) {
      linked = info_field(data_[i]->command({"INFO", "replication"}), "master_link_status") == "up";
    }
    if (linked) break;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPoll);
  }
  const size_t quorum = std::min<size_t>(2, std::max<size_t>(1, options_.sentinels));
  const std::string& name = options_.master_name;
  std::string conf = "sentinel resolve-hostnames no\n";
  conf += "sentinel monitor " + name + " 127.0.0.1 " + std::to_string(data_[0]->port()) + " " +
          std::to_string(quorum) + "\n";
  conf += "sentinel down-after-milliseconds " + name + " 1000\n";
  conf += "sentinel failover-timeout " + name + " 5000\n";
  conf += "sentinel parallel-syncs " + name + " 1\n";
  if (!options_.password.empty()) conf += "sentinel auth-pass " + name + " " + options_.password + "\n";
  for (auto& sentinel : sentinels_) {
    std::ofstream(sentinel->dir() + "/sentinel.conf") << conf;
    if (!sentinel->start(left(until))) return false;
  }
  while (!sentinels_agree()) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

bool RedisSentinelGroup::sentinels_agree() const {
  for (const auto& sentinel : sentinels_) {
    auto master = pairs(sentinel->command_array({"SENTINEL", "master", options_.master_name}));
    if (master["flags"] != "master" || master["num-slaves"] != std::to_string(options_.replicas) ||
        master["num-other-sentinels"] != std::to_string(sentinels_.size() - 1)) {
      return false;
    }
  }
  return true;
}

uint16_t RedisSentinelGroup::master_port() const {
  for (const auto& sentinel : sentinels_) {
    if (!sentinel->running()) continue;
    const auto addr = sentinel->command_array({"SENTINEL", "get-master-addr-by-name", options_.master_name});
    if (addr.size() == 2) return static_cast<uint16_t>(std::stoi(addr[1]));
  }
  return 0;
}

RedisServer* RedisSentinelGroup::node_by_port(uint16_t port) {
  for (auto* nodes : {&data_, &sentinels_}) {
    for (auto& node : *nodes) {
      if (node->port() == port) return node.get();
    }
  }
  return nullptr;
}

uint16_t RedisSentinelGroup::kill_master() {
  const uint16_t port = master_port();
  RedisServer* master = node_by_port(port);
  if (master == nullptr || !master->running()) return 0;
  master->kill();
  return port;
}

bool RedisSentinelGroup::wait_for_failover(uint16_t old_port, std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  for (;;) {
    // Every running sentinel names the same new master (a client may ask any of them) ...
    uint16_t named = 0;
    bool agree = true;
    for (const auto& sentinel : sentinels_) {
      if (!sentinel->running()) continue;
      const auto addr =
          sentinel->command_array({"SENTINEL", "get-master-addr-by-name", options_.master_name});
      const uint16_t port = addr.size() == 2 ? static_cast<uint16_t>(std::stoi(addr[1])) : 0;
      if (port == 0 || port == old_port || (named != 0 && port != named)) agree = false;
      named = port;
    }
    // ... and it took the role.
    if (agree && named != 0) {
      RedisServer* master = node_by_port(named);
      if (master != nullptr && master->running()) {
        const auto role = master->command_array({"ROLE"});
        if (!role.empty() && role[0] == "master") return true;
      }
    }
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPoll);
  }
}

bool RedisSentinelGroup::restart(uint16_t port, std::chrono::milliseconds deadline) {
  RedisServer* node = node_by_port(port);
  if (node == nullptr || !node->start(deadline)) return false;
  // A data node that the sentinels no longer name follows the current master at once, as
  // its rewritten config would make it; the sentinels would convert it too, but only after
  // 8 s (four hello periods) of seeing it claim to be a master.
  const bool sentinel =
      std::any_of(sentinels_.begin(), sentinels_.end(), [&](auto& s) { return s.get() == node; });
  const uint16_t master = master_port();
  if (!sentinel && master != 0 && master != port) {
    return node->command({"REPLICAOF", "127.0.0.1", std::to_string(master)}) == "OK";
  }
  return true;
}

// ---- RedisClusterNodes --------------------------------------------------------------------

RedisClusterNodes::RedisClusterNodes(RedisClusterOptions options) : options_(std::move(options)) {
  const size_t count = options_.masters * (1 + options_.replicas_per_master);
  for (size_t i = 0; i < count; ++i) {
    // nodes.conf lives in the node's own directory, which outlives kill(): restart() rejoins.
    std::vector<std::string> args{"--cluster-enabled",     "yes",        "--cluster-node-timeout",     "1000",
                                  "--cluster-config-file", "nodes.conf", "--repl-diskless-sync-delay", "0"};
    if (!options_.password.empty()) args.insert(args.end(), {"--masterauth", options_.password});
    if (options_.tls != nullptr)
      args.insert(args.end(), {"--tls-cluster", "yes", "--tls-replication", "yes"});
    nodes_.push_back(
        std::make_unique<RedisServer>(RedisServerOptions{.port = RedisServer::free_cluster_port(),
                                                         .password = options_.password,
                                                         .extra_args = args,
                                                         .tls = options_.tls}));
  }
}

std::string RedisClusterNodes::url() const {
  std::string url = options_.tls != nullptr ? "rediss+cluster://" : "redis+cluster://";
  for (size_t i = 0; i < std::min<size_t>(2, nodes_.size()); ++i) {
    if (i > 0) url += ",";
    url += "127.0.0.1:" + std::to_string(nodes_[i]->port());
  }
  return url;
}

bool RedisClusterNodes::start(std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  if (nodes_.empty()) return false;
  for (auto& node : nodes_) {
    if (!node->start(left(until))) return false;
  }
  const auto options = cli_options(*nodes_[0]);
  std::vector<std::string> args{options[0], "--cluster", "create"};
  for (const auto& node : nodes_) args.push_back("127.0.0.1:" + std::to_string(node->port()));
  args.insert(args.end(), options.begin() + 1, options.end());
  args.insert(args.end(),
              {"--cluster-replicas", std::to_string(options_.replicas_per_master), "--cluster-yes"});
  if (run_process(args, left(until)).exit_code != 0) return false;
  // Every node knows every other one, and each replica's link to its master is up.
  const std::string known = std::to_string(nodes_.size());
  for (;;) {
    bool ready = wait_state_ok(std::chrono::milliseconds(1));
    for (size_t i = 0; ready && i < nodes_.size(); ++i) {
      ready = info_field(nodes_[i]->command({"CLUSTER", "INFO"}), "cluster_known_nodes") == known;
      const auto info = nodes_[i]->command({"INFO", "replication"});
      if (ready && info_field(info, "role") == "slave")
        ready = info_field(info, "master_link_status") == "up";
    }
    if (ready) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPoll);
  }
}

bool RedisClusterNodes::wait_state_ok(std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  for (;;) {
    bool ok = true;
    for (const auto& node : nodes_) {
      if (!node->running()) continue;
      const auto info = node->command({"CLUSTER", "INFO"});
      ok = ok && info_field(info, "cluster_state") == "ok" &&
           info_field(info, "cluster_slots_assigned") == "16384";
    }
    if (ok) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPoll);
  }
}

bool RedisClusterNodes::restart(size_t i, std::chrono::milliseconds deadline) {
  return nodes_.at(i)->start(deadline);
}

std::string RedisClusterNodes::nodes_text() const {
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    auto text = node->command({"CLUSTER", "NODES"});
    if (!text.empty()) return text;
  }
  return {};
}

uint16_t RedisClusterNodes::master_of_slot(uint16_t slot) const {
  return owner_of(parse_cluster_nodes(nodes_text()), slot);
}

size_t RedisClusterNodes::index_of_port(uint16_t port) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return i;
  }
  return nodes_.size();
}

std::string RedisClusterNodes::node_id(size_t i) const { return nodes_.at(i)->command({"CLUSTER", "MYID"}); }

bool RedisClusterNodes::all_agree_slot(uint16_t slot, uint16_t port) const {
  for (const auto& node : nodes_) {
    // Each running node's own view, not the first node's.
    if (node->running() && owner_of(parse_cluster_nodes(node->command({"CLUSTER", "NODES"})), slot) != port) {
      return false;
    }
  }
  return true;
}

bool RedisClusterNodes::migrate_slots(uint16_t first, uint16_t last, size_t to_index,
                                      std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  if (to_index >= nodes_.size() || first > last || last >= 16384) return false;
  RedisServer& to = *nodes_[to_index];
  const std::string to_id = node_id(to_index);
  if (to_id.empty()) return false;
  for (uint32_t s = first; s <= last; ++s) {
    const std::string slot = std::to_string(s);
    const size_t from_index = index_of_port(master_of_slot(static_cast<uint16_t>(s)));
    if (from_index == to_index) continue;
    if (from_index >= nodes_.size()) return false;
    RedisServer& from = *nodes_[from_index];
    const std::string from_id = node_id(from_index);
    // The order redis-cli --cluster reshard uses: importing first, so that a client the
    // source redirects (ASK) finds the target ready.
    if (to.command({"CLUSTER", "SETSLOT", slot, "IMPORTING", from_id}) != "OK" ||
        from.command({"CLUSTER", "SETSLOT", slot, "MIGRATING", to_id}) != "OK") {
      return false;
    }
    for (;;) {
      const auto keys = from.command_array({"CLUSTER", "GETKEYSINSLOT", slot, "100"});
      if (keys.empty()) break;
      std::vector<std::string> migrate{"MIGRATE", "127.0.0.1", std::to_string(to.port()), "", "0", "5000"};
      if (!options_.password.empty()) migrate.insert(migrate.end(), {"AUTH", options_.password});
      migrate.push_back("KEYS");
      migrate.insert(migrate.end(), keys.begin(), keys.end());
      const auto reply = from.command(migrate);
      if (reply != "OK" && reply != "NOKEY") return false;
      if (Clock::now() >= until) return false;
    }
    // The target first (it owns the slot from then on), then the source, then the others.
    if (to.command({"CLUSTER", "SETSLOT", slot, "NODE", to_id}) != "OK" ||
        from.command({"CLUSTER", "SETSLOT", slot, "NODE", to_id}) != "OK") {
      return false;
    }
    for (const auto& entry : parse_cluster_nodes(nodes_text())) {
      if (!entry.master || entry.failed || entry.port == to.port() || entry.port == from.port()) continue;
      const size_t other = index_of_port(entry.port);
      if (other < nodes_.size() && nodes_[other]->running()) {
        nodes_[other]->command({"CLUSTER", "SETSLOT", slot, "NODE", to_id});
      }
    }
  }
  for (;;) {
    bool agreed = all_agree_slot(first, to.port()) && all_agree_slot(last, to.port());
    if (agreed) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPoll);
  }
}

bool RedisClusterNodes::failover_replica(size_t i, std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  RedisServer& replica = *nodes_.at(i);
  const auto role = replica.command_array({"ROLE"});
  if (role.empty() || role[0] != "slave") return false;
  if (replica.command({"CLUSTER", "FAILOVER"}) != "OK") return false;
  for (;;) {
    const auto now_role = replica.command_array({"ROLE"});
    if (!now_role.empty() && now_role[0] == "master") break;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return wait_state_ok(left(until));
}

}  // namespace rtce::test
