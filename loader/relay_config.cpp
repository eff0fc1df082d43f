// relay_config.cpp — see relay_config.h.
#include "relay_config.h"

#include <charconv>
#include <set>

#include "error.h"

namespace rtce {

void declare_relay_config(ConfigLayers& c) { declare_keys(c, relay_config_keys()); }

std::vector<std::string> relay_restart_only_changes(const RelayConfig& running, const RelayConfig& next) {
  return restart_only_changes(relay_config_keys(), running, next);
}

std::string relay_config_yaml(const RelayConfig& config) { return config_yaml(relay_config_keys(), config); }

std::string relay_config_reference() {
  ConfigLayers layers("RTCEDGE_RELAY_");
  return config_reference(relay_config_keys(), layers, true);
}

std::vector<EndpointConfig> parse_endpoints(const std::vector<std::string>& items, const std::string& where) {
  std::vector<EndpointConfig> out;
  std::set<uint16_t> ids;
  for (const auto& item : items) {
    // "1=198.18.2.2:40000" from flags/env, "id=1;address=198.18.2.2:40000" from YAML maps.
    std::string id_text;
    std::string addr_text;
    if (item.find("id=") == 0 || item.find(";id=") != std::string::npos || item.find("address=") == 0) {
      size_t start = 0;
      while (start < item.size()) {
        size_t end = item.find(';', start);
        if (end == std::string::npos) end = item.size();
        std::string field = item.substr(start, end - start);
        size_t eq = field.find('=');
        std::string name = field.substr(0, eq);
        std::string value = eq == std::string::npos ? "" : field.substr(eq + 1);
        if (name == "id")
          id_text = value;
        else if (name == "address")
          addr_text = value;
        else
          throw ConfigError(where + ": endpoint field '" + name + "' is unknown (expected id, address)");
        start = end + 1;
      }
    } else {
      size_t eq = item.find('=');
      if (eq == std::string::npos)
        throw ConfigError(where + ": endpoint '" + item + "' is not id=address:port");
      id_text = item.substr(0, eq);
      addr_text = item.substr(eq + 1);
    }
    unsigned id = 0;
    auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (ec != std::errc() || end != id_text.data() + id_text.size() || id_text.empty() || id > 65535)
      throw ConfigError(where + ": endpoint id '" + id_text + "' is not 0..65535");
    if (!ids.insert(static_cast<uint16_t>(id)).second)
      throw ConfigError(where + ": endpoint id " + id_text + " is listed twice");
    EndpointConfig e;
    e.id = static_cast<uint16_t>(id);
    e.address = SocketAddress::parse_or_throw(addr_text, where + ": endpoint " + id_text);
    if (e.address.is_unspecified() || e.address.port() == 0)
      throw ConfigError(where + ": endpoint " + id_text + " needs a concrete address and port");
    out.push_back(e);
  }
  return out;
}

std::vector<PeerClusterConfig> parse_peer_clusters(const std::vector<std::string>& items,
                                                   const std::string& where) {
  std::vector<PeerClusterConfig> out;
  std::set<unsigned> clusters;
  for (const auto& item : items) {
    std::string cluster_text, address_text, key_file;
    if (item.find("cluster=") == 0 || item.find(";cluster=") != std::string::npos) {
      // A YAML map, flattened by ConfigLayers as "name=value;name=value".
      for (size_t start = 0; start < item.size();) {
        size_t end = item.find(';', start);
        if (end == std::string::npos) end = item.size();
        const std::string field = item.substr(start, end - start);
        const size_t eq = field.find('=');
        const std::string name = field.substr(0, eq);
        const std::string value = eq == std::string::npos ? "" : field.substr(eq + 1);
        if (name == "cluster")
          cluster_text = value;
        else if (name == "address")
          address_text = value;
        else if (name == "hint_key_file")
          key_file = value;
        else
          throw ConfigError(where + ": peer cluster field '" + name +
                            "' is unknown (expected cluster, address, hint_key_file)");
        start = end + 1;
      }
    } else {
      const size_t eq = item.find('=');
      if (eq == std::string::npos) throw ConfigError(where + ": '" + item + "' is not cluster=address:port");
      cluster_text = item.substr(0, eq);
      address_text = item.substr(eq + 1);
    }
    unsigned cluster = 0;
    auto [end, ec] = std::from_chars(cluster_text.data(), cluster_text.data() + cluster_text.size(), cluster);
    if (ec != std::errc() || end != cluster_text.data() + cluster_text.size() || cluster_text.empty() ||
        cluster > 255)
      throw ConfigError(where + ": cluster '" + cluster_text + "' is not 0..255");
    if (!clusters.insert(cluster).second)
      throw ConfigError(where + ": cluster " + cluster_text + " is listed twice");
    PeerClusterConfig p;
    p.cluster = static_cast<uint8_t>(cluster);
    if (address_text.empty() || address_text == "registry") {
      p.from_registry = true;  // resolve_relay_config checks that a registry is configured
    } else {
      p.address = SocketAddress::parse_or_throw(address_text, where + ": cluster " + cluster_text);
      if (p.address.is_unspecified() || p.address.port() == 0)
        throw ConfigError(
            where + ": cluster " + cluster_text +
            " needs its relay's concrete address and port (or none: learned from the registry)");
    }
    p.hint_key_file = key_file;
    out.push_back(p);
  }
  return out;
}

RelayConfig resolve_relay_config(const ConfigLayers& c) {
  RelayConfig cfg;
  read_keys(c, relay_config_keys(), cfg);
  // The checks that involve more than one key.
  if (cfg.hint_key_file.empty())
    throw ConfigError(c.where("hint_key_file") +
                      ": required; create one with 'rtcedge-relay hint keygen > hint-keys.yaml'");
  if (const uint32_t base = cfg.return_listen.port(); base != 0 && cfg.mode != "userspace") {
    const uint32_t last = base + (cfg.workers ? cfg.workers : 256) - 1;
    if (cfg.xdp_return_port >= base && cfg.xdp_return_port <= last)
      throw ConfigError(c.where("xdp.return_port") + ": " + std::to_string(cfg.xdp_return_port) +
                        " collides with the userspace return ports " + std::to_string(base) + ".." +
                        std::to_string(last) + " (return_listen)");
  }
  for (const auto& p : cfg.peer_clusters)
    if (p.cluster == cfg.cluster_id)
      throw ConfigError(c.where("peers.clusters") + ": cluster " + std::to_string(p.cluster) +
                        " is this relay's own cluster_id");
  for (const auto& p : cfg.peer_clusters)
    if (p.from_registry && cfg.registry_redis_url.empty())
      throw ConfigError(
          c.where("peers.clusters") + ": cluster " + std::to_string(p.cluster) +
          " has no address, so it is learned from the registry, but registry.redis_url is not set; "
          "give its relay's address (cluster=ip:port) or set registry.redis_url");
  if (!cfg.peers_listen.is_unspecified() && cfg.peers_trusted.empty())
    throw ConfigError(c.where("peers.trusted") +
                      ": peers.listen is set, so the peer relays' address ranges are required "
                      "(nothing else may send forwarded flows)");
  if (cfg.mode == "xdp" && cfg.xdp_interfaces.empty())
    throw ConfigError(c.where("xdp.interfaces") + ": mode xdp needs at least one interface");
  return cfg;
}

std::shared_ptr<const RoutingTable> build_routing_table(const RelayConfig& config) {
  auto table = std::make_shared<RoutingTable>();
  table->cluster_id = config.cluster_id;
  table->keys = HintKeys::load_file(config.hint_key_file).keyset();
  for (const auto& e : config.endpoints) table->endpoints.emplace(e.id, e.address.to_v6_mapped());
  for (const auto& p : config.peer_clusters)
    if (!p.address.is_unspecified())  // not learned yet: not routable (wrong_cluster)
      table->peer_clusters[p.cluster] =
          PeerCluster{p.address.to_v6_mapped(),
                      p.hint_key_file.empty() ? table->keys : HintKeys::load_file(p.hint_key_file).keyset()};
  table->trusted_peers = config.peers_trusted;
  return table;
}

}  // namespace rtce
