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
  if (cfg.mode == "xdp" && cfg.xdp_interfaces.empty())
    throw ConfigError(c.where("xdp.interfaces") + ": mode xdp needs at least one interface");
  return cfg;
}

std::shared_ptr<const RoutingTable> build_routing_table(const RelayConfig& config) {
  auto table = std::make_shared<RoutingTable>();
  table->cluster_id = config.cluster_id;
  table->keys = HintKeys::load_file(config.hint_key_file).keyset();
  for (const auto& e : config.endpoints) table->endpoints.emplace(e.id, e.address.to_v6_mapped());
  return table;
}

}  // namespace rtce
