// relay_config_test.cpp — configuration layering and errors that name the key, the
// source of the value and the problem.
#include "relay_config.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

#include "config_keys_testing.h"
#include "error.h"
#include "test_support.h"

namespace {

using namespace rtce;

const std::string kKeyFile = test::source_path("tests/golden/hint-keys.yaml");

ConfigLayers layers() {
  ConfigLayers c("RTCEDGE_RELAY_");
  declare_relay_config(c);
  return c;
}

std::string error_of(const std::string& yaml, std::vector<std::string> env = {}) {
  ConfigLayers c = layers();
  try {
    c.load_yaml_text(yaml, "config file 'relay.yaml'");
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    c.apply_env(envp.data());
    resolve_relay_config(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RelayConfig, DefaultsNeedOnlyAKeyFile) {
  ConfigLayers c = layers();
  c.load_yaml_text("hint_key_file: " + kKeyFile, "test");
  RelayConfig cfg = resolve_relay_config(c);
  ASSERT_EQ(cfg.listen.size(), 1u);
  EXPECT_EQ(cfg.listen[0].to_string(), "127.0.0.1:3478");
  EXPECT_EQ(cfg.flow_idle_timeout, 30'000'000'000);
  EXPECT_EQ(cfg.mode, "userspace");
  EXPECT_EQ(cfg.admin_listen.to_string(), "127.0.0.1:9478");
}

TEST(RelayConfig, FileEnvironmentAndFlagsLayerInThatOrder) {
  ConfigLayers c = layers();
  CLI::App app;
  c.add_flags(app);
  c.load_yaml_text("hint_key_file: " + kKeyFile +
                       "\ncluster_id: 1\nflows:\n  capacity: 100\n  idle_timeout: 10s\nendpoints:\n"
                       "  - id: 1\n    address: 198.18.2.1:40001\n",
                   "file");
  std::string e1 = "RTCEDGE_RELAY_CLUSTER_ID=2";
  std::string e2 = "RTCEDGE_RELAY_FLOWS_CAPACITY=200";
  char* env[] = {e1.data(), e2.data(), nullptr};
  c.apply_env(env);
  const char* argv[] = {"relay", "--flows-capacity", "300", "--endpoints",
                        "7=[2001:db8::7]:4000,8=198.18.2.8:4000"};
  app.parse(5, const_cast<char**>(argv));
  c.apply_flags();
  RelayConfig cfg = resolve_relay_config(c);
  EXPECT_EQ(cfg.cluster_id, 2) << "env beats file";
  EXPECT_EQ(cfg.flow_capacity, 300u) << "flag beats env";
  EXPECT_EQ(cfg.flow_idle_timeout, 10'000'000'000) << "file beats default";
  ASSERT_EQ(cfg.endpoints.size(), 2u);
  EXPECT_EQ(cfg.endpoints[0].id, 7);
  EXPECT_EQ(cfg.endpoints[0].address.to_string(), "[2001:db8::7]:4000");
  EXPECT_EQ(c.origin("flows.capacity"), "flag --flows-capacity");
}

TEST(RelayConfig, EndpointsFromYamlMaps) {
  ConfigLayers c = layers();
  c.load_yaml_text("hint_key_file: x\nendpoints:\n  - {id: 3, address: '198.18.2.3:40003'}\n", "file");
  RelayConfig cfg = resolve_relay_config(c);
  ASSERT_EQ(cfg.endpoints.size(), 1u);
  EXPECT_EQ(cfg.endpoints[0].id, 3);
  EXPECT_EQ(cfg.endpoints[0].address.to_string(), "198.18.2.3:40003");
}

TEST(RelayConfig, ErrorsNameTheKeyTheSourceAndTheProblem) {
  const std::string k = "hint_key_file: x\n";
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  std::string e = error_of(k + "flow:\n  capacity: 3\n");
  EXPECT_TRUE(has(e, "unknown key 'flow'")) << e;
  e = error_of(k + "flows:\n  capcity: 3\n");
  EXPECT_TRUE(has(e, "unknown key 'flows.capcity'")) << e;
  e = error_of(k + "flows:\n  capacity: lots\n");
  EXPECT_TRUE(has(e, "'flows.capacity'") && has(e, "relay.yaml") && has(e, "not a non-negative integer"))
      << e;
  e = error_of(k + "flows:\n  capacity: 0\n");
  EXPECT_TRUE(has(e, "outside 1..")) << e;
  e = error_of(k + "flows:\n  idle_timeout: soon\n");
  EXPECT_TRUE(has(e, "'flows.idle_timeout'") && has(e, "not a duration")) << e;
  e = error_of(k + "listen: ['198.18.0.1']\n");
  EXPECT_TRUE(has(e, "'listen'") && has(e, "not an address:port")) << e;
  e = error_of(k + "listen: ['198.18.0.1:3478', '198.18.0.1:3478']\n");
  EXPECT_TRUE(has(e, "listed twice")) << e;
  e = error_of(k + "endpoints: ['1=198.18.2.1:0']\n");
  EXPECT_TRUE(has(e, "concrete address and port")) << e;
  e = error_of(k + "endpoints: ['1=198.18.2.1:4000', '1=198.18.2.2:4000']\n");
  EXPECT_TRUE(has(e, "endpoint id 1 is listed twice")) << e;
  e = error_of(k + "endpoints: ['70000=198.18.2.1:4000']\n");
  EXPECT_TRUE(has(e, "not 0..65535")) << e;
  e = error_of(k + "mode: turbo\n");
  EXPECT_TRUE(has(e, "'mode'") && has(e, "userspace, xdp, auto")) << e;
  e = error_of(k + "log:\n  format: xml\n");
  EXPECT_TRUE(has(e, "'log.format'")) << e;
  e = error_of(k + "return_listen: 0.0.0.0:0\n");
  EXPECT_TRUE(has(e, "must be an IPv6 address")) << e;
  e = error_of("cluster_id: 1\n");
  EXPECT_TRUE(has(e, "'hint_key_file'") && has(e, "required")) << e;
  e = error_of(k, {"RTCEDGE_RELAY_CLUSTER_ID=300"});
  EXPECT_TRUE(has(e, "env RTCEDGE_RELAY_CLUSTER_ID") && has(e, "outside 0..255")) << e;
  e = error_of("- a\n- b\n");
  EXPECT_TRUE(has(e, "top level must be a map")) << e;
  e = error_of("a: [\n");
  EXPECT_TRUE(has(e, "not valid YAML")) << e;
}

TEST(RelayConfig, FlowStoreKeysDefaultAndValidate) {
  ConfigLayers c = layers();
  c.load_yaml_text(
      "hint_key_file: " + kKeyFile + "\nflow_store:\n  redis_url: redis://10.1.2.3:6380\n  ttl: 90s\n",
      "test");
  RelayConfig cfg = resolve_relay_config(c);
  EXPECT_EQ(cfg.flow_store_redis_url, "redis://10.1.2.3:6380");
  EXPECT_EQ(cfg.flow_store_ttl, 90'000'000'000);
  EXPECT_EQ(cfg.flow_store_refresh_interval, 30'000'000'000) << "a third of the TTL by default";
  EXPECT_EQ(cfg.flow_store_lookup_timeout, 500'000'000);
  EXPECT_EQ(cfg.flow_store_lookups_per_second, 2000u);

  const std::string k = "hint_key_file: x\n";
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  std::string e = error_of(k + "flow_store:\n  redis_url: http://x\n");
  EXPECT_TRUE(has(e, "'flow_store.redis_url'") && has(e, "unknown scheme 'http'") &&
              has(e, "redis[s]+cluster://"))
      << e;
  e = error_of(k + "flow_store:\n  ttl: 10s\n  refresh_interval: 6s\n");
  EXPECT_TRUE(has(e, "'flow_store.refresh_interval'") && has(e, "half of flow_store.ttl")) << e;
  e = error_of(k + "flow_store:\n  ttl: 1s\n");
  EXPECT_TRUE(has(e, "'flow_store.ttl'")) << e;
  e = error_of(k + "flow_store:\n  lookups_per_second: 0\n");
  EXPECT_TRUE(has(e, "'flow_store.lookups_per_second'") && has(e, "outside 1..")) << e;
  e = error_of(k + "flow_store:\n  lookup_timeout: 1m\n");
  EXPECT_TRUE(has(e, "'flow_store.lookup_timeout'")) << e;
}

TEST(RelayConfig, RoutingTableFailsClearlyOnAMissingKeyFile) {
  ConfigLayers c = layers();
  c.load_yaml_text("hint_key_file: /nonexistent/keys.yaml\n", "file");
  RelayConfig cfg = resolve_relay_config(c);
  try {
    build_routing_table(cfg);
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/keys.yaml"), std::string::npos);
  }
}

TEST(Durations, ParseUnits) {
  EXPECT_EQ(parse_duration("30s"), 30'000'000'000);
  EXPECT_EQ(parse_duration("500ms"), 500'000'000);
  EXPECT_EQ(parse_duration("2m"), 120'000'000'000);
  EXPECT_EQ(parse_duration("1.5"), 1'500'000'000);
  EXPECT_EQ(parse_duration("5 s"), -1);
  EXPECT_EQ(parse_duration("-1s"), -1);
  EXPECT_EQ(parse_duration("1d"), -1);
}

TEST(SocketAddresses, ParseFormatAndMap) {
  EXPECT_EQ(SocketAddress::parse("198.18.0.1:3478")->to_string(), "198.18.0.1:3478");
  EXPECT_EQ(SocketAddress::parse("[2001:db8::1]:3478")->to_string(), "[2001:db8::1]:3478");
  EXPECT_FALSE(SocketAddress::parse("2001:db8::1:3478"));
  EXPECT_FALSE(SocketAddress::parse("198.18.0.1:70000"));
  EXPECT_FALSE(SocketAddress::parse("198.18.0.1:"));
  EXPECT_FALSE(SocketAddress::parse("example.com:80"));
  auto v4 = *SocketAddress::parse("198.18.0.1:3478");
  auto mapped = SocketAddress::from_sockaddr(
      reinterpret_cast<const sockaddr*>(&static_cast<const sockaddr_in6&>(v4.to_v6_mapped())),
      sizeof(sockaddr_in6));
  EXPECT_EQ(mapped.to_string(), "[::ffff:198.18.0.1]:3478");
  EXPECT_EQ(mapped.unmapped().to_string(), "198.18.0.1:3478");
}

TEST(RelayConfig, FlowLimitsDefaultAndLayer) {
  ConfigLayers c = layers();
  c.load_yaml_text("hint_key_file: " + kKeyFile, "test");
  const FlowLimits d = resolve_relay_config(c).flow_limits;
  EXPECT_EQ(d.max_per_hint, 8u);
  EXPECT_EQ(d.max_per_source_prefix, 1024u);
  EXPECT_EQ(d.window, 10'000'000'000);
  EXPECT_EQ(d.source_prefix_v4, 24);
  EXPECT_EQ(d.source_prefix_v6, 56);

  ConfigLayers f = layers();
  CLI::App app;
  f.add_flags(app);
  f.load_yaml_text("hint_key_file: " + kKeyFile +
                       "\nflows:\n  max_per_hint: 4\n  max_per_source_prefix: 0\n  limit_window: 30s\n"
                       "  source_prefix_v4: 20\n  source_prefix_v6: 64\n",
                   "file");
  const char* argv[] = {"relay", "--flows-max-per-hint", "6"};
  app.parse(3, const_cast<char**>(argv));
  f.apply_flags();
  const FlowLimits l = resolve_relay_config(f).flow_limits;
  EXPECT_EQ(l.max_per_hint, 6u) << "flag beats file";
  EXPECT_EQ(l.max_per_source_prefix, 0u) << "0 = no limit";
  EXPECT_EQ(l.window, 30'000'000'000);
  EXPECT_EQ(l.source_prefix_v4, 20);
  EXPECT_EQ(l.source_prefix_v6, 64);
}

TEST(RelayConfig, FlowLimitErrorsNameTheKey) {
  const std::string base = "hint_key_file: " + kKeyFile + "\nflows:\n";
  EXPECT_NE(error_of(base + "  source_prefix_v4: 33\n").find("flows.source_prefix_v4"), std::string::npos);
  EXPECT_NE(error_of(base + "  source_prefix_v6: 0\n").find("flows.source_prefix_v6"), std::string::npos);
  EXPECT_NE(error_of(base + "  limit_window: 0s\n").find("flows.limit_window"), std::string::npos);
  EXPECT_NE(error_of(base + "  max_per_hint: -1\n").find("flows.max_per_hint"), std::string::npos);
}

}  // namespace

// The key table and what derives from it.
namespace {

RelayConfig resolve_yaml(const std::string& yaml) {
  ConfigLayers c = layers();
  c.load_yaml_text(yaml, "test");
  return resolve_relay_config(c);
}

TEST(RelayConfigKeys, EveryKeyIsDeclaredOnceWithItsDefaultInTheHelp) {
  ConfigLayers c = layers();
  std::set<std::string> names;
  for (const auto& k : c.keys()) EXPECT_TRUE(names.insert(k.name).second) << k.name << " is declared twice";
  EXPECT_EQ(names.size(), relay_config_keys().size());
  for (const auto& k : c.keys())
    if (k.name == "flows.capacity") EXPECT_NE(k.help.find("(default 65536)"), std::string::npos) << k.help;
}

TEST(RelayConfigKeys, StructDefaultsAreTheTableDefaults) {
  RelayConfig table = resolve_yaml("hint_key_file: x\n");
  table.hint_key_file.clear();
  const RelayConfig plain{};
  // Addresses have no member default (the tests and benchmarks that build a config set them).
  const std::set<std::string> no_member_default = {"listen", "return_listen", "admin.listen"};
  for (const auto& k : relay_config_keys()) {
    if (no_member_default.count(k.name)) continue;
    EXPECT_EQ(k.show(plain), k.show(table)) << k.name << ": the member default differs from the table's";
  }
}

TEST(RelayConfigKeys, CheckConfigYamlHasEveryKeyAndReadsBack) {
  const RelayConfig cfg =
      resolve_yaml("hint_key_file: " + kKeyFile +
                   "\nendpoints: ['1=198.18.2.1:4000']\nflows: {limit_window: 1500ms}\n"
                   "xdp: {interfaces: [eth0]}\nflow_store: {redis_url: 'redis://:pw@10.0.0.1'}\n");
  const std::string yaml = relay_config_yaml(cfg);
  test::expect_every_key_in(yaml, relay_config_keys());
  EXPECT_EQ(yaml.find(":pw@"), std::string::npos) << "the Redis password is redacted";
  EXPECT_NE(yaml.find("limit_window: \"1500ms\""), std::string::npos) << yaml;
  // Read back (the redacted URL is still a URL), it prints the same.
  EXPECT_EQ(relay_config_yaml(resolve_yaml(yaml)), yaml);
}

TEST(RelayConfigKeys, RestartDiffNamesEveryRestartOnlyKeyAndNoReloadableOne) {
  const std::string base = "hint_key_file: " + kKeyFile + "\n";
  const RelayConfig running = resolve_yaml(base);
  EXPECT_TRUE(relay_restart_only_changes(running, running).empty());
  auto changes = [&](const std::string& yaml) {
    return relay_restart_only_changes(running, resolve_yaml(base + yaml));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(changes("flows: {capacity: 10}\n"), V{"flows.capacity"});
  EXPECT_EQ(changes("flows: {max_per_hint: 2}\n"), V{"flows.max_per_hint"});
  EXPECT_EQ(changes("listen: ['127.0.0.1:4000']\nlog: {level: debug}\n"), (V{"listen", "log.level"}));
  EXPECT_EQ(changes("registry: {ttl: 5s}\n"), V{"registry.ttl"});
  EXPECT_EQ(changes("http: {max_connections: 10}\n"), V{"http.max_connections"});
  EXPECT_EQ(changes("join_existing: true\n"), V{"join_existing"});
  EXPECT_TRUE(changes("cluster_id: 7\nendpoints: ['1=198.18.2.1:4000']\nxdp: {return_port: 4000}\n").empty())
      << "applied by a reload";
  // The service holds the resolved worker count; 0 asks for it again.
  RelayConfig resolved = running;
  resolved.workers = 4;
  EXPECT_TRUE(relay_restart_only_changes(resolved, running).empty());
  EXPECT_EQ(relay_restart_only_changes(resolved, resolve_yaml(base + "workers: 2\n")), V{"workers"});
}

TEST(ConfigValidators, DurationsPrintExactly) {
  for (const Nanos v : {Nanos{0}, Nanos{1'000}, Nanos{500'000'000}, Nanos{1'500'000'000},
                        Nanos{120'000'000'000}, Nanos{86'400'000'000'000}, Nanos{1'001}})
    EXPECT_EQ(parse_duration(format_duration(v)), v) << format_duration(v);
  EXPECT_EQ(format_duration(30'000'000'000), "30s");
  EXPECT_EQ(format_duration(40'000'000), "40ms");
}

TEST(ConfigValidators, RedisUrls) {
  EXPECT_TRUE(parse_redis_url("redis://10.0.0.1"));
  EXPECT_EQ(parse_redis_url("redis://[::1]:6380/2")->port, 6380);
  EXPECT_EQ(parse_redis_url("redis://u:p@h:1")->password, "p");
  EXPECT_FALSE(parse_redis_url("http://x"));
  EXPECT_FALSE(parse_redis_url("redis://h:0"));
  EXPECT_FALSE(parse_redis_url("redis://"));
  EXPECT_EQ(redact_redis_url("redis://u:p@h:1/0"), "redis://u:<redacted>@h:1/0");
  EXPECT_EQ(redact_redis_url("redis://secret@h"), "redis://<redacted>@h");
  EXPECT_EQ(redact_redis_url("redis://h:1"), "redis://h:1");
  EXPECT_THROW(check_redis_url("redis//h", "k"), ConfigError);
  EXPECT_NO_THROW(check_redis_url("", "k"));

  // Sentinel and Cluster: several hosts, default ports, the master's name.
  const auto sentinel =
      parse_redis_url("redis+sentinel://u:p@10.0.0.1,10.0.0.2:26380/mymaster?sentinel_password=s");
  ASSERT_TRUE(sentinel);
  EXPECT_EQ(sentinel->topology, RedisUrl::Topology::kSentinel);
  ASSERT_EQ(sentinel->nodes.size(), 2u);
  EXPECT_EQ(sentinel->nodes[0].port, 26379);
  EXPECT_EQ(sentinel->nodes[1].port, 26380);
  EXPECT_EQ(sentinel->master_name, "mymaster");
  EXPECT_EQ(sentinel->password, "p");
  EXPECT_EQ(sentinel->sentinel_password, "s");
  // The sentinels' password from a file too (a Secret, re-read at every connect).
  const auto sentinel_file = parse_redis_url(
      "redis+sentinel://h/m?password_file=/run/data-pw&sentinel_password_file=/run/sentinel-pw");
  ASSERT_TRUE(sentinel_file);
  EXPECT_EQ(sentinel_file->password_file, "/run/data-pw");
  EXPECT_EQ(sentinel_file->sentinel_password_file, "/run/sentinel-pw");
  const auto cluster = parse_redis_url("rediss+cluster://[::1]:7000,10.0.0.3?tls_server_name=redis.example");
  ASSERT_TRUE(cluster);
  EXPECT_EQ(cluster->topology, RedisUrl::Topology::kCluster);
  EXPECT_TRUE(cluster->tls);
  EXPECT_EQ(cluster->nodes[0].host, "::1");
  EXPECT_EQ(cluster->nodes[1].port, 6379);
  EXPECT_EQ(cluster->tls_server_name, "redis.example");
  EXPECT_EQ(parse_redis_url("redis://u:p%40ss@h")->password, "p@ss");

  // Each refusal says why.
  const auto why = [](std::string_view url) {
    std::string error;
    EXPECT_FALSE(parse_redis_url(url, &error)) << url;
    return error;
  };
  EXPECT_NE(why("redis+sentinel://h1,h2").find("names its master"), std::string::npos);
  EXPECT_NE(why("redis://h1,h2").find("one host only"), std::string::npos);
  EXPECT_NE(why("redis://h?tls_ca_file=/x").find("rediss://"), std::string::npos);
  EXPECT_NE(why("rediss://h?tls_cert_file=/x").find("go together"), std::string::npos);
  EXPECT_NE(why("redis://h?sentinel_password=x").find("redis+sentinel"), std::string::npos);
  EXPECT_NE(why("redis+cluster://h?sentinel_password_file=/x").find("redis+sentinel"), std::string::npos);
  EXPECT_NE(why("redis://h?bogus=1").find("unknown parameter"), std::string::npos);
  EXPECT_NE(why("memcached://h").find("unknown scheme"), std::string::npos);
  EXPECT_NE(why("redis+cluster://h:1,h:0").find("bad host:port"), std::string::npos);
  try {
    check_redis_url("rediss://u:hunter2@h?tls_ca_file=/nonexistent/ca.crt", "k");
    ADD_FAILURE() << "an unreadable CA file must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ca.crt"), std::string::npos);
  }
  try {
    check_redis_url("redis+sentinel://h/m?sentinel_password_file=/nonexistent/sentinel-pw", "k");
    ADD_FAILURE() << "an unreadable sentinel password file must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/sentinel-pw"), std::string::npos);
  }
  try {
    check_redis_url("redis://u:hunter2@h?nope=1", "k");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos)
        << "the error must not print the password";
  }
  EXPECT_EQ(redact_redis_url("redis+sentinel://u:p@h/m?sentinel_password=s&x=1"),
            "redis+sentinel://u:<redacted>@h/m?sentinel_password=<redacted>&x=1");
}

TEST(ConfigValidators, AddressesAndChoices) {
  EXPECT_THROW(check_socket_address("198.18.0.1:0", "k", {.need_port = true}), ConfigError);
  EXPECT_THROW(check_socket_address("0.0.0.0:1", "k", {.concrete = true}), ConfigError);
  EXPECT_EQ(check_socket_address("[::1]:5", "k").port(), 5);
  EXPECT_THROW(check_concrete_ip("::1", "k", AF_INET), ConfigError);
  EXPECT_THROW(check_concrete_ip("0.0.0.0", "k", AF_INET), ConfigError);
  EXPECT_NO_THROW(check_concrete_ip("2001:db8::1", "k", AF_INET6));
  try {
    check_one_of("c", "config key 'x'", {"a", "b"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "config key 'x': 'c' is not one of a, b");
  }
  EXPECT_EQ(yaml_quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
}

}  // namespace
