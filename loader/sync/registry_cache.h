// registry_cache.h — the relay's copy of the last transceiver endpoints the registry named,
// kept on local disk so that a relay restarted while Redis is down still maps endpoint ids
// (from hints) to addresses (docs/redis.md, "Outages"). Text, one endpoint per line:
//   rtcedge-registry-cache 1 <unix ms written>
//   <id> <ip:port>
// Formatting and parsing are pure (tested); load and save do the file I/O, save atomically.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "relay_config.h"

namespace rtce {

std::string format_registry_cache(const std::vector<EndpointConfig>& endpoints, int64_t written_unix_ms);
// nullopt for anything not written by format_registry_cache, or written more than max_age
// before now (or after now by more than a minute: a clock that jumped).
std::optional<std::vector<EndpointConfig>> parse_registry_cache(std::string_view text, int64_t now_unix_ms,
                                                                std::chrono::milliseconds max_age);

// The cached endpoints of `path`; nullopt (with the reason in *why) when there is none usable.
std::optional<std::vector<EndpointConfig>> load_registry_cache(const std::string& path,
                                                               std::chrono::milliseconds max_age,
                                                               std::string* why);
// Writes path.tmp and renames it over path; false (with the reason in *why) on failure.
bool save_registry_cache(const std::string& path, const std::vector<EndpointConfig>& endpoints,
                         std::string* why);

}  // namespace rtce
