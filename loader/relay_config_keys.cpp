// relay_config_keys.cpp — the table of rtcedge-relay's configuration keys: each key's name,
// default, range, help, reference text and whether SIGHUP applies it, written once. The flags,
// env vars, YAML keys, validation, restart diff, --check-config output and the key table of
// docs/configuration.md all come from here (config_keys.h).
#include <algorithm>

#include "error.h"
#include "relay_config.h"

namespace rtce {
namespace {

using namespace keys;
using C = RelayConfig;
constexpr Nanos ms = 1'000'000, s = 1'000'000'000, day = 86'400 * s;

std::string address_list(const std::vector<SocketAddress>& list) {
  std::vector<std::string> items;
  for (const auto& a : list) items.push_back(a.to_string());
  return yaml_string_list(items);
}

ConfigTable<C> build() {
  ConfigTable<C> t;
  t.push_back(
      enum_key<C>("mode", &C::mode, "userspace", {"userspace", "xdp", "auto"},
                  {.help = "data path",
                   .doc = "data path: `userspace`; `xdp` (attach the XDP program to `xdp.interfaces`, fail "
                          "to start if that is impossible); `auto` (try XDP, and when it cannot attach log "
                          "why and run the userspace relay; `rtcedge_relay_mode` says which). The userspace "
                          "workers run in every mode: in XDP mode they take what the program passes up."}));
  t.push_back(custom_key<C>(
      "listen", ConfigLayers::Kind::list,
      {.help = "VIP address:port list the clients send to",
       .doc = "VIP address:port list (IPv4 and IPv6, at most 16). `0.0.0.0:P` / `[::]:P` take every address; "
              "replies still leave from the exact address the client used (`IP_PKTINFO`). IPv6 sockets are "
              "v6-only so both wildcards can coexist.",
       .default_text = "[\"127.0.0.1:3478\"]"},
      [](const ConfigLayers& c, C& cfg) {
        cfg.listen.clear();
        for (const auto& text : c.get_list("listen", {"127.0.0.1:3478"})) {
          auto addr = check_socket_address(text, c.where("listen"), {.need_port = true});
          if (std::find(cfg.listen.begin(), cfg.listen.end(), addr) != cfg.listen.end())
            throw ConfigError(c.where("listen") + ": '" + text + "' is listed twice");
          cfg.listen.push_back(addr);
        }
        if (cfg.listen.empty())
          throw ConfigError(c.where("listen") + ": at least one VIP address is required");
        if (cfg.listen.size() > 16) throw ConfigError(c.where("listen") + ": at most 16 VIPs");
      },
      [](const C& cfg) { return address_list(cfg.listen); }));
  t.push_back(address_key<C>(
      "return_listen", &C::return_listen, "[::]:0", {},
      {.help = "address transceivers send replies to; port 0 = one ephemeral port per worker",
       .doc = "where transceivers send their replies. Dual-stack IPv6 (IPv4 transceivers too). Port 0: one "
              "ephemeral port per worker; port P: worker *i* uses P+*i*."},
      [](const SocketAddress& address, const std::string& where) {
        if (address.is_v4())
          throw ConfigError(
              where + ": must be an IPv6 address ([::]:0 is dual-stack and takes IPv4 transceivers too)");
      }));
  {
    auto workers =
        uint_key<C>("workers", &C::workers, 0, 0, 256,
                    {.help = "worker threads, each with its own SO_REUSEPORT sockets (0 = one per CPU)",
                     .doc = "worker threads; 0 = one per CPU the process may run on. Each has its own "
                            "SO_REUSEPORT socket per VIP and its own return socket."});
    // The running service holds the resolved count; 0 asks for the same again.
    workers.same = [](const C& running, const C& next) {
      return next.workers == 0 || next.workers == running.workers;
    };
    t.push_back(std::move(workers));
  }
  t.push_back(bool_key<C>("pin_cpus", &C::pin_cpus, true,
                          {.help = "pin worker i to the i-th allowed CPU",
                           .doc = "pin worker *i* to the *i*-th allowed CPU (wrapping)."}));
  t.push_back(uint_key<C>("batch_size", &C::batch_size, 32, 1, 1024,
                          {.help = "datagrams per recvmmsg/sendmmsg call",
                           .doc = "datagrams per `recvmmsg`/`sendmmsg` (1..1024)."}));
  t.push_back(uint_key<C>(
      "socket_buffer_bytes", &C::socket_buffer_bytes, 4 << 20, 65536, 1u << 30,
      {.help = "SO_RCVBUF/SO_SNDBUF per socket",
       .doc = "`SO_RCVBUF`/`SO_SNDBUF` per socket (the kernel caps it at `net.core.rmem_max`/`wmem_max`)."}));
  t.push_back(bool_key<C>(
      "gso", &C::gso, true,
      {.help = "send each batch's datagrams for one transceiver endpoint as UDP GSO messages",
       .doc =
           "UDP GSO towards transceivers: the datagrams of a batch that go to one endpoint leave as one "
           "`UDP_SEGMENT` message per size, each PROXY v2 header padded to a size class with a NOOP TLV "
           "([wire-format.md](wire-format.md#padding-noop-tlv)). Off: one message per datagram. A kernel or "
           "device that refuses GSO turns it off for the worker (`rtcedge_relay_gso_fallbacks_total`)."}));
  t.push_back(uint_key<C>(
      "gso_max_datagram", &C::gso_max_datagram, 1452, 512, 9000,
      {.help = "longest datagram to a transceiver that GSO pads to or carries (path MTU - 48)",
       .doc = "the longest datagram (UDP payload) towards a transceiver that padding produces and GSO "
              "carries: the relay -> transceiver path's MTU minus 48 (IPv6 and UDP headers; 1452 = a "
              "1500-byte MTU). Longer datagrams go unpadded, one per message."}));
  t.push_back(uint_key<C>(
      "cluster_id", &C::cluster_id, 0, 0, 255,
      {.help = "this relay's cluster id; hints for other clusters are rejected",
       .doc = "this relay's cluster (0..255); hints for other clusters are rejected (`wrong_cluster`).",
       .reloadable = true}));
  t.push_back(string_key<C>(
      "hint_key_file", &C::hint_key_file, "",
      {.help = "routing-hint key file (rtcedge-relay hint keygen); required",
       .doc = "routing-hint key file, see [wire-format.md](wire-format.md#key-file-and-rotation).",
       .default_text = "— (required)",
       .reloadable = true}));
  t.push_back(custom_key<C>(
      "endpoints", ConfigLayers::Kind::list,
      {.help = "transceiver endpoints, id=address:port (e.g. 1=198.18.2.2:40000)",
       .doc = "transceiver endpoints. File: a list of `{id: N, address: \"ip:port\"}`; flags/env: "
              "`1=198.18.2.2:40000,2=[2001:db8::2]:40000`. Ids 0..65535, unique.",
       .default_text = "[]",
       .reloadable = true},
      [](const ConfigLayers& c, C& cfg) {
        cfg.endpoints = parse_endpoints(c.get_list("endpoints", {}), c.where("endpoints"));
      },
      [](const C& cfg) {
        std::string out = "[";
        for (const auto& e : cfg.endpoints)
          out += (out.size() > 1 ? ", " : "") + std::string("{id: ") + std::to_string(e.id) +
                 ", address: " + yaml_quote(e.address.to_string()) + "}";
        return out + "]";
      }));
  t.push_back(custom_key<C>(
      "peers.listen", ConfigLayers::Kind::scalar,
      {.help = "global relay, owner role: address:port peer relays of other clusters forward flows to "
               "(default none)",
       .doc = "global relay, owner role ([global-relay.md](global-relay.md)): the concrete address:port "
              "where ingress relays of other clusters send the flows whose hints name this cluster "
              "(PROXY v2 + client payload). Unset: the role is off. Needs `peers.trusted`. With "
              "`registry.redis_url` it is published there for this cluster (refreshed at least every "
              "`registry.ttl` / 3, "
              "withdrawn on a clean stop), for ingress relays that learn it.",
       .default_text = "—"},
      [](const ConfigLayers& c, C& cfg) {
        const std::string text = c.get_string("peers.listen", "");
        if (text.empty()) return;
        cfg.peers_listen = check_socket_address(text, c.where("peers.listen"), {.need_port = true});
        if (cfg.peers_listen.is_unspecified())
          throw ConfigError(c.where("peers.listen") +
                            ": needs a concrete address (replies must leave from the address the peers "
                            "send to)");
      },
      [](const C& cfg) {
        return cfg.peers_listen.is_unspecified() ? std::string("\"\"")
                                                 : yaml_quote(cfg.peers_listen.to_string());
      }));
  t.push_back(parsed_list_key<C>(
      "peers.trusted", &C::peers_trusted, {},
      {.help = "address ranges allowed to send on peers.listen (the peer ingress relays)",
       .doc =
           "address ranges (`10.1.0.0/24`, `fd00:1::/64`, or one address) of the peer ingress relays. A "
           "datagram on `peers.listen` from elsewhere is dropped (`peer_untrusted`): only these may claim a "
           "client address.",
       .reloadable = true},
      &IpPrefix::parse_or_throw));
  t.push_back(custom_key<C>(
      "peers.clusters", ConfigLayers::Kind::list,
      {.help = "global relay, ingress role: other clusters' relays, cluster=address:port or cluster=registry",
       .doc =
           "global relay, ingress role: a first packet whose hint names one of these clusters is "
           "forwarded to that cluster's relay (its `peers.listen`), and so is the rest of the flow. File: a "
           "list of `{cluster: N, address: \"ip:port\", hint_key_file: path}` (`hint_key_file` optional: "
           "that cluster's keys, default this relay's own); flags/env: `2=198.18.100.2:3480,...`. An entry "
           "without `address` (flags/env: `2=registry`) learns it from the registry (`registry.redis_url`, "
           "required), where that cluster's relays publish their `peers.listen`. Both data paths (XDP: the "
           "`peer_clusters` map). A hint for a cluster not listed, or not learned yet, is rejected "
           "(`hint_rejected`).",
       .default_text = "[]",
       .reloadable = true},
      [](const ConfigLayers& c, C& cfg) {
        cfg.peer_clusters = parse_peer_clusters(c.get_list("peers.clusters", {}), c.where("peers.clusters"));
      },
      [](const C& cfg) {
        std::string out = "[";
        for (const auto& p : cfg.peer_clusters) {
          out += (out.size() > 1 ? ", " : "") + std::string("{cluster: ") + std::to_string(p.cluster);
          if (!p.from_registry) out += ", address: " + yaml_quote(p.address.to_string());
          if (!p.hint_key_file.empty()) out += ", hint_key_file: " + yaml_quote(p.hint_key_file);
          out += "}";
        }
        return out + "]";
      }));
  t.push_back(redis_url_key<C>(
      "registry.redis_url", &C::registry_redis_url,
      {.help =
           "Redis URL of the shared registry (redis[s]://, redis[s]+sentinel://, redis[s]+cluster://); its "
           "transceiver endpoints join `endpoints` (default none)",
       .doc = "Redis URL of the shared registry: one server, a Sentinel group or a Redis Cluster, with or "
              "without "
              "TLS ([redis.md](redis.md#deployments)). Its live transceiver "
              "endpoints join `endpoints` (a configured id wins) within about 1 s of a change; an endpoint "
              "whose heartbeats stop leaves within `registry.ttl` plus 1 s. Redis down: the last known set "
              "is kept, and when Redis answers again after an outage (down, or frozen longer than a third of "
              "`registry.ttl`) an endpoint missing from it is kept for one more `registry.ttl` so that its "
              "transceiver can register again (records all expire while Redis is frozen). Flows on an "
              "endpoint that left are removed (its sessions went with it); flows of an endpoint whose "
              "address changed follow it."}));
  t.push_back(duration_key<C>(
      "registry.ttl", &C::registry_ttl, 3 * s, 300 * ms, 300 * s,
      {.help = "must match the transceivers' registry.ttl",
       .doc = "the TTL the transceivers heartbeat against (300ms..300s); set it like theirs."}));
  t.push_back(string_key<C>(
      "registry.cache_file", &C::registry_cache_file, "",
      {.help = "file where the last endpoints the registry named are kept, so that a relay restarted "
               "while Redis is down still routes (default none)",
       .doc =
           "a file on local disk (a node-local or pod-lifetime volume) holding the last transceiver "
           "endpoints "
           "the registry named, rewritten (atomically) on every change. At start, until the registry "
           "answers, "
           "the relay routes with it: a relay restarted during a Redis outage still maps the endpoint ids in "
           "hints to addresses and is ready. When the registry answers, cached endpoints it does not list "
           "are kept for one more `registry.ttl` (their transceivers register again after an outage) and "
           "then leave. "
           "Unreadable or older than `registry.cache_max_age`: ignored (logged). Empty: none."}));
  t.push_back(duration_key<C>(
      "registry.cache_max_age", &C::registry_cache_max_age, 3600 * s, 1 * s, day,
      {.help = "an older registry.cache_file is ignored at start",
       .doc = "a `registry.cache_file` written longer ago than this is ignored at start (1s..1d): "
              "transceivers may have moved since."}));
  t.push_back(redis_url_key<C>(
      "flow_store.redis_url", &C::flow_store_redis_url,
      {.help = "Redis URL of the shared flow store (as registry.redis_url): new flows are written there, "
               "and a flow this relay does not know is looked up there on its first "
               "non-STUN packet (default none)",
       .doc =
           "Redis URL of the shared flow store ([redis.md](redis.md#flow-recovery-in-the-relay); the forms "
           "of "
           "[Deployments](redis.md#deployments): on a Redis Cluster the flows spread over every shard). "
           "Every new flow is written there (`SET … PX flow_store.ttl`); a non-STUN datagram of a flow this "
           "relay does not have waits while the store is asked, and the flow is installed (and, in XDP mode, "
           "put into the flows map). Usually the same Redis as `registry.redis_url`. Redis down: established "
           "flows and new sessions are unaffected; recovery falls back to the next STUN consent check."}));
  t.push_back(duration_key<C>(
      "flow_store.ttl", &C::flow_store_ttl, 120 * s, 3 * s, day,
      {.help = "how long the store keeps a flow without a refresh",
       .doc =
           "3s..1d; how long the store keeps a flow nobody refreshes. Keep it above `flows.idle_timeout`."}));
  {
    // Its default follows flow_store.ttl, read just before.
    auto refresh = duration_key<C>(
        "flow_store.refresh_interval", &C::flow_store_refresh_interval, 0, 100 * ms, day,
        {.help = "an active flow is rewritten this often (default a third of flow_store.ttl)",
         .doc = "100ms..1d, at most half the TTL; a flow with client packets since its last write is written "
                "again this often (bounded per worker; the XDP loader refreshes from its idle sweep). Also "
                "how soon a Redis that lost its data has the live flows back.",
         .default_text = "a third of `flow_store.ttl`"});
    refresh.read = [](const ConfigLayers& c, C& cfg) {
      cfg.flow_store_refresh_interval =
          c.get_duration("flow_store.refresh_interval", cfg.flow_store_ttl / 3, 100 * ms, day);
      if (cfg.flow_store_refresh_interval * 2 > cfg.flow_store_ttl)
        throw ConfigError(c.where("flow_store.refresh_interval") +
                          ": must be at most half of flow_store.ttl, or active flows expire from the store");
    };
    t.push_back(std::move(refresh));
  }
  t.push_back(duration_key<C>("flow_store.lookup_timeout", &C::flow_store_lookup_timeout, 500 * ms, 1 * ms,
                              10 * s,
                              {.help = "how long the packets of an unknown flow wait for the store's answer",
                               .doc = "1ms..10s; how long the packets of an unknown flow wait for the store "
                                      "(at most 8 per flow, 512 per worker, 1500 bytes each)."}));
  t.push_back(
      uint_key<C>("flow_store.lookups_per_second", &C::flow_store_lookups_per_second, 2000, 1, 1'000'000,
                  {.help = "lookups each worker may start per second; misses beyond it are dropped",
                   .doc = "per worker; a flood of non-STUN packets from spoofed sources costs at most this "
                          "many Redis reads (the rest count as `flow_lookup_rate_limited`). A flow the store "
                          "does not have is not asked again for 1 s."}));
  t.push_back(uint_key<C>(
      "flows.capacity", &C::flow_capacity, 65536, 1, 1u << 26,
      {.help = "maximum flows, split evenly across workers",
       .doc = "maximum flows, split evenly across workers (each worker gets ⌈capacity/workers⌉)."}));
  t.push_back(duration_key<C>(
      "flows.idle_timeout", &C::flow_idle_timeout, 30 * s, 1 * ms, day,
      {.help = "a flow with no client packet for this long expires",
       .doc = "a flow with no packet **from the client** for this long expires. 30 s matches the ICE consent "
              "timeout (RFC 7675): browsers send a consent check every ~5 s even in silence."}));
  t.push_back(duration_key<C>(
      "flows.evict_idle_after", &C::flow_evict_idle_after, 5 * s, 0, day,
      {.help = "when full, a new flow may replace one idle at least this long",
       .doc = "when a worker's table is full, a new flow replaces the least recently active of 16 sampled "
              "flows if it has been idle at least this long; otherwise the new flow is refused "
              "(`flow_table_full`). A call sends media every 20 ms and is never evicted."}));
  t.push_back(uint_key<C>(
      "flows.max_per_hint", [](auto& c) -> auto& { return c.flow_limits.max_per_hint; },
      RTCE_FLOW_LIMIT_DEFAULT_PER_HINT, 0, 1'000'000,
      {.help = "flows one hint (one session's server ufrag) may create per flows.limit_window, in each "
               "worker and "
               "in XDP; further first packets are dropped as hint_flow_limit (0 = no limit)",
       .doc =
           "0..1000000; flows one hint (one session's server ufrag) may create per `flows.limit_window`; "
           "further first packets are dropped as `hint_flow_limit`. Anyone gets a valid hint by POSTing an "
           "offer, so without this one replayed Binding request from spoofed sources fills the table. A real "
           "call makes 1–4 flows per hint. The userspace relay applies it per worker (a hint spread over all "
           "workers gets at most workers × this), the XDP program across all CPUs. 0 = no limit."}));
  t.push_back(uint_key<C>(
      "flows.max_per_source_prefix", [](auto& c) -> auto& { return c.flow_limits.max_per_source_prefix; },
      RTCE_FLOW_LIMIT_DEFAULT_PER_SOURCE_PREFIX, 0, 1u << 26,
      {.help =
           "flows one client prefix (flows.source_prefix_v4/v6) may create per flows.limit_window, in each "
           "worker and in XDP; further first packets are dropped as source_prefix_flow_limit (0 = no limit)",
       .doc = "0..2^26; flows one client prefix (`flows.source_prefix_v4`/`_v6`) may create per "
              "`flows.limit_window`, whatever the hints; further first packets are dropped as "
              "`source_prefix_flow_limit`. Per worker in userspace, across CPUs in XDP. Raise it for large "
              "carrier-grade NATs. 0 = no limit."}));
  t.push_back(
      duration_key<C>("flows.limit_window", [](auto& c) -> auto& { return c.flow_limits.window; },
                      static_cast<Nanos>(RTCE_FLOW_LIMIT_DEFAULT_WINDOW_NS), 1 * ms, day,
                      {.help = "the window of flows.max_per_hint and flows.max_per_source_prefix",
                       .doc = "1ms..1d; the window of both limits: it starts at a key's first flow, and a "
                              "key that was refused gets flows again once it ends (a NAT rebind late in a "
                              "call; an ICE restart brings a new hint with a window of its own)."}));
  t.push_back(uint_key<C>("flows.source_prefix_v4",
                          [](auto& c) -> auto& { return c.flow_limits.source_prefix_v4; },
                          RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V4, 1, 32,
                          {.help = "IPv4 prefix length flows.max_per_source_prefix counts by",
                           .doc = "1..32; IPv4 prefix length `flows.max_per_source_prefix` counts by."}));
  t.push_back(uint_key<C>("flows.source_prefix_v6",
                          [](auto& c) -> auto& { return c.flow_limits.source_prefix_v6; },
                          RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V6, 1, 128,
                          {.help = "IPv6 prefix length flows.max_per_source_prefix counts by",
                           .doc = "1..128; IPv6 prefix length `flows.max_per_source_prefix` counts by (/56 "
                                  "is a typical end-site delegation; /64 for one LAN)."}));
  t.push_back(address_key<C>(
      "admin.listen", &C::admin_listen, "127.0.0.1:9478", {},
      {.help = "address:port of /metrics, /healthz, /readyz", .doc = "`/metrics`, `/healthz`, `/readyz`."}));
  for (auto& k : logging_keys<C>(&C::log_format, &C::log_level)) t.push_back(std::move(k));
  t.push_back(http_max_connections_key<C>(
      &C::http_max_connections,
      "open connections the admin server (`admin.listen`) keeps, 1..1000000; the same key as the "
      "transceiver's (declared once for every binary). At the cap a new connection closes the idlest idle "
      "one. Takes effect on restart."));
  t.push_back(string_list_key<C>(
      "xdp.interfaces", &C::xdp_interfaces, {},
      {.help = "NICs the XDP program attaches to: the VIP side and the transceiver side",
       .doc = "NICs to attach the XDP program to: the one the VIPs arrive on and the one towards the "
              "transceivers (the same NIC or two). Required for `mode: xdp`."}));
  t.push_back(string_key<C>("xdp.pin_path", &C::xdp_pin_path, "/sys/fs/bpf/rtcedge",
                            {.help = "bpffs directory for pinned maps and links",
                             .doc = "bpffs directory: `maps/<name>` and `links/<ifname>` are pinned there."},
                            [](const std::string& path, const std::string& where) {
                              if (path.empty() || path.front() != '/')
                                throw ConfigError(where + ": must be an absolute path on a bpf filesystem");
                            }));
  t.push_back(bool_key<C>("xdp.allow_generic", &C::xdp_allow_generic, false,
                          {.help = "fall back to generic (skb) XDP when native attach fails",
                           .doc = "accept generic (skb) XDP when native attach fails, with a warning."}));
  t.push_back(string_key<C>(
      "xdp.relay_address4", &C::xdp_relay_address4, "",
      {.help = "this relay's IPv4 address towards transceivers (XDP source, return path)",
       .doc = "this relay's IPv4 address towards transceivers: the source of what XDP forwards and the "
              "destination of their replies. Without it, flows to IPv4 endpoints are passed to userspace.",
       .reloadable = true},
      [](const std::string& ip, const std::string& where) { check_concrete_ip(ip, where, AF_INET); }));
  t.push_back(string_key<C>(
      "xdp.relay_address6", &C::xdp_relay_address6, "",
      {.help = "this relay's IPv6 address towards transceivers",
       .doc = "the same for IPv6.",
       .reloadable = true},
      [](const std::string& ip, const std::string& where) { check_concrete_ip(ip, where, AF_INET6); }));
  t.push_back(uint_key<C>(
      "ice_tcp.port", [](auto& c) -> auto& { return c.ice_tcp.port; }, 0, 0, 65535,
      {.help = "TCP port the workers accept ICE-TCP connections on at every VIP address (0 = off; the chart: "
               "443)",
       .doc =
           "0..65535; TCP port of the ICE-TCP passive candidates (RFC 6544) at every `listen` address: "
           "callers whose network drops UDP connect here. Each worker listens (`SO_REUSEPORT`) on the VIP "
           "addresses only, so other services may hold the port on other addresses. A connection's first "
           "RFC 4571 frame must be a Binding request with a valid hint; then each frame reaches the "
           "transceiver as one PROXY v2 `STREAM` datagram ([wire-format.md](wire-format.md#ice-tcp)). "
           "Served in both modes (XDP passes TCP to the stack). 0 = off. The transceivers' `relay.tcp_port` "
           "must name the same port."}));
  t.push_back(uint_key<C>(
      "ice_tcp.max_connections", [](auto& c) -> auto& { return c.ice_tcp.max_connections; }, 10000, 1,
      1'000'000,
      {.help = "open ICE-TCP connections per relay (split over the workers); more are closed at accept",
       .doc =
           "1..1000000; open ICE-TCP connections per relay, split evenly over the workers; a connection "
           "over the limit is closed at once (`rtcedge_relay_tcp_closed_total{reason=\"max_connections\"}`). "
           "Each costs about 8 KiB of buffers plus `ice_tcp.send_queue_bytes` at most."}));
  t.push_back(uint_key<C>(
      "ice_tcp.max_per_source_prefix", [](auto& c) -> auto& { return c.ice_tcp.max_per_source_prefix; }, 1024,
      1, 1'000'000,
      {.help = "open ICE-TCP connections per client prefix (flows.source_prefix_v4/v6) in each worker",
       .doc = "1..1000000; open ICE-TCP connections one client prefix (`flows.source_prefix_v4`/`_v6`) may "
              "hold in each worker; more are closed at accept (`source_prefix`). A browser opens one or two "
              "per call; the callers ICE-TCP exists for often sit behind one corporate NAT address, hence "
              "the same default as `flows.max_per_source_prefix`."}));
  t.push_back(duration_key<C>(
      "ice_tcp.first_frame_timeout", [](auto& c) -> auto& { return c.ice_tcp.first_frame_timeout; }, 5 * s,
      100 * ms, 60 * s,
      {.help = "an ICE-TCP connection without a valid first Binding request by then is closed",
       .doc = "100ms..60s; a connection whose first frame (a Binding request with a valid hint) has not "
              "arrived by then is closed (`first_frame_timeout`): slow or silent connections cannot hold "
              "slots."}));
  t.push_back(duration_key<C>(
      "ice_tcp.idle_timeout", [](auto& c) -> auto& { return c.ice_tcp.idle_timeout; }, 30 * s, 1 * s, day,
      {.help = "an ICE-TCP connection with no frame from the client for this long is closed",
       .doc = "1s..1d; a connection with no frame from the client for this long is closed (`idle`); "
              "browsers send a consent check every ~5 s (RFC 7675)."}));
  t.push_back(uint_key<C>(
      "ice_tcp.max_frame", [](auto& c) -> auto& { return c.ice_tcp.max_frame; }, 2048, 64, 9000,
      {.help = "longest RFC 4571 frame accepted from a client; a longer one closes the connection",
       .doc = "64..9000; the longest RFC 4571 frame accepted from a client (its payload: a STUN, DTLS, "
              "RTP or RTCP packet); a longer length closes the connection (`frame_too_large`). A "
              "transceiver takes datagrams up to 2048 bytes, PROXY v2 header included."}));
  t.push_back(uint_key<C>(
      "ice_tcp.send_queue_bytes", [](auto& c) -> auto& { return c.ice_tcp.send_queue_bytes; }, 16384, 4096,
      1u << 20,
      {.help = "bytes of replies queued per ICE-TCP connection while the client does not read",
       .doc = "4096..1048576; replies a connection holds while the kernel's send buffer is full (a slow or "
              "stalled client); a reply that does not fit is dropped and counted "
              "(`rtcedge_relay_tcp_reply_overflow_total`): late audio is worth less than the next frame."}));
  t.push_back(uint_key<C>("xdp.return_port", &C::xdp_return_port, 3479, 1, 65535,
                          {.help = "UDP port XDP forwards from and takes replies on",
                           .doc = "UDP port XDP forwards from and takes replies on. Must differ from the "
                                  "userspace return ports (`return_listen`).",
                           .reloadable = true}));
  t.push_back(uint_key<C>("xdp.new_flow_budget", &C::xdp_new_flow_budget, 0, 0, 1u << 20,
                          {.help = "new flows per CPU per millisecond XDP may create (0 = 64)",
                           .doc = "new flows per CPU per millisecond the program may create (0 = 64); over "
                                  "budget, first packets go to userspace.",
                           .reloadable = true}));
  t.push_back(bool_key<C>(
      "join_existing", &C::join_existing, false,
      {.help = "start even if another relay serves these VIPs (or XDP interfaces, pin path) "
               "here, joining its SO_REUSEPORT group and taking a share of its flows "
               "(false: refuse)",
       .doc = "start even though another relay already serves one of the `listen` VIPs (or, outside `mode: "
              "userspace`, one of the `xdp.interfaces` or the `xdp.pin_path`) in this network namespace. By "
              "default that is refused (exit 1, naming the other relay's pid): a second instance joins the "
              "SO_REUSEPORT group and takes a share of the live flows. With `true` both instances log the "
              "join; see [operations.md](operations.md#one-relay-per-vip)."}));
  return t;
}

}  // namespace

const ConfigTable<RelayConfig>& relay_config_keys() {
  static const ConfigTable<RelayConfig> table = build();
  return table;
}

}  // namespace rtce
