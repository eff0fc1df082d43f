// transceiver_config_test.cpp — rtcedge-transceiver's key table: the struct's member defaults
// agree with the table, --check-config YAML has every key, redacts the secrets and reads back,
// and the defaults that follow other keys (direct.enabled, media.advertise_address) follow them.
#include "transceiver_config.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "config_keys_testing.h"
#include "error.h"

namespace {

using namespace rtce;

TransceiverConfig resolve_yaml(const std::string& yaml) {
  ConfigLayers c("RTCEDGE_TRANSCEIVER_");
  declare_transceiver_config(c);
  c.load_yaml_text(yaml, "test");
  return resolve_transceiver_config(c);
}

TEST(TransceiverConfigKeys, StructDefaultsAreTheTableDefaults) {
  const TransceiverConfig table = resolve_yaml("");
  const TransceiverConfig plain{};
  // Resolved from the machine or from other keys, or without a meaningful member default.
  const std::set<std::string> derived = {"workers",
                                         "http.listen",
                                         "media.listen",
                                         "media.base_port",
                                         "media.advertise_address",
                                         "relay.sources",
                                         "registry.pod_identity",
                                         "http.cors_origins"};
  for (const auto& k : transceiver_config_keys()) {
    if (derived.count(k.name)) continue;
    EXPECT_EQ(k.show(plain), k.show(table)) << k.name << ": the member default differs from the table's";
  }
}

TEST(TransceiverConfigKeys, YamlHasEveryKeyRedactsSecretsAndReadsBack) {
  const TransceiverConfig cfg = resolve_yaml(
      "http: {api_keys: ['0123456789abcdef-secret']}\nbackend: {headers: ['Authorization: Bearer hdr-5ecret']}\n"
      "registry: {redis_url: 'redis://:pw@10.0.0.1:6379'}\nworkers: 2\n");
  const std::string yaml = transceiver_config_yaml(cfg);
  test::expect_every_key_in(yaml, transceiver_config_keys());
  // Distinctive secrets: key names contain words like "tok" (telephony.twilio.auth_token_file).
  for (const char* secret : {"0123456789abcdef", "hdr-5ecret", ":pw@"})
    EXPECT_EQ(yaml.find(secret), std::string::npos) << secret << " shown in\n" << yaml;
  EXPECT_NE(yaml.find("headers: [\"Authorization: <redacted>\"]"), std::string::npos) << yaml;
  // The redacted API key is too short to be one: read back the unredacted form.
  TransceiverConfig plain = cfg;
  plain.api_keys.clear();
  plain.backend_headers.clear();
  const std::string unredacted = transceiver_config_yaml(plain);
  EXPECT_EQ(transceiver_config_yaml(resolve_yaml(unredacted)), unredacted);
}

TEST(TransceiverConfigKeys, DefaultsThatFollowOtherKeys) {
  EXPECT_TRUE(resolve_yaml("").direct_enabled);
  const std::string keys = "hint: {key_file: /k}\n";
  EXPECT_FALSE(resolve_yaml(keys + "relay: {vips: ['198.18.0.1:3478']}\n").direct_enabled);
  EXPECT_TRUE(
      resolve_yaml(keys + "relay: {vips: ['198.18.0.1:3478']}\ndirect: {enabled: true}\n").direct_enabled);
  EXPECT_EQ(resolve_yaml("media: {listen: 198.18.3.1}\n").advertise_address, "198.18.3.1");
  EXPECT_EQ(resolve_yaml("workers: 3\n").workers, 3u);
  EXPECT_GE(resolve_yaml("").workers, 1u) << "0 = one per CPU";
}

TEST(TransceiverConfigKeys, CrossKeyErrorsNameTheKey) {
  auto error = [](const std::string& yaml) {
    try {
      resolve_yaml(yaml);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("dtls: {certificate: /c}\n").find("'dtls.private_key'"), std::string::npos);
  EXPECT_NE(error("http: {listen: '0.0.0.0:1'}\n").find("http.api_keys"), std::string::npos);
  EXPECT_NE(error("workers: 2\nhint: {endpoint_base_id: 65535}\n").find("'hint.endpoint_base_id'"),
            std::string::npos);
  EXPECT_NE(error("media: {listen: '::'}\n").find("'media.advertise_address'"), std::string::npos);
  EXPECT_NE(error("backend: {echo_mode: shout}\n").find("'shout' is not one of loopback, parrot"),
            std::string::npos);
  EXPECT_NE(
      error("audio: {opus_passthrough: true}\nbackend: {dialect: realtime}\n").find("'backend.dialect'"),
      std::string::npos);
  EXPECT_NE(error("backend: {dialect: openai}\n").find("not one of rtcedge, realtime"), std::string::npos);
  EXPECT_NE(error("backend: {url: 'http://h/'}\n").find("must start with ws:// or wss://"),
            std::string::npos);
  EXPECT_NE(error("backend: {ca_file: /nonexistent/ca.pem}\n").find("cannot read"), std::string::npos);
}

TEST(TransceiverConfigKeys, WssAndTheRealtimeDialect) {
  auto c = resolve_yaml(
      "backend: {url: 'wss://api.example/v1/realtime', dialect: realtime, ca_file: /dev/null}\n");
  EXPECT_EQ(c.backend_url, "wss://api.example/v1/realtime");
  EXPECT_EQ(c.backend_dialect, "realtime");
  EXPECT_EQ(c.backend_ca_file, "/dev/null");
  EXPECT_EQ(resolve_yaml("").backend_dialect, "rtcedge");
}

}  // namespace
