// fuzz_config.cc — libFuzzer target for the operator's configuration file: YAML text through
// ConfigLayers into both binaries' key tables (relay and transceiver), as --config loads it.
// Invariants: a bad file is a ConfigError, never another exception or a crash; a file that
// resolves prints back (every key's unredacted value, flat dotted keys) to YAML that loads
// and resolves to the same values. The input is also read as one Redis URL
// (parse_redis_url): a URL that parses redacts to one that parses to the same deployment,
// with the passwords, and only they, replaced.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "config_layers.h"
#include "config_validators.h"
#include "error.h"
#include "relay_config.h"
#include "transceiver_config.h"

namespace {

template <class C>
std::string unredacted_yaml(const rtce::ConfigTable<C>& table, const C& cfg) {
  std::string out;
  for (const auto& k : table) out += k.name + ": " + k.show(cfg) + "\n";
  return out;
}

template <class C, class Declare, class Resolve>
void check(std::string_view text, const char* prefix, const rtce::ConfigTable<C>& table, Declare declare,
           Resolve resolve) {
  // The text resolved as the binary resolves a file.
  auto load = [&](std::string_view yaml, const char* name) {
    rtce::ConfigLayers layers(prefix);
    declare(layers);
    layers.load_yaml_text(yaml, name);
    return resolve(layers);
  };
  C first;
  try {
    first = load(text, "fuzz");
  } catch (const rtce::ConfigError&) {
    return;  // the documented way to refuse a file
  }
  const std::string printed = unredacted_yaml(table, first);
  C second;
  try {
    second = load(printed, "printed");
  } catch (const rtce::ConfigError& e) {
    std::fprintf(stderr, "resolved config does not load back: %s\n%s", e.what(), printed.c_str());
    std::abort();
  }
  for (const auto& k : table)
    if (k.show(first) != k.show(second)) {
      std::fprintf(stderr, "%s: '%s' printed, '%s' read back\n", k.name.c_str(), k.show(first).c_str(),
                   k.show(second).c_str());
      std::abort();
    }
}

void check_redis_url(std::string_view text) {
  const auto url = rtce::parse_redis_url(text);
  if (!url) return;
  const std::string redacted = rtce::redact_redis_url(text);
  const auto again = rtce::parse_redis_url(redacted);
  const auto fail = [&](const char* what) {
    std::fprintf(stderr, "redis URL '%.*s' redacted to '%s': %s\n", static_cast<int>(text.size()),
                 text.data(), redacted.c_str(), what);
    std::abort();
  };
  if (!again) fail("the redacted URL does not parse");
  if (again->topology != url->topology || again->tls != url->tls ||
      again->nodes.size() != url->nodes.size() || again->master_name != url->master_name ||
      again->username != url->username || again->tls_ca_file != url->tls_ca_file ||
      again->password_file != url->password_file)
    fail("redaction changed the deployment");
  if (!url->password.empty() && again->password != rtce::kRedacted) fail("the password survived");
  if (!url->sentinel_password.empty() && again->sentinel_password != rtce::kRedacted)
    fail("the sentinel password survived");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_redis_url(text);
  check(text, "RTCEDGE_RELAY_", rtce::relay_config_keys(), rtce::declare_relay_config,
        rtce::resolve_relay_config);
  check(text, "RTCEDGE_TRANSCEIVER_", rtce::transceiver_config_keys(), rtce::declare_transceiver_config,
        rtce::resolve_transceiver_config);
  return 0;
}
