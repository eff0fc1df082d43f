// xdp_packets.h — test frames for the XDP program, built byte by byte independently of
// the program: addresses, Ethernet/IPv4/IPv6/UDP with checksums computed here, PROXY v2.
// Shared by the BPF_PROG_TEST_RUN fixtures and bench/xdp_prog_cost.cpp.
#pragma once

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace rtce::xdp_packets {

using Bytes = std::vector<uint8_t>;

// ------------------------------------------------------------------ addresses

struct Ep {
  uint8_t family = 4;
  std::array<uint8_t, 16> addr{};
  uint16_t port = 0;  // host order
};

inline Ep ep(const char* text, uint16_t port) {
  Ep e;
  e.port = port;
  if (std::strchr(text, ':')) {
    e.family = 6;
    if (inet_pton(AF_INET6, text, e.addr.data()) != 1) throw std::invalid_argument(text);
  } else {
    e.family = 4;
    if (inet_pton(AF_INET, text, e.addr.data()) != 1) throw std::invalid_argument(text);
  }
  return e;
}

inline size_t alen(const Ep& e) { return e.family == 6 ? 16 : 4; }

// Test addresses: 198.18.0.0/15 and 2001:2::/48 (benchmarking ranges).
inline const Ep kRelay4 = ep("198.18.0.1", 40000);
inline const Ep kRelay6 = ep("2001:2::1", 40000);
inline const Ep kVip4 = ep("198.18.0.10", 3478);
inline const Ep kVip6 = ep("2001:2::10", 3478);
inline const Ep kClient4 = ep("198.18.1.2", 50000);
inline const Ep kClient6 = ep("2001:2::1:2", 50002);
inline const Ep kEndpoint2 = ep("198.18.2.2", 9002);   // IPv4 endpoint, id 2 (the Chrome capture's)
inline const Ep kEndpoint3 = ep("2001:2::2:3", 9003);  // IPv6 endpoint, id 3
constexpr uint8_t kCluster = 1;
constexpr uint16_t kReturnPort = 40000;

using Mac = std::array<uint8_t, 6>;
inline const Mac kNicMac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
inline const Mac kPeerMac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
inline const Mac kTxSrcMac = {0x02, 0x00, 0x00, 0x00, 0xaa, 0x01};  // config fixed_src_mac
inline const Mac kTxDstMac = {0x02, 0x00, 0x00, 0x00, 0xbb, 0x02};  // config fixed_dst_mac

// Client i of a spoofed replay: each in its own /24, so that only a per-hint bound stops
// them. Frames built from these only ever run under BPF_PROG_TEST_RUN or in RelayCore,
// never on a link, so they may leave 198.18.0.0/15 (which has only 512 /24s).
inline Ep spoofed4(uint32_t i) {
  Ep c = kClient4;
  c.addr[0] = 198;
  c.addr[1] = static_cast<uint8_t>(100 + (i >> 16));
  c.addr[2] = static_cast<uint8_t>(i >> 8);
  c.addr[3] = static_cast<uint8_t>(i);
  c.port = static_cast<uint16_t>(1024 + i);
  return c;
}

inline Ep relay_for(uint8_t family) { return family == 6 ? kRelay6 : kRelay4; }

// ------------------------------------------------------------------ checksums

inline uint32_t sum16(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (n & 1) sum += static_cast<uint32_t>(p[n - 1] << 8);
  return sum;
}
inline uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

inline void put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
inline void put32(Bytes& b, uint32_t v) {
  put16(b, static_cast<uint16_t>(v >> 16));
  put16(b, static_cast<uint16_t>(v));
}
inline void put(Bytes& b, const uint8_t* p, size_t n) { b.insert(b.end(), p, p + n); }
inline void put(Bytes& b, const Bytes& x) { b.insert(b.end(), x.begin(), x.end()); }
inline uint16_t get16(const Bytes& b, size_t off) {
  return static_cast<uint16_t>(b.at(off) << 8 | b.at(off + 1));
}

// Sum of the UDP pseudo-header (RFC 768 / RFC 8200 8.1).
inline uint32_t pseudo_sum(const Ep& src, const Ep& dst, uint32_t udp_len) {
  Bytes ph;
  put(ph, src.addr.data(), alen(src));
  put(ph, dst.addr.data(), alen(dst));
  if (src.family == 6) {
    put16(ph, static_cast<uint16_t>(udp_len >> 16));
    put16(ph, static_cast<uint16_t>(udp_len));
    put16(ph, 0);
    put16(ph, 17);
  } else {
    put16(ph, 17);
    put16(ph, static_cast<uint16_t>(udp_len));
  }
  return sum16(ph.data(), ph.size());
}

// ------------------------------------------------------------------ frame builder

struct FrameOpts {
  bool vlan = false;
  uint16_t vlan_tci = 0x0064;
  uint8_t tos = 0;
  uint8_t ttl = 57;
  uint16_t ip_id = 0x1234;
  uint16_t frag = 0;  // IPv4 flags + fragment offset field
  uint8_t proto = 17;
  bool zero_csum = false;
  Mac dst_mac = kNicMac;
  Mac src_mac = kPeerMac;
  size_t pad_to = 0;          // Ethernet padding up to this frame size
  Bytes ip_options;           // IPv4 options (multiple of 4)
  Bytes v6_ext;               // IPv6 extension headers, in order
  uint8_t v6_first_next = 0;  // next header of the IPv6 header when v6_ext is set
  int tot_len_delta = 0;      // corrupt the IP length
  int udp_len_delta = 0;      // corrupt the UDP length
};

// The frame the program would write: TTL 64, IPv4 ID 0 + DF, fixed MACs (skip-fib mode).
inline FrameOpts relay_out(uint8_t tos = 0, bool vlan = false) {
  FrameOpts o;
  o.tos = tos;
  o.ttl = 64;
  o.ip_id = 0;
  o.frag = 0x4000;
  o.dst_mac = kTxDstMac;
  o.src_mac = kTxSrcMac;
  o.vlan = vlan;
  return o;
}

inline Bytes frame(const Ep& src, const Ep& dst, const Bytes& payload, const FrameOpts& o = {}) {
  Bytes f;
  put(f, o.dst_mac.data(), 6);
  put(f, o.src_mac.data(), 6);
  if (o.vlan) {
    put16(f, 0x8100);
    put16(f, o.vlan_tci);
  }
  put16(f, src.family == 6 ? 0x86dd : 0x0800);
  const uint32_t udp_len = static_cast<uint32_t>(8 + payload.size());
  const size_t l3 = f.size();
  if (src.family == 4) {
    const size_t ihl = 20 + o.ip_options.size();
    f.push_back(static_cast<uint8_t>(0x40 | ihl / 4));
    f.push_back(o.tos);
    put16(f, static_cast<uint16_t>(ihl + udp_len + o.tot_len_delta));
    put16(f, o.ip_id);
    put16(f, o.frag);
    f.push_back(o.ttl);
    f.push_back(o.proto);
    put16(f, 0);
    put(f, src.addr.data(), 4);
    put(f, dst.addr.data(), 4);
    put(f, o.ip_options);
    const uint16_t c = static_cast<uint16_t>(~fold(sum16(f.data() + l3, ihl)));
    f[l3 + 10] = static_cast<uint8_t>(c >> 8);
    f[l3 + 11] = static_cast<uint8_t>(c);
  } else {
    f.push_back(static_cast<uint8_t>(0x60 | o.tos >> 4));
    f.push_back(static_cast<uint8_t>((o.tos & 0x0f) << 4));
    put16(f, 0);
    put16(f, static_cast<uint16_t>(o.v6_ext.size() + udp_len + o.tot_len_delta));
    f.push_back(o.v6_ext.empty() ? o.proto : o.v6_first_next);
    f.push_back(o.ttl);
    put(f, src.addr.data(), 16);
    put(f, dst.addr.data(), 16);
    put(f, o.v6_ext);
  }
  const size_t l4 = f.size();
  put16(f, src.port);
  put16(f, dst.port);
  put16(f, static_cast<uint16_t>(udp_len + o.udp_len_delta));
  put16(f, 0);
  put(f, payload);
  if (!o.zero_csum) {
    uint16_t c = static_cast<uint16_t>(~fold(sum16(f.data() + l4, udp_len, pseudo_sum(src, dst, udp_len))));
    if (c == 0) c = 0xffff;
    f[l4 + 6] = static_cast<uint8_t>(c >> 8);
    f[l4 + 7] = static_cast<uint8_t>(c);
  }
  while (f.size() < o.pad_to) f.push_back(0);
  return f;
}

// PROXY v2 header, built byte by byte from haproxy's proxy-protocol.txt section 2.2.
inline Bytes pp2(const Ep& client, const Ep& vip) {
  Bytes h = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21};
  h.push_back(client.family == 6 ? 0x22 : 0x12);
  put16(h, client.family == 6 ? 36 : 12);
  put(h, client.addr.data(), alen(client));
  put(h, vip.addr.data(), alen(vip));
  put16(h, client.port);
  put16(h, vip.port);
  return h;
}

inline Bytes concat(const Bytes& a, const Bytes& b) {
  Bytes r = a;
  put(r, b);
  return r;
}

}  // namespace rtce::xdp_packets
