// hint_keys.cpp — see hint_keys.h.
#include "hint_keys.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "config_file.h"
#include "error.h"
#include "random.h"
#include "vocab.h"

namespace rtce {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; i++) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

}  // namespace

HintKeys HintKeys::load_file(const std::string& path, std::vector<std::string>* warnings) {
  const ConfigFileText file = read_config_file(path, "hint key file", kMaxHintKeyFileBytes);
  if (warnings != nullptr)
    if (auto warning = secret_file_mode_warning(path, "hint key file", file.mode))
      warnings->push_back(*warning);
  return parse(file.text, "hint key file '" + path + "'");
}

HintKeys HintKeys::parse(std::string_view yaml_text, std::string_view origin) {
  const std::string where(origin);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(where + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap() || !root["keys"] || !root["keys"].IsSequence())
    throw ConfigError(where + ": expected a map with a 'keys' list");
  // Unknown fields are errors, as in the configuration: a misspelt field must not be
  // silently ignored in the file that decides which hints are valid.
  for (const auto& field : root)
    if (field.first.Scalar() != "keys")
      throw ConfigError(where + ": unknown field '" + field.first.Scalar() + "' (expected 'keys')");
  const YAML::Node list = root["keys"];
  if (list.size() == 0) throw ConfigError(where + ": 'keys' is empty; run 'rtcedge-relay hint keygen'");
  if (list.size() > RTCE_HINT_MAX_KEYS)
    throw ConfigError(where + ": " + std::to_string(list.size()) + " keys listed, at most " +
                      std::to_string(RTCE_HINT_MAX_KEYS) + " may be live (new one first)");
  HintKeys out;
  std::set<int> seen;
  for (size_t i = 0; i < list.size(); i++) {
    const std::string at = where + ": keys[" + std::to_string(i) + "]";
    const YAML::Node k = list[i];
    if (!k.IsMap() || !k["id"] || !k["secret"]) throw ConfigError(at + ": needs 'id' and 'secret'");
    for (const auto& field : k)
      if (field.first.Scalar() != "id" && field.first.Scalar() != "secret")
        throw ConfigError(at + ": unknown field '" + field.first.Scalar() + "' (expected 'id', 'secret')");
    if (!k["secret"].IsScalar()) throw ConfigError(at + ".secret: must be 32 hex characters (16 bytes)");
    int id = -1;
    try {
      id = k["id"].as<int>();
    } catch (const YAML::Exception&) {
      throw ConfigError(at + ".id: not an integer");
    }
    if (id < 0 || id > RTCE_HINT_MAX_KEY_ID)
      throw ConfigError(at + ".id: " + std::to_string(id) + " is outside 0..15");
    if (!seen.insert(id).second) throw ConfigError(at + ".id: " + std::to_string(id) + " is listed twice");
    const std::string secret = k["secret"].as<std::string>();
    if (secret.size() != 2 * RTCE_SIPHASH_KEY_BYTES)
      throw ConfigError(at + ".secret: must be 32 hex characters (16 bytes), got " +
                        std::to_string(secret.size()));
    HintKey key;
    key.id = static_cast<uint8_t>(id);
    for (size_t b = 0; b < RTCE_SIPHASH_KEY_BYTES; b++) {
      int hi = hex_value(secret[2 * b]);
      int lo = hex_value(secret[2 * b + 1]);
      if (hi < 0 || lo < 0) throw ConfigError(at + ".secret: not hexadecimal");
      key.secret[b] = static_cast<uint8_t>(hi << 4 | lo);
    }
    out.keys_.push_back(key);
  }
  return out;
}

HintKeys HintKeys::generate(uint8_t id) {
  if (id > RTCE_HINT_MAX_KEY_ID) throw ConfigError("--id: must be 0..15");
  HintKeys out;
  HintKey key;
  key.id = id;
  fill_random(key.secret.data(), key.secret.size());
  out.keys_.push_back(key);
  return out;
}

rtce_hint_keyset HintKeys::keyset() const {
  rtce_hint_keyset ks{};
  for (size_t i = 0; i < keys_.size() && i < RTCE_HINT_MAX_KEYS; i++) {
    ks.keys[i].id = keys_[i].id;
    ks.keys[i].in_use = 1;
    rtce_siphash_key_from_bytes(&ks.keys[i].key, keys_[i].secret.data());
  }
  return ks;
}

rtce_hint_key HintKeys::signing_hint_key() const { return keyset().keys[0]; }

std::string HintKeys::to_yaml() const {
  std::string out =
      "# rtcedge routing-hint keys (docs/wire-format.md). The first key signs new hints;\n"
      "# every listed key verifies them (at most two: rotation). Keep this file secret.\n"
      "keys:\n";
  for (const auto& k : keys_)
    out += "  - id: " + std::to_string(k.id) + "\n    secret: " + to_hex(k.secret.data(), k.secret.size()) +
           "\n";
  return out;
}

std::string mint_ufrag(const HintKeys& keys, uint8_t cluster_id, uint16_t endpoint_id) {
  rtce_hint hint{};
  hint.cluster_id = cluster_id;
  hint.endpoint_id = endpoint_id;
  fill_random(&hint.nonce, sizeof hint.nonce);
  const rtce_hint_key key = keys.signing_hint_key();
  uint8_t chars[RTCE_HINT_CHARS];
  rtce_hint_seal(&hint, &key, chars);
  return std::string(reinterpret_cast<const char*>(chars), RTCE_HINT_CHARS);
}

const char* hint_result_name(rtce_hint_result r) { return vocab_name(rtce_hint_result_names, r); }

}  // namespace rtce
