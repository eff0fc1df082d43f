// ingress_selector.cpp — see ingress_selector.h.
#include "ingress_selector.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "error.h"

namespace rtce {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

std::vector<IngressRegion> parse_ingress_regions(const std::vector<std::string>& items,
                                                 const std::string& where) {
  std::vector<IngressRegion> out;
  std::set<std::string> names;
  for (const auto& item : items) {
    std::string name, vips, sources;
    if (item.find("region=") == 0 || item.find(";region=") != std::string::npos) {
      for (size_t start = 0; start < item.size();) {  // a YAML map: "k=v;k=v"
        size_t end = item.find(';', start);
        if (end == std::string::npos) end = item.size();
        const std::string field = item.substr(start, end - start);
        const size_t eq = field.find('=');
        const std::string key = field.substr(0, eq),
                          value = eq == std::string::npos ? "" : field.substr(eq + 1);
        if (key == "region")
          name = value;
        else if (key == "vips")
          vips = value;
        else if (key == "sources")
          sources = value;
        else
          throw ConfigError(where + ": ingress region field '" + key +
                            "' is unknown (expected region, vips, sources)");
        start = end + 1;
      }
    } else {
      const size_t eq = item.find('=');
      if (eq == std::string::npos) throw ConfigError(where + ": '" + item + "' is not region=vip:port");
      name = item.substr(0, eq);
      vips = item.substr(eq + 1);
    }
    if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '-' || c == '_';
        }))
      throw ConfigError(where + ": region name '" + name + "' must be 1..64 of [A-Za-z0-9_-]");
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (!names.insert(lower).second) throw ConfigError(where + ": region '" + name + "' is listed twice");
    IngressRegion r;
    r.name = name;
    for (const auto& v : words(vips)) {
      auto addr = SocketAddress::parse_or_throw(v, where + ": region " + name + " vip");
      if (addr.is_unspecified() || addr.port() == 0)
        throw ConfigError(where + ": region " + name + " vip '" + v + "' needs a concrete address and port");
      r.vips.push_back(addr);
    }
    if (r.vips.empty()) throw ConfigError(where + ": region " + name + " has no vips");
    for (const auto& s : words(sources))
      r.sources.push_back(IpPrefix::parse_or_throw(s, where + ": region " + name));
    out.push_back(std::move(r));
  }
  return out;
}

IngressSelector::IngressSelector(std::vector<SocketAddress> own_vips, std::vector<IngressRegion> regions)
    : own_vips_(std::move(own_vips)), regions_(std::move(regions)) {}

IngressSelector::Choice IngressSelector::choose(std::string_view region_header,
                                                const SocketAddress& client) const {
  Choice c;
  if (!region_header.empty())
    for (const auto& r : regions_)
      if (iequals(r.name, region_header)) {
        c.how = IngressChoice::header;
        c.region = &r;
        break;
      }
  if (!c.region)
    for (const auto& r : regions_)
      if (std::any_of(r.sources.begin(), r.sources.end(),
                      [&](const IpPrefix& p) { return p.contains(client); })) {
        c.how = IngressChoice::source;
        c.region = &r;
        break;
      }
  if (c.region) c.vips = c.region->vips;
  for (const auto& v : own_vips_)
    if (std::find(c.vips.begin(), c.vips.end(), v) == c.vips.end()) c.vips.push_back(v);
  return c;
}

}  // namespace rtce
