// config_layers.cpp — see config_layers.h.
#include "config_layers.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "config_file.h"
#include "error.h"

namespace rtce {
namespace {

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string item(text.substr(start, comma - start));
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    size_t lead = 0;
    while (lead < item.size() && std::isspace(static_cast<unsigned char>(item[lead]))) lead++;
    item.erase(0, lead);
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

std::string scalar_text(const YAML::Node& node) { return node.Scalar(); }

}  // namespace

void ConfigLayers::declare(std::string name, Kind kind, std::string help) {
  keys_.push_back(Key{std::move(name), kind, std::move(help)});
}

const ConfigLayers::Key* ConfigLayers::find_key(std::string_view name) const {
  for (const auto& k : keys_)
    if (k.name == name) return &k;
  return nullptr;
}

std::string ConfigLayers::flag_name(std::string_view key) {
  std::string out = "--";
  for (char c : key) out += (c == '.' || c == '_') ? '-' : c;
  return out;
}

std::string ConfigLayers::env_name(std::string_view key) const {
  std::string out = env_prefix_;
  for (char c : key)
    out += (c == '.' || c == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void ConfigLayers::set(const std::string& key, std::vector<std::string> items, std::string origin) {
  values_[key] = Value{std::move(items), std::move(origin)};
}

void ConfigLayers::add_flags(CLI::App& app) {
  for (const auto& k : keys_) {
    const std::string help = k.help + " [env " + env_name(k.name) + ", file key '" + k.name + "']";
    if (k.kind == Kind::list)
      app.add_option(flag_name(k.name), flag_lists_[k.name], help)->delimiter(',');
    else
      app.add_option(flag_name(k.name), flag_scalars_[k.name], help);
  }
}

void ConfigLayers::apply_flags() {
  for (const auto& [key, value] : flag_scalars_)
    if (!value.empty()) set(key, {value}, "flag " + flag_name(key));
  for (const auto& [key, value] : flag_lists_)
    if (!value.empty()) set(key, value, "flag " + flag_name(key));
}

void ConfigLayers::apply_env(char** env) {
  for (const auto& k : keys_) {
    const std::string name = env_name(k.name);
    for (char** e = env; e && *e; e++) {
      std::string_view entry(*e);
      if (entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=') {
        std::string_view value = entry.substr(name.size() + 1);
        if (k.kind == Kind::list)
          set(k.name, split_list(value), "env " + name);
        else
          set(k.name, {std::string(value)}, "env " + name);
      }
    }
  }
}

void ConfigLayers::load_yaml_file(const std::string& path) {
  // Bounded and regular files only; "cannot open" carries the errno text.
  load_yaml_text(read_config_file(path, "config file", kMaxConfigFileBytes).text,
                 "config file '" + path + "'");
}

void ConfigLayers::load_yaml_text(std::string_view text, std::string_view origin_view) {
  const std::string origin(origin_view);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw ConfigError(origin + ": the top level must be a map of keys");

  // Walks maps into dotted keys; a declared list key takes a sequence of scalars, or a
  // sequence of maps written as "k=v,k=v" items (e.g. endpoints: - {id: 1, address: ...}).
  auto walk = [&](auto&& self, const YAML::Node& node, const std::string& prefix) -> void {
    for (const auto& entry : node) {
      const std::string name = prefix.empty() ? entry.first.Scalar() : prefix + "." + entry.first.Scalar();
      const Key* key = find_key(name);
      const YAML::Node& value = entry.second;
      if (!key) {
        if (value.IsMap()) {
          bool any = false;
          for (const auto& k : keys_)
            if (k.name.rfind(name + ".", 0) == 0) any = true;
          if (any) {
            self(self, value, name);
            continue;
          }
        }
        throw ConfigError(origin + ": unknown key '" + name + "'");
      }
      const std::string at = origin + ": key '" + name + "'";
      if (key->kind == Kind::scalar) {
        if (!value.IsScalar()) throw ConfigError(at + ": expected a single value");
        set(name, {scalar_text(value)}, origin);
        continue;
      }
      std::vector<std::string> items;
      if (value.IsNull()) {
        set(name, {}, origin);
        continue;
      }
      if (!value.IsSequence()) throw ConfigError(at + ": expected a list");
      for (const auto& item : value) {
        if (item.IsScalar()) {
          items.push_back(scalar_text(item));
        } else if (item.IsMap()) {
          std::string joined;
          for (const auto& field : item) {
            if (!field.second.IsScalar()) throw ConfigError(at + ": list entries must be flat maps");
            if (!joined.empty()) joined += ';';
            joined += field.first.Scalar() + "=" + field.second.Scalar();
          }
          items.push_back(joined);
        } else {
          throw ConfigError(at + ": unsupported list entry");
        }
      }
      set(name, std::move(items), origin);
    }
  };
  walk(walk, root, "");
}

bool ConfigLayers::has(std::string_view key) const { return values_.find(key) != values_.end(); }

std::string ConfigLayers::origin(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? "default" : it->second.origin;
}

std::string ConfigLayers::where(std::string_view key) const {
  return "config key '" + std::string(key) + "' (from " + origin(key) + ")";
}

std::string ConfigLayers::get_string(std::string_view key, std::string_view fallback) const {
  auto it = values_.find(key);
  if (it == values_.end() || it->second.items.empty()) return std::string(fallback);
  return it->second.items.front();
}

uint64_t ConfigLayers::get_uint(std::string_view key, uint64_t fallback, uint64_t min, uint64_t max) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const std::string text = it->second.items.empty() ? "" : it->second.items.front();
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw ConfigError(where(key) + ": '" + text + "' is not a non-negative integer");
  if (v < min || v > max)
    throw ConfigError(where(key) + ": " + text + " is outside " + std::to_string(min) + ".." +
                      std::to_string(max));
  return v;
}

bool ConfigLayers::get_bool(std::string_view key, bool fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const std::string text = it->second.items.empty() ? "" : it->second.items.front();
  if (text == "true" || text == "yes" || text == "1" || text == "on") return true;
  if (text == "false" || text == "no" || text == "0" || text == "off") return false;
  throw ConfigError(where(key) + ": '" + text + "' is not a boolean (true/false)");
}

Nanos ConfigLayers::get_duration(std::string_view key, Nanos fallback, Nanos min, Nanos max) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const std::string text = it->second.items.empty() ? "" : it->second.items.front();
  Nanos v = parse_duration(text);
  if (v < 0) throw ConfigError(where(key) + ": '" + text + "' is not a duration (e.g. 30s, 500ms, 2m)");
  if (v < min || v > max)
    throw ConfigError(where(key) + ": '" + text + "' is outside " + std::to_string(min / 1'000'000) + "ms.." +
                      std::to_string(max / 1'000'000) + "ms");
  return v;
}

std::vector<std::string> ConfigLayers::get_list(std::string_view key,
                                                const std::vector<std::string>& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second.items;
}

void ConfigCommands::add_flags(CLI::App& app, ConfigLayers& layers) {
  const std::string env = layers.env_name("config");
  app.add_option("-c,--config", config_file, "YAML configuration file [env " + env + "]")->envname(env);
  layers.add_flags(app);
  app.add_flag("--check-config", check,
               "resolve and validate the configuration (file, env, flags, defaults), print it as YAML "
               "(secrets redacted) and exit: 0 when valid, 2 when not; opens no socket");
  app.add_flag("--print-config-reference", print_reference,
               "print the Markdown key table of docs/configuration.md and exit");
}

void ConfigCommands::load(ConfigLayers& layers, char** environment) const {
  layers.clear_values();
  if (!config_file.empty()) layers.load_yaml_file(config_file);
  layers.apply_env(environment);
  layers.apply_flags();
}

uint64_t resolve_http_max_connections(const ConfigLayers& c) {
  return c.get_uint("http.max_connections", kDefaultHttpMaxConnections, 1, kMaxHttpMaxConnections);
}

}  // namespace rtce
