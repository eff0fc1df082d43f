// fuzz_config.cc — libFuzzer target for the operator's configuration file: YAML text through
// ConfigLayers into both binaries' key tables (relay and transceiver), as --config loads it.
// Invariants: a bad file is a ConfigError, never another exception or a crash; a file that
// resolves prints back (every key's unredacted value, flat dotted keys) to YAML that loads
// and resolves to the same values.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "config_layers.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check(text, "RTCEDGE_RELAY_", rtce::relay_config_keys(), rtce::declare_relay_config,
        rtce::resolve_relay_config);
  check(text, "RTCEDGE_TRANSCEIVER_", rtce::transceiver_config_keys(), rtce::declare_transceiver_config,
        rtce::resolve_transceiver_config);
  return 0;
}
