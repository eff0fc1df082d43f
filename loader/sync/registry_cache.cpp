// registry_cache.cpp — see registry_cache.h.
#include "registry_cache.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace rtce {

namespace {

constexpr std::string_view kMagic = "rtcedge-registry-cache 1 ";
constexpr size_t kMaxEndpoints = 65535;

int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string format_registry_cache(const std::vector<EndpointConfig>& endpoints, int64_t written_unix_ms) {
  std::string out(kMagic);
  out += std::to_string(written_unix_ms) + "\n";
  for (const auto& e : endpoints) out += std::to_string(e.id) + " " + e.address.to_string() + "\n";
  return out;
}

std::optional<std::vector<EndpointConfig>> parse_registry_cache(std::string_view text, int64_t now_unix_ms,
                                                                std::chrono::milliseconds max_age) {
  if (!text.starts_with(kMagic)) return std::nullopt;
  text.remove_prefix(kMagic.size());
  const auto line_end = text.find('\n');
  if (line_end == std::string_view::npos) return std::nullopt;
  int64_t written = 0;
  const std::string_view stamp = text.substr(0, line_end);
  const auto [end, ec] = std::from_chars(stamp.data(), stamp.data() + stamp.size(), written);
  if (ec != std::errc{} || end != stamp.data() + stamp.size()) return std::nullopt;
  if (now_unix_ms - written > max_age.count() || written - now_unix_ms > 60'000) return std::nullopt;
  text.remove_prefix(line_end + 1);
  std::vector<EndpointConfig> endpoints;
  std::set<uint16_t> seen;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    if (eol == std::string_view::npos) return std::nullopt;  // a torn last line: not ours
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    const auto space = line.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    unsigned id = 0;
    const auto [id_end, id_ec] = std::from_chars(line.data(), line.data() + space, id);
    auto address = SocketAddress::parse(line.substr(space + 1));
    if (id_ec != std::errc{} || id_end != line.data() + space || id == 0 || id > 65535 || !address ||
        address->port() == 0 || !seen.insert(static_cast<uint16_t>(id)).second || seen.size() > kMaxEndpoints)
      return std::nullopt;
    endpoints.push_back(EndpointConfig{static_cast<uint16_t>(id), *address});
  }
  return endpoints;
}

std::optional<std::vector<EndpointConfig>> load_registry_cache(const std::string& path,
                                                               std::chrono::milliseconds max_age,
                                                               std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = std::string("cannot read it: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto endpoints = parse_registry_cache(text.str(), unix_now_ms(), max_age);
  if (!endpoints) *why = "not a registry cache, or older than registry.cache_max_age";
  return endpoints;
}

bool save_registry_cache(const std::string& path, const std::vector<EndpointConfig>& endpoints,
                         std::string* why) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << format_registry_cache(endpoints, unix_now_ms());
    out.flush();
    if (!out) {
      *why = "cannot write " + tmp + ": " + std::strerror(errno);
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *why = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace rtce
