// config_layers.h — layered configuration shared by every rtcedge binary.
//
// Keys are dotted paths ("flows.capacity"), declared from a binary's key table
// (config_keys.h). A value comes from, in rising precedence:
// the built-in default, the YAML file, the environment (RTCEDGE_FLOWS_CAPACITY) and the
// command line (--flows-capacity). Every typed read validates and throws a ConfigError that
// names the key, where the value came from and what is wrong with it. Unknown keys in the
// file are errors too: a typo must not silently fall back to a default.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clock.h"
#include "config_validators.h"

namespace CLI {
class App;
}

namespace rtce {

class ConfigLayers {
 public:
  enum class Kind { scalar, list };
  struct Key {
    std::string name;
    Kind kind;
    std::string help;
  };

  explicit ConfigLayers(std::string env_prefix) : env_prefix_(std::move(env_prefix)) {}

  void declare(std::string name, Kind kind, std::string help);
  const std::vector<Key>& keys() const { return keys_; }

  // Adds one CLI11 option per key; values land in this object when the app parses.
  void add_flags(CLI::App& app);
  void load_yaml_file(const std::string& path);
  void load_yaml_text(std::string_view text, std::string_view origin);
  void apply_env(char** environ);
  // Applies the flag values captured by add_flags; call after the app has parsed.
  void apply_flags();
  // Forgets file and environment values (flag captures stay), before a reload re-reads them.
  void clear_values() { values_.clear(); }

  static std::string flag_name(std::string_view key);
  std::string env_name(std::string_view key) const;

  bool has(std::string_view key) const;
  std::string origin(std::string_view key) const;

  std::string get_string(std::string_view key, std::string_view fallback) const;
  uint64_t get_uint(std::string_view key, uint64_t fallback, uint64_t min, uint64_t max) const;
  bool get_bool(std::string_view key, bool fallback) const;
  // "30s", "500ms", "2m", "1h"; a bare number is seconds.
  Nanos get_duration(std::string_view key, Nanos fallback, Nanos min, Nanos max) const;
  std::vector<std::string> get_list(std::string_view key, const std::vector<std::string>& fallback) const;

  // An error message prefix naming the key and where its value came from.
  std::string where(std::string_view key) const;

 private:
  struct Value {
    std::vector<std::string> items;
    std::string origin;
  };
  const Key* find_key(std::string_view name) const;
  void set(const std::string& key, std::vector<std::string> items, std::string origin);

  std::string env_prefix_;
  std::vector<Key> keys_;
  std::map<std::string, Value, std::less<>> values_;
  std::map<std::string, std::string> flag_scalars_;
  std::map<std::string, std::vector<std::string>> flag_lists_;
};

// The command line every binary's configuration shares: -c/--config FILE (env
// <PREFIX>CONFIG), one flag per key, --check-config and --print-config-reference.
struct ConfigCommands {
  std::string config_file;
  bool check = false;
  bool print_reference = false;
  void add_flags(CLI::App& app, ConfigLayers& layers);
  // Layers, in rising precedence: defaults < file < environment < flags. Again on a reload:
  // file and environment are read anew, the command line's flags stay.
  void load(ConfigLayers& layers, char** environment) const;
};

// http.max_connections, the key every rtcedge binary's HTTP servers share (signaling and
// admin): its table entry is http_max_connections_key (config_keys.h), and
// configure_http_servers (http_server.h) reads it through this.
inline constexpr uint64_t kDefaultHttpMaxConnections = 1000;
inline constexpr uint64_t kMaxHttpMaxConnections = 1'000'000;
uint64_t resolve_http_max_connections(const ConfigLayers& layers);

}  // namespace rtce
