// stun_test_util.h — an independent STUN codec for the ICE tests and fuzzer: decodes and
// re-encodes messages and computes MESSAGE-INTEGRITY (OpenSSL HMAC-SHA1) and FINGERPRINT (a
// plain CRC-32) itself, so that what the server writes is checked by code that shares
// nothing with libnice, and so that golden bytes can be altered and re-signed.
#pragma once

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "net_address.h"

namespace rtce::stun_test {

inline constexpr uint16_t kUsername = 0x0006;
inline constexpr uint16_t kMessageIntegrity = 0x0008;
inline constexpr uint16_t kErrorCode = 0x0009;
inline constexpr uint16_t kUnknownAttributes = 0x000A;
inline constexpr uint16_t kXorMappedAddress = 0x0020;
inline constexpr uint16_t kPriority = 0x0024;
inline constexpr uint16_t kUseCandidate = 0x0025;
inline constexpr uint16_t kFingerprint = 0x8028;
inline constexpr uint16_t kIceControlled = 0x8029;
inline constexpr uint16_t kIceControlling = 0x802A;
inline constexpr uint32_t kMagicCookie = 0x2112A442;

struct Attribute {
  uint16_t type = 0;
  std::vector<uint8_t> value;
};

struct Message {
  uint16_t type = 0;
  std::array<uint8_t, 12> transaction_id{};
  std::vector<Attribute> attributes;

  const Attribute* find(uint16_t attr_type) const {
    for (const auto& a : attributes)
      if (a.type == attr_type) return &a;
    return nullptr;
  }
};

inline uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t be32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
         static_cast<uint32_t>(p[2]) << 8 | p[3];
}
inline void put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}
inline void put32(std::vector<uint8_t>& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v >> 16));
  put16(out, static_cast<uint16_t>(v));
}
inline void set_length(std::vector<uint8_t>& msg, size_t body_len) {
  msg[2] = static_cast<uint8_t>(body_len >> 8);
  msg[3] = static_cast<uint8_t>(body_len);
}

// Strict decode: header, cookie, length = datagram, every attribute inside the message.
inline std::optional<Message> decode(std::span<const uint8_t> d) {
  if (d.size() < 20 || be32(d.data() + 4) != kMagicCookie || be16(d.data() + 2) + 20u != d.size())
    return std::nullopt;
  Message m;
  m.type = be16(d.data());
  std::memcpy(m.transaction_id.data(), d.data() + 8, 12);
  size_t off = 20;
  while (off < d.size()) {
    if (off + 4 > d.size()) return std::nullopt;
    uint16_t type = be16(d.data() + off);
    size_t len = be16(d.data() + off + 2);
    if (off + 4 + len > d.size()) return std::nullopt;
    m.attributes.push_back({type, std::vector<uint8_t>(d.begin() + off + 4, d.begin() + off + 4 + len)});
    off += 4 + ((len + 3) & ~size_t{3});
  }
  return m;
}

inline std::array<uint8_t, 20> hmac_sha1(std::string_view key, std::span<const uint8_t> data) {
  std::array<uint8_t, 20> mac{};
  unsigned mac_len = 0;
  HMAC(EVP_sha1(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), mac.data(), &mac_len);
  return mac;
}

inline uint32_t crc32(std::span<const uint8_t> data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t byte : data) {
    crc ^= byte;
    for (int i = 0; i < 8; i++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// RFC 5389 15.5: CRC-32 of everything before FINGERPRINT, XOR 0x5354554e.
inline uint32_t fingerprint_of(std::span<const uint8_t> before) { return crc32(before) ^ 0x5354554Eu; }

// Encodes m, leaving out any MESSAGE-INTEGRITY / FINGERPRINT it holds, then appends a fresh
// MESSAGE-INTEGRITY keyed with `key` (when given) and a FINGERPRINT (when asked).
inline std::vector<uint8_t> encode(const Message& m, std::optional<std::string_view> key,
                                   bool fingerprint = true) {
  std::vector<uint8_t> out;
  put16(out, m.type);
  put16(out, 0);
  put32(out, kMagicCookie);
  out.insert(out.end(), m.transaction_id.begin(), m.transaction_id.end());
  for (const auto& a : m.attributes) {
    if (a.type == kMessageIntegrity || a.type == kFingerprint) continue;
    put16(out, a.type);
    put16(out, static_cast<uint16_t>(a.value.size()));
    out.insert(out.end(), a.value.begin(), a.value.end());
    while (out.size() % 4 != 0) out.push_back(0);
  }
  if (key) {
    set_length(out, out.size() - 20 + 24);
    auto mac = hmac_sha1(*key, out);
    put16(out, kMessageIntegrity);
    put16(out, 20);
    out.insert(out.end(), mac.begin(), mac.end());
  }
  if (fingerprint) {
    set_length(out, out.size() - 20 + 8);
    uint32_t fp = fingerprint_of(out);
    put16(out, kFingerprint);
    put16(out, 4);
    put32(out, fp);
  }
  set_length(out, out.size() - 20);
  return out;
}

// Offset of the first attribute of `type`, or nullopt.
inline std::optional<size_t> attribute_offset(std::span<const uint8_t> d, uint16_t type) {
  size_t off = 20;
  while (off + 4 <= d.size()) {
    size_t len = be16(d.data() + off + 2);
    if (be16(d.data() + off) == type) return off;
    off += 4 + ((len + 3) & ~size_t{3});
  }
  return std::nullopt;
}

inline bool integrity_valid(std::span<const uint8_t> d, std::string_view key) {
  auto off = attribute_offset(d, kMessageIntegrity);
  if (!off || *off + 24 > d.size()) return false;
  std::vector<uint8_t> covered(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(*off));
  set_length(covered, *off - 20 + 24);
  auto mac = hmac_sha1(key, covered);
  return std::memcmp(mac.data(), d.data() + *off + 4, 20) == 0;
}

inline bool fingerprint_valid(std::span<const uint8_t> d) {
  auto off = attribute_offset(d, kFingerprint);
  if (!off || *off + 8 != d.size()) return false;
  return be32(d.data() + *off + 4) == fingerprint_of(d.first(*off));
}

inline std::optional<SocketAddress> xor_mapped_address(const Message& m) {
  const Attribute* a = m.find(kXorMappedAddress);
  if (a == nullptr || a->value.size() < 8) return std::nullopt;
  uint8_t family = a->value[1];
  uint16_t port = be16(a->value.data() + 2) ^ static_cast<uint16_t>(kMagicCookie >> 16);
  uint8_t mask[16];
  mask[0] = 0x21, mask[1] = 0x12, mask[2] = 0xA4, mask[3] = 0x42;
  std::memcpy(mask + 4, m.transaction_id.data(), 12);
  uint8_t addr[16] = {};
  if (family == 1 && a->value.size() == 8) {
    for (int i = 0; i < 4; i++) addr[i] = a->value[4 + i] ^ mask[i];
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    std::memcpy(&sin.sin_addr, addr, 4);
    return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&sin), sizeof sin);
  }
  if (family == 2 && a->value.size() == 20) {
    for (int i = 0; i < 16; i++) addr[i] = a->value[4 + i] ^ mask[i];
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(port);
    std::memcpy(&sin6.sin6_addr, addr, 16);
    return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&sin6), sizeof sin6);
  }
  return std::nullopt;
}

inline std::optional<int> error_code(const Message& m) {
  const Attribute* a = m.find(kErrorCode);
  if (a == nullptr || a->value.size() < 4) return std::nullopt;
  return (a->value[2] & 0x7) * 100 + a->value[3];
}

inline std::vector<uint8_t> hex_decode(std::string_view text) {
  std::vector<uint8_t> out;
  int high = -1;
  for (char c : text) {
    int v = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (v < 0) continue;
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<uint8_t>(high << 4 | v));
      high = -1;
    }
  }
  return out;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace rtce::stun_test
