// redis_client.cpp — RedisOptions from a URL, the client for a topology, and the routing
// key of a command.
#include "redis_client.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include "config_validators.h"
#include "redis_cluster_client.h"
#include "redis_connection.h"
#include "redis_sentinel_client.h"

namespace rtce {

std::string RedisNode::to_string() const {
  return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                             : host + ":" + std::to_string(port);
}

std::optional<RedisOptions> RedisOptions::from_url(std::string_view url) {
  // The grammar lives with the config validators, which check the same URLs at start.
  const auto parsed = parse_redis_url(url);
  if (!parsed) return std::nullopt;
  RedisOptions options;
  switch (parsed->topology) {
    case RedisUrl::Topology::kStandalone: options.topology = RedisTopology::kStandalone; break;
    case RedisUrl::Topology::kSentinel: options.topology = RedisTopology::kSentinel; break;
    case RedisUrl::Topology::kCluster: options.topology = RedisTopology::kCluster; break;
  }
  for (const auto& node : parsed->nodes) options.nodes.push_back(RedisNode{node.host, node.port});
  options.host = parsed->host;
  options.port = parsed->port;
  options.master_name = parsed->master_name;
  options.username = parsed->username;
  options.password = parsed->password;
  options.password_file = parsed->password_file;
  options.sentinel_username = parsed->sentinel_username;
  options.sentinel_password = parsed->sentinel_password;
  options.sentinel_password_file = parsed->sentinel_password_file;
  options.tls.enabled = parsed->tls;
  options.tls.ca_file = parsed->tls_ca_file;
  options.tls.cert_file = parsed->tls_cert_file;
  options.tls.key_file = parsed->tls_key_file;
  options.tls.server_name = parsed->tls_server_name;
  return options;
}

RedisOptions RedisOptions::for_node(const RedisNode& node) const {
  RedisOptions options = *this;
  options.topology = RedisTopology::kStandalone;
  options.host = node.host;
  options.port = node.port;
  options.nodes = {node};
  return options;
}

std::string RedisOptions::current_password() const {
  if (password_file.empty()) return password;
  std::ifstream in(password_file);
  if (!in) return password;  // unreadable now: the last configured password is the best guess
  std::stringstream text;
  text << in.rdbuf();
  std::string value = text.str();
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  return value;
}

std::string RedisOptions::describe() const {
  std::string nodes_text;
  for (const auto& node : nodes) nodes_text += (nodes_text.empty() ? "" : ",") + node.to_string();
  std::string out;
  switch (topology) {
    case RedisTopology::kStandalone: out = RedisNode{host, port}.to_string(); break;
    case RedisTopology::kSentinel: out = "Sentinel master '" + master_name + "' via " + nodes_text; break;
    case RedisTopology::kCluster: out = "Redis Cluster via " + nodes_text; break;
  }
  return tls.enabled ? out + " (TLS)" : out;
}

std::unique_ptr<RedisClient> make_redis_client(boost::asio::io_context& io, RedisOptions options,
                                               SyncCounters& counters) {
  std::unique_ptr<RedisClient> client;
  switch (options.topology) {
    case RedisTopology::kStandalone:
      client = std::make_unique<RedisConnection>(io, std::move(options), counters);
      break;
    case RedisTopology::kSentinel:
      client = std::make_unique<RedisSentinelClient>(io, std::move(options), counters);
      break;
    case RedisTopology::kCluster:
      client = std::make_unique<RedisClusterClient>(io, std::move(options), counters);
      break;
  }
  return client;
}

namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
  });
}

}  // namespace

std::string_view routing_key(std::span<const std::string_view> args) {
  if (args.size() < 2) return {};
  const std::string_view name = args[0];
  if (equals_ignoring_case(name, "EVAL") || equals_ignoring_case(name, "EVALSHA")) {
    return args.size() >= 4 && args[2] != "0" ? args[3] : std::string_view{};
  }
  for (const std::string_view keyless : {"PING", "PUBLISH", "SCAN", "SUBSCRIBE", "ASKING", "CLUSTER",
                                         "SENTINEL", "ROLE", "AUTH", "INFO", "SCRIPT"}) {
    if (equals_ignoring_case(name, keyless)) return {};
  }
  return args[1];
}

}  // namespace rtce
