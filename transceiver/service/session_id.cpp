// session_id.cpp — see session_id.h.
#include "session_id.h"

#include <array>

#include "random.h"
#include "rtce_siphash.h"

namespace rtce {

namespace {

constexpr uint8_t kVersion = 2;
constexpr size_t kSealed = 12;  // bytes under the MAC
using Raw = std::array<uint8_t, 16>;

uint32_t mac_of(const Raw& raw, const rtce_siphash_key& key) {
  return static_cast<uint32_t>(rtce_siphash24(raw.data(), kSealed, &key));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string mint_session_id(const HintKeys& keys, uint16_t endpoint_id) {
  const rtce_hint_key key = keys.signing_hint_key();
  Raw raw{};
  raw[0] = static_cast<uint8_t>(kVersion << 4 | (key.id & 0x0f));
  raw[1] = static_cast<uint8_t>(endpoint_id >> 8);
  raw[2] = static_cast<uint8_t>(endpoint_id);
  fill_random(raw.data() + 3, kSealed - 3);
  const uint32_t mac = mac_of(raw, key.key);
  for (size_t i = 0; i < 4; ++i) raw[kSealed + i] = static_cast<uint8_t>(mac >> (24 - 8 * i));
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string id(kSessionIdChars, '0');
  for (size_t i = 0; i < raw.size(); ++i) {
    id[2 * i] = kDigits[raw[i] >> 4];
    id[2 * i + 1] = kDigits[raw[i] & 15];
  }
  return id;
}

std::optional<uint16_t> session_id_owner(const HintKeys& keys, std::string_view id) {
  if (id.size() != kSessionIdChars) return std::nullopt;
  Raw raw{};
  for (size_t i = 0; i < raw.size(); ++i) {
    const int hi = hex_value(id[2 * i]), lo = hex_value(id[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    raw[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  if (raw[0] >> 4 != kVersion) return std::nullopt;
  const rtce_hint_keyset keyset = keys.keyset();
  for (const rtce_hint_key& key : keyset.keys) {
    if (!key.in_use || key.id != (raw[0] & 0x0f)) continue;
    const uint32_t mac = mac_of(raw, key.key);
    uint32_t carried = 0;
    for (size_t i = 0; i < 4; ++i) carried = carried << 8 | raw[kSealed + i];
    if (mac == carried) return static_cast<uint16_t>(raw[1] << 8 | raw[2]);
  }
  return std::nullopt;
}

}  // namespace rtce
