// hint_keys.h — the routing-hint key file that relays and transceivers share.
//
//   # rtcedge routing-hint keys: the first key signs new hints, every key verifies.
//   keys:
//     - id: 1
//       secret: 00112233445566778899aabbccddeeff   # 16 bytes, hex
//
// At most two keys (RTCE_HINT_MAX_KEYS) with distinct ids 0..15; see docs/wire-format.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rtce_hint.h"

namespace rtce {

struct HintKey {
  uint8_t id = 0;
  std::array<uint8_t, RTCE_SIPHASH_KEY_BYTES> secret{};
};

class HintKeys {
 public:
  // Throws ConfigError naming the file and the problem: not a regular file, larger than
  // kMaxHintKeyFileBytes, not valid, an unknown field. `warnings` (when given) receives a
  // warning when other users can read or write the file.
  static HintKeys load_file(const std::string& path, std::vector<std::string>* warnings = nullptr);
  static HintKeys parse(std::string_view yaml_text, std::string_view origin);
  static HintKeys generate(uint8_t id);

  const std::vector<HintKey>& keys() const { return keys_; }
  const HintKey& signing_key() const { return keys_.front(); }
  rtce_hint_keyset keyset() const;
  rtce_hint_key signing_hint_key() const;
  std::string to_yaml() const;

 private:
  std::vector<HintKey> keys_;
};

// Mints a fresh server ufrag for (cluster, endpoint) with a random nonce.
std::string mint_ufrag(const HintKeys& keys, uint8_t cluster_id, uint16_t endpoint_id);

const char* hint_result_name(rtce_hint_result r);

}  // namespace rtce
