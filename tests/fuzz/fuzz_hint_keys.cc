// fuzz_hint_keys.cc — libFuzzer target for the routing-hint key file (common/hint_keys.h), the
// secret every relay and transceiver loads. Invariants: a bad file is a ConfigError; a file
// that parses has 1..RTCE_HINT_MAX_KEYS keys with distinct ids, prints (to_yaml) to a file that
// parses to the same keys, and a ufrag minted with it opens under its keyset.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "error.h"
#include "hint_keys.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  rtce::HintKeys keys;
  try {
    keys = rtce::HintKeys::parse(text, "fuzz");
  } catch (const rtce::ConfigError&) {
    return 0;
  }
  const auto& list = keys.keys();
  if (list.empty() || list.size() > RTCE_HINT_MAX_KEYS) std::abort();
  std::set<int> ids;
  for (const auto& k : list)
    if (k.id > RTCE_HINT_MAX_KEY_ID || !ids.insert(k.id).second) std::abort();
  const rtce::HintKeys again = rtce::HintKeys::parse(keys.to_yaml(), "printed");
  if (again.keys().size() != list.size()) std::abort();
  for (size_t i = 0; i < list.size(); i++)
    if (again.keys()[i].id != list[i].id || again.keys()[i].secret != list[i].secret) std::abort();
  const std::string ufrag = rtce::mint_ufrag(keys, 3, 42);
  const rtce_hint_keyset ks = keys.keyset();
  rtce_hint hint{};
  if (rtce_hint_open(reinterpret_cast<const uint8_t*>(ufrag.data()), static_cast<uint32_t>(ufrag.size()), &ks,
                     &hint) != RTCE_HINT_OK ||
      hint.cluster_id != 3 || hint.endpoint_id != 42)
    std::abort();
  return 0;
}
