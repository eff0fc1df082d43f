// stun_payloads.h — UDP payloads for the XDP tests, built independently of the code under
// test: STUN messages, routing hints minted with the test key, Chrome's real Binding
// request (tests/golden/), RTP-looking media. Shared by the BPF_PROG_TEST_RUN fixtures and
// the XDP-vs-RelayCore differential test, so that both feed the same bytes.
//
// chrome_binding_request() reads the capture from RTCE_SOURCE_DIR, which the including
// target defines.
#pragma once

#include <array>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rtce_hint.h"
#include "xdp_packets.h"

namespace rtce::xdp_packets {

struct Attr {
  uint16_t type;
  std::string value;
};

inline Bytes stun(uint16_t type, const std::vector<Attr>& attrs) {
  Bytes out = {static_cast<uint8_t>(type >> 8), static_cast<uint8_t>(type), 0, 0, 0x21, 0x12, 0xa4, 0x42};
  for (int i = 0; i < 12; i++) out.push_back(static_cast<uint8_t>(0xa0 + i));
  for (const auto& a : attrs) {
    put16(out, a.type);
    put16(out, static_cast<uint16_t>(a.value.size()));
    out.insert(out.end(), a.value.begin(), a.value.end());
    while (out.size() % 4) out.push_back(0);
  }
  const size_t len = out.size() - 20;
  out[2] = static_cast<uint8_t>(len >> 8);
  out[3] = static_cast<uint8_t>(len);
  return out;
}

inline const std::array<uint8_t, 16> kKeyBytes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

inline rtce_hint_key test_key(uint8_t id = 1) {
  rtce_hint_key k{};
  k.id = id;
  k.in_use = 1;
  rtce_siphash_key_from_bytes(&k.key, kKeyBytes.data());
  return k;
}

inline std::string mint(uint8_t cluster, uint16_t endpoint, uint32_t nonce = 0x01020304, uint8_t key_id = 1) {
  rtce_hint h{};
  h.cluster_id = cluster;
  h.endpoint_id = endpoint;
  h.nonce = nonce;
  const rtce_hint_key k = test_key(key_id);
  uint8_t chars[RTCE_HINT_CHARS];
  rtce_hint_seal(&h, &k, chars);
  return std::string(reinterpret_cast<const char*>(chars), RTCE_HINT_CHARS);
}

inline Bytes binding(const std::string& server_ufrag, const std::string& client_ufrag = "cl1") {
  return stun(
      0x0001,
      {{0x0006, server_ufrag + ":" + client_ufrag}, {0x0024, "\x6e\x7e\x1e\xff"}, {0x802a, "12345678"}});
}

#ifdef RTCE_SOURCE_DIR
inline Bytes chrome_binding_request() {
  std::ifstream in(std::string(RTCE_SOURCE_DIR) + "/tests/golden/chrome_binding_request.hex");
  std::stringstream s;
  s << in.rdbuf();
  std::string digits;
  for (char c : s.str())
    if (std::isxdigit(static_cast<unsigned char>(c))) digits += c;
  Bytes out;
  for (size_t i = 0; i + 1 < digits.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return out;
}
#endif

inline Bytes rtp(size_t n) {
  Bytes b(n);
  b[0] = 0x80;
  b[1] = 0x6f;
  for (size_t i = 2; i < n; i++) b[i] = static_cast<uint8_t>(i * 7 + 3);
  return b;
}

}  // namespace rtce::xdp_packets
