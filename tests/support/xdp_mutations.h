// xdp_mutations.h — the Tailscale-style mutation table: every single-byte mutation of a
// frame (each bit flipped, the byte zeroed, the byte all ones), in a fixed order, mutations
// that leave the frame unchanged left out. Run over Chrome's real Binding request by the
// BPF_PROG_TEST_RUN fixtures (against a reference built from the wire headers) and by the
// XDP-vs-RelayCore differential test (against the userspace relay).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "xdp_packets.h"

namespace rtce::xdp_packets {

struct Mutation {
  const char* name;
  size_t offset;
  int bit;  // 0 unless name is "flip bit"
  Bytes frame;
};

inline std::vector<Mutation> byte_mutations(const Bytes& base) {
  const std::array<std::pair<const char*, std::function<uint8_t(uint8_t, int)>>, 3> mutations = {{
      {"flip bit", [](uint8_t b, int bit) { return static_cast<uint8_t>(b ^ (1 << bit)); }},
      {"zero", [](uint8_t, int) { return uint8_t{0x00}; }},
      {"ones", [](uint8_t, int) { return uint8_t{0xff}; }},
  }};
  std::vector<Mutation> out;
  for (size_t off = 0; off < base.size(); off++) {
    for (const auto& [name, fn] : mutations) {
      const int bits = std::string(name) == "flip bit" ? 8 : 1;
      for (int bit = 0; bit < bits; bit++) {
        Bytes m = base;
        m[off] = fn(m[off], bit);
        if (m == base) continue;
        out.push_back({name, off, bit, std::move(m)});
      }
    }
  }
  return out;
}

}  // namespace rtce::xdp_packets
