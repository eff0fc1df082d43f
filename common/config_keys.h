// config_keys.h — one descriptor per configuration key, and everything derived from a
// binary's table of them: the declarations ConfigLayers parses (YAML keys, env vars,
// --flags with their help), the typed and validated read into the config struct, the
// restart-only diff a reload reports, the YAML --check-config prints and the Markdown
// reference docs/configuration.md carries. A key's name, default, range and meaning are
// written once, in its table entry (loader/relay_config_keys.cpp,
// transceiver/service/transceiver_config_keys.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "config_layers.h"
#include "config_validators.h"

namespace rtce {

struct KeyInfo {
  std::string help;          // one line for --help
  std::string doc;           // Markdown for the reference table; the help when empty
  std::string default_text;  // as documented; derived from the default when empty
  bool reloadable = false;   // SIGHUP applies it (only the relay reloads)
  bool secret = false;       // --check-config prints <redacted>
};

template <class C>
struct ConfigKey {
  std::string name;
  ConfigLayers::Kind kind = ConfigLayers::Kind::scalar;
  KeyInfo info;
  // Parses, validates (throwing a ConfigError naming the key) and stores the value.
  std::function<void(const ConfigLayers&, C&)> read;
  // The resolved value as a YAML flow value, unredacted.
  std::function<std::string(const C&)> show;
  // Optional: the redacted spelling of show for a key that is partly secret.
  std::function<std::string(const C&)> show_redacted;
  // Optional: whether a reload from `running` to `next` leaves the key as it is; show() equality
  // when unset.
  std::function<bool(const C& running, const C& next)> same;
};

template <class C>
using ConfigTable = std::vector<ConfigKey<C>>;

// Builders: `get` is a member pointer or a generic lambda returning a reference into the config.
namespace keys {

// A key with its own parsing and spelling (addresses, endpoint lists).
template <class C>
ConfigKey<C> custom_key(std::string name, ConfigLayers::Kind kind, KeyInfo info,
                        std::function<void(const ConfigLayers&, C&)> read,
                        std::function<std::string(const C&)> show) {
  return ConfigKey<C>{std::move(name), kind, std::move(info), std::move(read), std::move(show), {}, {}};
}

template <class C, class Get>
ConfigKey<C> uint_key(std::string name, Get get, uint64_t def, uint64_t min, uint64_t max, KeyInfo info) {
  using T = std::remove_cvref_t<decltype(std::invoke(get, std::declval<C&>()))>;
  // A range wider than the member would wrap silently; the table is built at start, so this
  // stops every run (and every test) of a binary whose table is wrong.
  bool fits = def >= min && def <= max;
  if constexpr (std::is_integral_v<T>)
    fits = fits && max <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (!fits) throw std::logic_error("config key " + name + ": default or range does not fit its member");
  if (info.default_text.empty()) info.default_text = std::to_string(def);
  // The range, unless the help already gives it (or lists the only values).
  if (info.help.find("..") == std::string::npos && info.help.find(" | ") == std::string::npos)
    info.help += " (" + std::to_string(min) + ".." + std::to_string(max) + ")";
  ConfigKey<C> k{name, ConfigLayers::Kind::scalar, std::move(info), {}, {}, {}, {}};
  k.read = [=](const ConfigLayers& c, C& cfg) {
    auto& member = std::invoke(get, cfg);
    member = static_cast<std::remove_reference_t<decltype(member)>>(c.get_uint(name, def, min, max));
  };
  k.show = [=](const C& cfg) { return std::to_string(static_cast<uint64_t>(std::invoke(get, cfg))); };
  return k;
}

template <class C, class Get>
ConfigKey<C> bool_key(std::string name, Get get, bool def, KeyInfo info) {
  if (info.default_text.empty()) info.default_text = def ? "true" : "false";
  ConfigKey<C> k{name, ConfigLayers::Kind::scalar, std::move(info), {}, {}, {}, {}};
  k.read = [=](const ConfigLayers& c, C& cfg) { std::invoke(get, cfg) = c.get_bool(name, def); };
  k.show = [=](const C& cfg) { return std::string(std::invoke(get, cfg) ? "true" : "false"); };
  return k;
}

template <class C, class Get>
ConfigKey<C> duration_key(std::string name, Get get, Nanos def, Nanos min, Nanos max, KeyInfo info) {
  if (info.default_text.empty()) info.default_text = format_duration(def);
  info.help += " (" + format_duration(min) + ".." + format_duration(max) + ")";
  ConfigKey<C> k{name, ConfigLayers::Kind::scalar, std::move(info), {}, {}, {}, {}};
  k.read = [=](const ConfigLayers& c, C& cfg) {
    std::invoke(get, cfg) = c.get_duration(name, def, min, max);
  };
  k.show = [=](const C& cfg) { return yaml_quote(format_duration(std::invoke(get, cfg))); };
  return k;
}

// check(value, where) throws on a bad value; it is not called for an empty value when the
// default is empty (unset).
template <class C, class Get>
ConfigKey<C> string_key(std::string name, Get get, std::string def, KeyInfo info,
                        std::function<void(const std::string&, const std::string&)> check = {}) {
  if (info.default_text.empty() && !def.empty()) info.default_text = def;
  ConfigKey<C> k{name, ConfigLayers::Kind::scalar, std::move(info), {}, {}, {}, {}};
  k.read = [=](const ConfigLayers& c, C& cfg) {
    auto& member = std::invoke(get, cfg);
    member = c.get_string(name, def);
    if (check && !(member.empty() && def.empty())) check(member, c.where(name));
  };
  k.show = [=](const C& cfg) { return yaml_quote(std::invoke(get, cfg)); };
  return k;
}

template <class C, class Get>
ConfigKey<C> enum_key(std::string name, Get get, std::string def, std::vector<std::string> choices,
                      KeyInfo info) {
  std::string list;
  for (const auto& choice : choices) list += (list.empty() ? "" : " | ") + choice;
  info.help = list + (info.help.empty() ? "" : "; " + info.help);
  return string_key<C>(
      std::move(name), get, std::move(def), std::move(info),
      [choices](const std::string& value, const std::string& where) { check_one_of(value, where, choices); });
}

template <class C, class Get>
ConfigKey<C> redis_url_key(std::string name, Get get, KeyInfo info) {
  auto k = string_key<C>(
      name, get, "", std::move(info),
      [](const std::string& value, const std::string& where) { check_redis_url(value, where); });
  k.show_redacted = [=](const C& cfg) { return yaml_quote(redact_redis_url(std::invoke(get, cfg))); };
  return k;
}

// A list of strings, each checked by check(item, where) when set.
template <class C, class Get>
ConfigKey<C> string_list_key(std::string name, Get get, std::vector<std::string> def, KeyInfo info,
                             std::function<void(const std::string&, const std::string&)> check = {}) {
  if (info.default_text.empty()) info.default_text = yaml_string_list(def);
  ConfigKey<C> k{name, ConfigLayers::Kind::list, std::move(info), {}, {}, {}, {}};
  k.read = [=](const ConfigLayers& c, C& cfg) {
    auto& member = std::invoke(get, cfg);
    member = c.get_list(name, def);
    if (check)
      for (const auto& item : member) check(item, c.where(name));
  };
  k.show = [=](const C& cfg) { return yaml_string_list(std::invoke(get, cfg)); };
  if (k.info.secret)  // as many items as set, none shown
    k.show_redacted = [=](const C& cfg) {
      return yaml_string_list(std::vector<std::string>(std::invoke(get, cfg).size(), std::string(kRedacted)));
    };
  return k;
}

// One address:port under `rule`; check(value, where) adds a rule of the key's own.
template <class C, class Get>
ConfigKey<C> address_key(std::string name, Get get, std::string def, AddressRule rule, KeyInfo info,
                         std::function<void(const SocketAddress&, const std::string&)> check = {}) {
  if (info.default_text.empty()) info.default_text = def;
  ConfigKey<C> k{name, ConfigLayers::Kind::scalar, std::move(info), {}, {}, {}, {}};
  k.read = [=](const ConfigLayers& c, C& cfg) {
    auto& member = std::invoke(get, cfg);
    member = check_socket_address(c.get_string(name, def), c.where(name), rule);
    if (check) check(member, c.where(name));
  };
  k.show = [=](const C& cfg) { return yaml_quote(std::invoke(get, cfg).to_string()); };
  return k;
}

// A list whose items parse(text, where) turns into values (addresses, prefixes) that
// to_string() spells back; parse throws a ConfigError naming the key.
template <class C, class Get, class Parse>
ConfigKey<C> parsed_list_key(std::string name, Get get, std::vector<std::string> def, KeyInfo info,
                             Parse parse) {
  if (info.default_text.empty()) info.default_text = yaml_string_list(def);
  ConfigKey<C> k{name, ConfigLayers::Kind::list, std::move(info), {}, {}, {}, {}};
  k.read = [=](const ConfigLayers& c, C& cfg) {
    auto& member = std::invoke(get, cfg);
    member.clear();
    for (const auto& text : c.get_list(name, def)) member.push_back(parse(text, c.where(name)));
  };
  k.show = [=](const C& cfg) {
    std::vector<std::string> items;
    for (const auto& item : std::invoke(get, cfg)) items.push_back(item.to_string());
    return yaml_string_list(items);
  };
  return k;
}

// log.format and log.level, the same in every binary.
template <class C, class GetFormat, class GetLevel>
std::vector<ConfigKey<C>> logging_keys(GetFormat format, GetLevel level) {
  return {enum_key<C>("log.format", format, "text", {"text", "json"},
                      {.doc = "`text` or `json` (one object per line)."}),
          enum_key<C>("log.level", level, "info", {"trace", "debug", "info", "warn", "error"},
                      {.doc = "`trace`, `debug`, `info`, `warn`, `error`."})};
}

// http.max_connections, shared by the transceiver's signaling server and the relay's admin server.
template <class C, class Get>
ConfigKey<C> http_max_connections_key(Get get, std::string doc) {
  return uint_key<C>(
      "http.max_connections", get, kDefaultHttpMaxConnections, 1, kMaxHttpMaxConnections,
      {.help = "open connections per HTTP server (signaling, admin); at the cap a new connection "
               "closes the idlest one",
       .doc = std::move(doc)});
}

}  // namespace keys

// Declares every key of the table, with its default in the help.
template <class C>
void declare_keys(ConfigLayers& layers, const ConfigTable<C>& table) {
  for (const auto& k : table) {
    std::string help = k.info.help;
    const std::string& d = k.info.default_text;
    // A help that explains its default, or a key without one, gets none appended.
    if (!d.empty() && !d.starts_with("—") && help.find("(default") == std::string::npos) {
      std::string plain;
      for (const char c : d)
        if (c != '`') plain += c;
      help += " (default " + plain + ")";
    }
    layers.declare(k.name, k.kind, help);
  }
}

template <class C>
void read_keys(const ConfigLayers& layers, const ConfigTable<C>& table, C& cfg) {
  for (const auto& k : table) k.read(layers, cfg);
}

// The non-reloadable keys whose value differs between the running and the next config.
template <class C>
std::vector<std::string> restart_only_changes(const ConfigTable<C>& table, const C& running, const C& next) {
  std::vector<std::string> out;
  for (const auto& k : table) {
    if (k.info.reloadable) continue;
    const bool same = k.same ? k.same(running, next) : k.show(running) == k.show(next);
    if (!same) out.push_back(k.name);
  }
  return out;
}

// The resolved config as YAML: dotted names nest under their first part, in table order
// (a part's keys are gathered where it first appears); secrets are redacted.
template <class C>
std::string config_yaml(const ConfigTable<C>& table, const C& cfg) {
  std::vector<std::pair<std::string, std::vector<const ConfigKey<C>*>>> groups;
  for (const auto& k : table) {
    const size_t dot = k.name.find('.');
    const std::string group = dot == std::string::npos ? "" : k.name.substr(0, dot);
    auto it = groups.begin();
    while (it != groups.end() && (group.empty() || it->first != group)) ++it;
    if (it == groups.end()) {
      groups.push_back({group, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(&k);
  }
  auto value = [&](const ConfigKey<C>& k) {
    if (k.show_redacted) return k.show_redacted(cfg);
    std::string shown = k.show(cfg);
    if (k.info.secret && shown != "\"\"") shown = yaml_quote(kRedacted);
    return shown;
  };
  std::string out;
  for (const auto& [group, members] : groups) {
    if (group.empty()) {
      for (const auto* k : members) out += k->name + ": " + value(*k) + "\n";
      continue;
    }
    out += group + ":\n";
    for (const auto* k : members) out += "  " + k->name.substr(group.size() + 1) + ": " + value(*k) + "\n";
  }
  return out;
}

// The Markdown key table of docs/configuration.md.
template <class C>
std::string config_reference(const ConfigTable<C>& table, const ConfigLayers& layers, bool reload_column) {
  std::string out = reload_column
                        ? "| key | flag / env | default | on SIGHUP | meaning |\n|---|---|---|---|---|\n"
                        : "| key | flag / env | default | meaning |\n|---|---|---|---|\n";
  for (const auto& k : table) {
    // An explained default ("a third of `flow_store.ttl`") carries its own Markdown.
    const std::string& d = k.info.default_text;
    const std::string def = d.empty()                                                ? "—"
                            : d.find('`') != std::string::npos || d.starts_with("—") ? d
                                                                                     : "`" + d + "`";
    out += "| `" + k.name + "` | `" + ConfigLayers::flag_name(k.name) + "`<br>`" + layers.env_name(k.name) +
           "` | " + def + " | ";
    if (reload_column) out += std::string(k.info.reloadable ? "applied" : "restart") + " | ";
    out += (k.info.doc.empty() ? k.info.help : k.info.doc) + " |\n";
  }
  return out;
}

}  // namespace rtce
