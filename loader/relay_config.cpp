// relay_config.cpp — see relay_config.h.
#include "relay_config.h"

#include <charconv>
#include <set>
#include <tuple>

#include "error.h"
#include "redis_connection.h"

namespace rtce {

void declare_relay_config(ConfigLayers& c) {
  using K = ConfigLayers::Kind;
  c.declare("mode", K::scalar, "data path: userspace | xdp | auto (default userspace)");
  c.declare("listen", K::list, "VIP address:port list the clients send to (default 127.0.0.1:3478)");
  c.declare("return_listen", K::scalar,
            "address transceivers send replies to; port 0 = one ephemeral port per worker (default [::]:0)");
  c.declare("workers", K::scalar, "worker threads, each with its own SO_REUSEPORT sockets (0 = one per CPU)");
  c.declare("pin_cpus", K::scalar, "pin worker i to CPU i (default true)");
  c.declare("batch_size", K::scalar, "datagrams per recvmmsg/sendmmsg call (default 32)");
  c.declare("socket_buffer_bytes", K::scalar, "SO_RCVBUF/SO_SNDBUF per socket (default 4194304)");
  c.declare("cluster_id", K::scalar,
            "this relay's cluster id; hints for other clusters are rejected (default 0)");
  c.declare("hint_key_file", K::scalar, "routing-hint key file (rtcedge-relay hint keygen); required");
  c.declare("endpoints", K::list, "transceiver endpoints, id=address:port (e.g. 1=198.18.2.2:40000)");
  c.declare(
      "registry.redis_url", K::scalar,
      "redis://host:port of the shared registry; its transceiver endpoints join `endpoints` (default none)");
  c.declare("registry.ttl", K::scalar, "must match the transceivers' registry.ttl (default 3s)");
  c.declare("flow_store.redis_url", K::scalar,
            "redis://host:port of the shared flow store: new flows are written there, and a flow "
            "this relay does not know is looked up there on its first non-STUN packet (default none)");
  c.declare("flow_store.ttl", K::scalar, "how long the store keeps a flow without a refresh (default 120s)");
  c.declare("flow_store.refresh_interval", K::scalar,
            "an active flow is rewritten this often (default a third of flow_store.ttl)");
  c.declare("flow_store.lookup_timeout", K::scalar,
            "how long the packets of an unknown flow wait for the store's answer (default 500ms)");
  c.declare("flow_store.lookups_per_second", K::scalar,
            "lookups each worker may start per second; misses beyond it are dropped (default 2000)");
  c.declare("flows.capacity", K::scalar, "maximum flows, split evenly across workers (default 65536)");
  c.declare("flows.idle_timeout", K::scalar,
            "a flow with no client packet for this long expires (default 30s)");
  c.declare("flows.evict_idle_after", K::scalar,
            "when full, a new flow may replace one idle at least this long (default 5s)");
  c.declare("flows.max_per_hint", K::scalar,
            "flows one hint (one session's server ufrag) may create per flows.limit_window, in each "
            "worker and in XDP; further first packets are dropped as hint_flow_limit (0 = no limit; "
            "default 8)");
  c.declare("flows.max_per_source_prefix", K::scalar,
            "flows one client prefix (flows.source_prefix_v4/v6) may create per flows.limit_window, "
            "in each worker and in XDP; further first packets are dropped as source_prefix_flow_limit "
            "(0 = no limit; default 1024)");
  c.declare("flows.limit_window", K::scalar,
            "the window of flows.max_per_hint and flows.max_per_source_prefix (default 10s)");
  c.declare("flows.source_prefix_v4", K::scalar,
            "IPv4 prefix length flows.max_per_source_prefix counts by (default 24)");
  c.declare("flows.source_prefix_v6", K::scalar,
            "IPv6 prefix length flows.max_per_source_prefix counts by (default 56)");
  c.declare("admin.listen", K::scalar,
            "address:port of /metrics, /healthz, /readyz (default 127.0.0.1:9478)");
  declare_logging_keys(c);
  declare_http_server_keys(c);
  c.declare("xdp.interfaces", K::list,
            "NICs the XDP program attaches to: the VIP side and the transceiver side");
  c.declare("xdp.pin_path", K::scalar,
            "bpffs directory for pinned maps and links (default /sys/fs/bpf/rtcedge)");
  c.declare("xdp.allow_generic", K::scalar,
            "fall back to generic (skb) XDP when native attach fails (default false)");
  c.declare("xdp.relay_address4", K::scalar,
            "this relay's IPv4 address towards transceivers (XDP source, return path)");
  c.declare("xdp.relay_address6", K::scalar, "this relay's IPv6 address towards transceivers");
  c.declare("xdp.return_port", K::scalar, "UDP port XDP forwards from and takes replies on (default 3479)");
  c.declare("xdp.new_flow_budget", K::scalar, "new flows per CPU per millisecond XDP may create (0 = 64)");
  c.declare("join_existing", K::scalar,
            "start even if another relay serves these VIPs (or XDP interfaces, pin path) here, joining its "
            "SO_REUSEPORT group and taking a share of its flows (default false: refuse)");
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
  cfg.mode = c.get_string("mode", "userspace");
  if (cfg.mode != "userspace" && cfg.mode != "xdp" && cfg.mode != "auto")
    throw ConfigError(c.where("mode") + ": '" + cfg.mode + "' is not one of userspace, xdp, auto");

  for (const auto& text : c.get_list("listen", {"127.0.0.1:3478"})) {
    auto addr = SocketAddress::parse_or_throw(text, c.where("listen"));
    if (addr.port() == 0) throw ConfigError(c.where("listen") + ": '" + text + "' needs a port");
    for (const auto& other : cfg.listen)
      if (other == addr) throw ConfigError(c.where("listen") + ": '" + text + "' is listed twice");
    cfg.listen.push_back(addr);
  }
  if (cfg.listen.empty()) throw ConfigError(c.where("listen") + ": at least one VIP address is required");
  if (cfg.listen.size() > 16) throw ConfigError(c.where("listen") + ": at most 16 VIPs");

  cfg.return_listen =
      SocketAddress::parse_or_throw(c.get_string("return_listen", "[::]:0"), c.where("return_listen"));
  if (cfg.return_listen.is_v4())
    throw ConfigError(c.where("return_listen") +
                      ": must be an IPv6 address ([::]:0 is dual-stack and takes IPv4 transceivers too)");
  cfg.workers = static_cast<uint32_t>(c.get_uint("workers", 0, 0, 256));
  cfg.pin_cpus = c.get_bool("pin_cpus", true);
  cfg.batch_size = static_cast<uint32_t>(c.get_uint("batch_size", 32, 1, 1024));
  cfg.socket_buffer_bytes =
      static_cast<uint32_t>(c.get_uint("socket_buffer_bytes", 4 << 20, 65536, 1u << 30));
  cfg.cluster_id = static_cast<uint8_t>(c.get_uint("cluster_id", 0, 0, 255));
  cfg.hint_key_file = c.get_string("hint_key_file", "");
  if (cfg.hint_key_file.empty())
    throw ConfigError(c.where("hint_key_file") +
                      ": required; create one with 'rtcedge-relay hint keygen > hint-keys.yaml'");
  cfg.endpoints = parse_endpoints(c.get_list("endpoints", {}), c.where("endpoints"));
  cfg.registry_redis_url = c.get_string("registry.redis_url", "");
  if (!cfg.registry_redis_url.empty() && !RedisOptions::from_url(cfg.registry_redis_url))
    throw ConfigError(c.where("registry.redis_url") + ": '" + cfg.registry_redis_url +
                      "' is not redis://[[user]:password@]host[:port][/db]");
  cfg.registry_ttl = c.get_duration("registry.ttl", 3'000'000'000, 300'000'000, 300'000'000'000);
  cfg.flow_store_redis_url = c.get_string("flow_store.redis_url", "");
  if (!cfg.flow_store_redis_url.empty() && !RedisOptions::from_url(cfg.flow_store_redis_url))
    throw ConfigError(c.where("flow_store.redis_url") + ": '" + cfg.flow_store_redis_url +
                      "' is not redis://[[user]:password@]host[:port][/db]");
  cfg.flow_store_ttl = c.get_duration("flow_store.ttl", 120'000'000'000, 3'000'000'000, 86'400'000'000'000);
  cfg.flow_store_refresh_interval =
      c.get_duration("flow_store.refresh_interval", cfg.flow_store_ttl / 3, 100'000'000, 86'400'000'000'000);
  if (cfg.flow_store_refresh_interval * 2 > cfg.flow_store_ttl)
    throw ConfigError(c.where("flow_store.refresh_interval") +
                      ": must be at most half of flow_store.ttl, or active flows expire from the store");
  cfg.flow_store_lookup_timeout =
      c.get_duration("flow_store.lookup_timeout", 500'000'000, 1'000'000, 10'000'000'000);
  cfg.flow_store_lookups_per_second =
      static_cast<uint32_t>(c.get_uint("flow_store.lookups_per_second", 2000, 1, 1'000'000));
  cfg.flow_capacity = static_cast<uint32_t>(c.get_uint("flows.capacity", 65536, 1, 1u << 26));
  cfg.flow_idle_timeout = c.get_duration("flows.idle_timeout", 30'000'000'000, 1'000'000, 86'400'000'000'000);
  cfg.flow_evict_idle_after = c.get_duration("flows.evict_idle_after", 5'000'000'000, 0, 86'400'000'000'000);
  cfg.flow_limits.max_per_hint =
      static_cast<uint32_t>(c.get_uint("flows.max_per_hint", RTCE_FLOW_LIMIT_DEFAULT_PER_HINT, 0, 1'000'000));
  cfg.flow_limits.max_per_source_prefix = static_cast<uint32_t>(
      c.get_uint("flows.max_per_source_prefix", RTCE_FLOW_LIMIT_DEFAULT_PER_SOURCE_PREFIX, 0, 1u << 26));
  cfg.flow_limits.window =
      c.get_duration("flows.limit_window", static_cast<Nanos>(RTCE_FLOW_LIMIT_DEFAULT_WINDOW_NS), 1'000'000,
                     86'400'000'000'000);
  cfg.flow_limits.source_prefix_v4 =
      static_cast<uint8_t>(c.get_uint("flows.source_prefix_v4", RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V4, 1, 32));
  cfg.flow_limits.source_prefix_v6 =
      static_cast<uint8_t>(c.get_uint("flows.source_prefix_v6", RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V6, 1, 128));
  cfg.admin_listen =
      SocketAddress::parse_or_throw(c.get_string("admin.listen", "127.0.0.1:9478"), c.where("admin.listen"));
  resolve_logging_keys(c, cfg.log_format, cfg.log_level);
  cfg.xdp_interfaces = c.get_list("xdp.interfaces", {});
  cfg.xdp_pin_path = c.get_string("xdp.pin_path", "/sys/fs/bpf/rtcedge");
  if (cfg.xdp_pin_path.empty() || cfg.xdp_pin_path.front() != '/')
    throw ConfigError(c.where("xdp.pin_path") + ": must be an absolute path on a bpf filesystem");
  cfg.xdp_allow_generic = c.get_bool("xdp.allow_generic", false);
  cfg.xdp_relay_address4 = c.get_string("xdp.relay_address4", "");
  cfg.xdp_relay_address6 = c.get_string("xdp.relay_address6", "");
  for (const auto& [key, text, family] :
       {std::tuple{"xdp.relay_address4", cfg.xdp_relay_address4, AF_INET},
        std::tuple{"xdp.relay_address6", cfg.xdp_relay_address6, AF_INET6}}) {
    if (text.empty()) continue;
    auto parsed = SocketAddress::parse((family == AF_INET6 ? "[" + text + "]" : text) + ":1");
    if (!parsed || parsed->family() != family || parsed->is_unspecified())
      throw ConfigError(c.where(key) + ": '" + text + "' is not a concrete IPv" +
                        (family == AF_INET ? "4" : "6") + " address");
  }
  cfg.xdp_return_port = static_cast<uint16_t>(c.get_uint("xdp.return_port", 3479, 1, 65535));
  if (const uint32_t base = cfg.return_listen.port(); base != 0 && cfg.mode != "userspace") {
    const uint32_t last = base + (cfg.workers ? cfg.workers : 256) - 1;
    if (cfg.xdp_return_port >= base && cfg.xdp_return_port <= last)
      throw ConfigError(c.where("xdp.return_port") + ": " + std::to_string(cfg.xdp_return_port) +
                        " collides with the userspace return ports " + std::to_string(base) + ".." +
                        std::to_string(last) + " (return_listen)");
  }
  cfg.xdp_new_flow_budget = static_cast<uint32_t>(c.get_uint("xdp.new_flow_budget", 0, 0, 1u << 20));
  cfg.join_existing = c.get_bool("join_existing", false);
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
