// xdp_fixtures_test.cpp — the XDP program (bpf/rtce_xdp.bpf.c) under BPF_PROG_TEST_RUN.
//
// Katran-style fixtures: each case feeds frames built here (with checksums computed here,
// independently of the program) and checks the verdict, the exact output bytes, that the
// output's IP and UDP checksums verify from scratch, the counter deltas (exactly one exit
// reason per run), and the flows map / ring buffer. Plus truncation at every offset and a
// Tailscale-style mutation table over Chrome's real Binding request, checked against a
// reference built from the shared wire headers. The payload builders, the program harness
// and the mutation table live in tests/support/ (shared with xdp_differential_test.cpp).
//
// The program is loaded for real (the verifier runs). Needs root (CAP_BPF + CAP_NET_ADMIN);
// without it the cases are skipped with the reason printed. Cases run with
// RTCE_XDP_F_SKIP_FIB (fixed MACs, XDP_TX) so that results do not depend on the host's
// routes; the fib cases build their own routes in a private network namespace.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rtce_hint.h"
#include "rtce_proxy_v2.h"
#include "rtce_stun.h"
#include "rtce_xdp.h"
#include "rtce_xdp.skel.h"
#include "stun_payloads.h"
#include "xdp_harness.h"
#include "xdp_mutations.h"
#include "xdp_packets.h"

namespace {

using namespace rtce::xdp_packets;

// ------------------------------------------------------------------ output checks

struct Parsed {
  uint8_t family = 0;
  bool vlan = false;
  Ep src, dst;
  uint16_t udp_csum = 0;
  Bytes payload;
};

// Parses an output frame and checks, from scratch, that its IPv4 header checksum and its
// UDP checksum verify (0 = none is accepted for IPv4 only).
Parsed parse_and_verify(const Bytes& f) {
  Parsed p;
  size_t off = 12;
  uint16_t type = get16(f, off);
  if (type == 0x8100) {
    p.vlan = true;
    off += 4;
    type = get16(f, off);
  }
  off += 2;
  uint32_t udp_len = 0;
  if (type == 0x0800) {
    p.family = 4;
    EXPECT_EQ(f.at(off), 0x45);
    EXPECT_EQ(fold(sum16(f.data() + off, 20)), 0xffff) << "IPv4 header checksum";
    EXPECT_EQ(get16(f, off + 2) + 14u + (p.vlan ? 4u : 0u), f.size()) << "IPv4 total length";
    std::memcpy(p.src.addr.data(), f.data() + off + 12, 4);
    std::memcpy(p.dst.addr.data(), f.data() + off + 16, 4);
    off += 20;
  } else {
    EXPECT_EQ(type, 0x86dd);
    p.family = 6;
    EXPECT_EQ(f.at(off + 6), 17);
    EXPECT_EQ(get16(f, off + 4) + 54u + (p.vlan ? 4u : 0u), f.size()) << "IPv6 payload length";
    std::memcpy(p.src.addr.data(), f.data() + off + 8, 16);
    std::memcpy(p.dst.addr.data(), f.data() + off + 24, 16);
    off += 40;
  }
  p.src.family = p.dst.family = p.family;
  p.src.port = get16(f, off);
  p.dst.port = get16(f, off + 2);
  udp_len = get16(f, off + 4);
  p.udp_csum = get16(f, off + 6);
  EXPECT_EQ(off + udp_len, f.size()) << "UDP length";
  if (p.udp_csum == 0) {
    EXPECT_EQ(p.family, 4) << "IPv6 UDP without checksum";
  } else {
    EXPECT_EQ(fold(sum16(f.data() + off, udp_len, pseudo_sum(p.src, p.dst, udp_len))), 0xffff)
        << "UDP checksum";
  }
  p.payload.assign(f.begin() + static_cast<long>(off + 8), f.end());
  return p;
}

// Quiet check of an untagged frame's UDP checksum (true also for IPv4 "no checksum").
bool udp_checksum_ok(const Bytes& f) {
  Ep src, dst;
  size_t l4;
  if (get16(f, 12) == 0x0800) {
    src.family = dst.family = 4;
    std::memcpy(src.addr.data(), f.data() + 26, 4);
    std::memcpy(dst.addr.data(), f.data() + 30, 4);
    l4 = 34;
  } else {
    src.family = dst.family = 6;
    std::memcpy(src.addr.data(), f.data() + 22, 16);
    std::memcpy(dst.addr.data(), f.data() + 38, 16);
    l4 = 54;
  }
  const uint32_t udp_len = get16(f, l4 + 4);
  if (l4 + udp_len > f.size()) return false;
  if (get16(f, l4 + 6) == 0) return src.family == 4;
  return fold(sum16(f.data() + l4, udp_len, pseudo_sum(src, dst, udp_len))) == 0xffff;
}

// ------------------------------------------------------------------ the harness

std::set<uint32_t>& reasons_seen() {
  static std::set<uint32_t> seen;
  return seen;
}

struct Expect {
  int action;
  uint32_t reason;
  uint32_t dir = RTCE_XDP_DIR_TO_TRANSCEIVER;
  std::optional<Bytes> out = std::nullopt;  // exact output; PASS/DROP always expect the input
};

// The shared loader and map access (tests/support/xdp_harness.h), plus the fixtures' own
// check of one run.
class Harness : public XdpProgram {
 public:
  // Runs one frame and checks verdict, counters (exactly one exit reason, +1) and bytes.
  Bytes step(const Bytes& in, const Expect& e, uint32_t ingress_ifindex = 0) {
    const auto before = counters();
    Run r = run(in, ingress_ifindex);
    const auto after = counters();
    EXPECT_EQ(r.action, e.action) << "reason expected: " << rtce_xdp_reason_names[e.reason];
    for (uint32_t reason = 0; reason < RTCE_XDP_REASON_COUNT; reason++) {
      if (reason == RTCE_XDP_EVENT_LOST) continue;  // side counter, not an exit
      for (uint32_t dir = 0; dir < RTCE_XDP_DIR_COUNT; dir++) {
        const uint32_t i = rtce_xdp_counter_index(reason, dir);
        const uint64_t want = (reason == e.reason && dir == e.dir) ? 1 : 0;
        EXPECT_EQ(after[i] - before[i], want)
            << "counter " << rtce_xdp_reason_names[reason] << "/" << rtce_xdp_direction_names[dir];
      }
    }
    reasons_seen().insert(e.reason);
    if (e.action == XDP_PASS || e.action == XDP_DROP) EXPECT_EQ(r.out, in) << "packet must be untouched";
    if (e.out) EXPECT_EQ(r.out, *e.out) << "output bytes";
    if (r.action == XDP_TX || r.action == XDP_REDIRECT) parse_and_verify(r.out);
    return r.out;
  }
};

// The frame the program emits towards an endpoint for `payload` from `client` to `vip`.
Bytes to_endpoint(const Ep& client, const Ep& vip, const Ep& endpoint, const Bytes& payload, uint8_t tos = 0,
                  bool vlan = false) {
  return frame(relay_for(endpoint.family), endpoint, concat(pp2(client, vip), payload), relay_out(tos, vlan));
}

// What an endpoint sends back: PROXY v2 echoed + payload, to the relay's return port.
Bytes from_endpoint(const Ep& endpoint, const Ep& client, const Ep& vip, const Bytes& payload) {
  return frame(endpoint, relay_for(endpoint.family), concat(pp2(client, vip), payload));
}

// The frame the program emits towards the client for a return datagram.
Bytes to_client(const Ep& client, const Ep& vip, const Bytes& payload) {
  return frame(vip, client, payload, relay_out());
}

// ------------------------------------------------------------------ cases

using Case = std::function<void(Harness&)>;

const Expect kNewFlow{XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW};

void valid_hint_ipv4(Harness& h) {
  const Bytes stun_bytes = chrome_binding_request();
  h.step(frame(kClient4, kVip4, stun_bytes),
         {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER,
          to_endpoint(kClient4, kVip4, kEndpoint2, stun_bytes)});
  auto f = h.flow(kClient4, kVip4);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->endpoint_id, 2);
  EXPECT_EQ(f->endpoint.family, 4);
  EXPECT_EQ(f->endpoint.port_be, htons(kEndpoint2.port));
  EXPECT_EQ(std::memcmp(f->endpoint.addr, kEndpoint2.addr.data(), 16), 0);
  EXPECT_NE(f->created_ns, 0u);
  auto ev = h.take_events();
  ASSERT_EQ(ev.size(), 1u);
  const rtce_flow_key want = flow_key(kClient4, kVip4);
  EXPECT_EQ(std::memcmp(&ev[0].key, &want, sizeof(want)), 0);
  EXPECT_EQ(ev[0].endpoint_id, 2);
  EXPECT_EQ(ev[0].endpoint.port_be, htons(kEndpoint2.port));
  EXPECT_EQ(ev[0].timestamp_ns, f->created_ns);
}

void valid_hint_ipv6(Harness& h) {
  const Bytes s = binding(mint(kCluster, 3));
  h.step(frame(kClient6, kVip6, s, {.tos = 0xb8}),
         {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER,
          to_endpoint(kClient6, kVip6, kEndpoint3, s, 0xb8)});
  auto f = h.flow(kClient6, kVip6);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->endpoint_id, 3);
  auto ev = h.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].key.family, 6);
  EXPECT_EQ(ev[0].endpoint_id, 3);
}

void flow_hit_then_return_ipv4(Harness& h) {
  h.step(frame(kClient4, kVip4, chrome_binding_request()), kNewFlow);
  const Bytes media = rtp(200);
  h.step(frame(kClient4, kVip4, media, {.tos = 0xb8}),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_TRANSCEIVER,
          to_endpoint(kClient4, kVip4, kEndpoint2, media, 0xb8)});
  EXPECT_TRUE(h.take_events().size() == 1u) << "only the first packet creates a flow";
  const Bytes reply = rtp(160);
  h.step(from_endpoint(kEndpoint2, kClient4, kVip4, reply),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, to_client(kClient4, kVip4, reply)});
}

void flow_hit_ipv6_and_return(Harness& h) {
  h.step(frame(kClient6, kVip6, binding(mint(kCluster, 3))), kNewFlow);
  const Bytes media = rtp(200);
  h.step(frame(kClient6, kVip6, media), {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                         to_endpoint(kClient6, kVip6, kEndpoint3, media)});
  const Bytes reply = rtp(99);  // odd length: the checksum update must not care
  h.step(from_endpoint(kEndpoint3, kClient6, kVip6, reply),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, to_client(kClient6, kVip6, reply)});
}

void v4_client_to_v6_endpoint(Harness& h) {
  const Bytes s = binding(mint(kCluster, 3, 0xdeadbeef));
  h.step(frame(kClient4, kVip4, s), {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                     to_endpoint(kClient4, kVip4, kEndpoint3, s)});
  const Bytes media = rtp(201);
  h.step(frame(kClient4, kVip4, media), {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                         to_endpoint(kClient4, kVip4, kEndpoint3, media)});
  // The endpoint answers over IPv6 with the IPv4 flow's header: out goes IPv4.
  const Bytes reply = rtp(120);
  h.step(from_endpoint(kEndpoint3, kClient4, kVip4, reply),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, to_client(kClient4, kVip4, reply)});
}

void v6_client_to_v4_endpoint(Harness& h) {
  const Bytes s = binding(mint(kCluster, 2, 77));
  h.step(frame(kClient6, kVip6, s), {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                     to_endpoint(kClient6, kVip6, kEndpoint2, s)});
  const Bytes reply = rtp(64);
  h.step(from_endpoint(kEndpoint2, kClient6, kVip6, reply),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, to_client(kClient6, kVip6, reply)});
}

void vlan_tagged_stun(Harness& h) {
  const Bytes s = chrome_binding_request();
  FrameOpts o;
  o.vlan = true;
  h.step(frame(kClient4, kVip4, s, o), {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                        to_endpoint(kClient4, kVip4, kEndpoint2, s, 0, true)});
  EXPECT_TRUE(h.flow(kClient4, kVip4));
}

void ethernet_padding_is_trimmed(Harness& h) {
  h.step(frame(kClient4, kVip4, chrome_binding_request()), kNewFlow);
  const Bytes tiny = rtp(4);
  FrameOpts o;
  o.pad_to = 60;
  h.step(frame(kClient4, kVip4, tiny, o), {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                           to_endpoint(kClient4, kVip4, kEndpoint2, tiny)});
}

void username_not_first(Harness& h) {
  const Bytes s = stun(0x0001, {{0xc057, std::string("\x00\x01\x00\x00", 4)},
                                {0x802a, "abcdefgh"},
                                {0x0024, "\x6e\x7e\x1e\xff"},
                                {0x0006, mint(kCluster, 2) + ":xyz1"}});
  h.step(frame(kClient4, kVip4, s), {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                     to_endpoint(kClient4, kVip4, kEndpoint2, s)});
}

void hint_rejections(Harness& h) {
  struct R {
    std::string ufrag;
    uint32_t slot;
  };
  std::string bad_mac = mint(kCluster, 2);
  bad_mac[15] = bad_mac[15] == 'A' ? 'B' : 'A';
  const std::vector<R> rs = {
      {bad_mac, RTCE_HINT_BAD_MAC},
      {mint(kCluster + 1, 2), RTCE_XDP_HINT_WRONG_CLUSTER},
      {mint(kCluster, 2, 5, 7), RTCE_HINT_UNKNOWN_KEY},
      {"abcd", RTCE_HINT_BAD_LENGTH},
      {"EQEAAhmWo1ORAx-A", RTCE_HINT_BAD_CHAR},
      {"IQEAAhmWo1ORAxOA", RTCE_HINT_BAD_VERSION},
  };
  for (const auto& r : rs) {
    SCOPED_TRACE(r.ufrag);
    const uint64_t before = h.hint_failures(r.slot);
    h.step(frame(kClient4, kVip4, binding(r.ufrag)), {XDP_DROP, RTCE_XDP_HINT_REJECTED});
    EXPECT_EQ(h.hint_failures(r.slot), before + 1);
  }
  EXPECT_EQ(h.flow_count(), 0u);
  EXPECT_TRUE(h.take_events().empty());
}

// The global relay's ingress role (docs/global-relay.md): a hint naming cluster 9, which
// this relay forwards to (peer_clusters), is verified with cluster 9's keys; the flow's
// endpoint is cluster 9's relay, framed exactly as for a local transceiver, and that
// relay's replies come back to the client from the VIP.
const Ep kPeerRelay = ep("198.18.9.9", 3480);

void ingress_for_a_peer_cluster(Harness& h) {
  rtce_xdp_peer_cluster pc{};
  pc.relay = endpoint_value(kPeerRelay);
  pc.in_use = 1;
  pc.keys.keys[0] = test_key(3);
  h.update(h.skel()->maps.peer_clusters, uint32_t{9}, pc);

  const Bytes s = binding(mint(9, 7, 0x0a0b0c0d, 3));
  h.step(frame(kClient4, kVip4, s), {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                     to_endpoint(kClient4, kVip4, kPeerRelay, s)});
  auto f = h.flow(kClient4, kVip4);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->role, RTCE_RELAY_ROLE_INGRESS);
  EXPECT_EQ(f->endpoint_id, 9) << "an ingress flow's endpoint id is its cluster";
  auto ev = h.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].role, RTCE_RELAY_ROLE_INGRESS);

  const Bytes media = rtp(200);
  h.step(frame(kClient4, kVip4, media), {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                         to_endpoint(kClient4, kVip4, kPeerRelay, media)});
  const Bytes reply = rtp(160);
  h.step(from_endpoint(kPeerRelay, kClient4, kVip4, reply),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, to_client(kClient4, kVip4, reply)});

  // Cluster 9 named but signed with this relay's own key: cluster 9 does not sign with it.
  const uint64_t before = h.hint_failures(RTCE_HINT_UNKNOWN_KEY);
  h.step(frame(kClient6, kVip6, binding(mint(9, 7))), {XDP_DROP, RTCE_XDP_HINT_REJECTED});
  EXPECT_EQ(h.hint_failures(RTCE_HINT_UNKNOWN_KEY), before + 1);
  // A local hint still goes to the local endpoint, as a local flow.
  h.step(frame(kClient6, kVip6, binding(mint(kCluster, 3))), kNewFlow);
  auto local = h.flow(kClient6, kVip6);
  ASSERT_TRUE(local);
  EXPECT_EQ(local->role, RTCE_RELAY_ROLE_LOCAL);
}

// The owner role: a trusted peer relay (an ingress of this cluster) forwards a flow to
// peers.listen; the program hands the framed datagrams to the transceiver unchanged and sends
// the replies back to that peer, from peers.listen, unchanged.
const Ep kPeerListen4 = ep("198.18.0.1", 3480);
const Ep kPeerListen6 = ep("2001:2::1", 3480);
const Ep kIngress4 = ep("198.18.7.7", 40000);
const Ep kIngress6 = ep("2001:2::7:7", 40000);

void configure_owner_role(Harness& h) {
  rtce_xdp_peer_listen pl{};
  std::memcpy(pl.addr4, kPeerListen4.addr.data(), 4);
  std::memcpy(pl.addr6, kPeerListen6.addr.data(), 16);
  pl.port_be = htons(kPeerListen4.port);
  pl.flags = RTCE_XDP_F_HAVE_V4 | RTCE_XDP_F_HAVE_V6;
  h.update(h.skel()->maps.peer_listen, uint32_t{0}, pl);
  rtce_xdp_trusted_key t4{};
  t4.prefixlen = RTCE_XDP_TRUSTED_KEY_PREFIX + 24;  // 198.18.7.0/24
  t4.family = RTCE_FAMILY_V4;
  std::memcpy(t4.addr, kIngress4.addr.data(), 3);
  h.update(h.skel()->maps.peer_trusted, t4, uint8_t{1});
  rtce_xdp_trusted_key t6{};
  t6.prefixlen = RTCE_XDP_TRUSTED_KEY_PREFIX + 112;  // 2001:2::7:0/112
  t6.family = RTCE_FAMILY_V6;
  std::memcpy(t6.addr, kIngress6.addr.data(), 14);
  h.update(h.skel()->maps.peer_trusted, t6, uint8_t{1});
}

uint64_t role_packets(Harness& h, uint32_t role, uint32_t dir) {
  const int ncpu = libbpf_num_possible_cpus();
  std::vector<rtce_xdp_counter> per_cpu(static_cast<size_t>(ncpu));
  const uint32_t idx = role * RTCE_XDP_DIR_COUNT + dir;
  EXPECT_EQ(bpf_map_lookup_elem(bpf_map__fd(h.skel()->maps.role_counters), &idx, per_cpu.data()), 0);
  uint64_t n = 0;
  for (const auto& c : per_cpu) n += c.packets;
  return n;
}

// The frame the program emits towards a peer relay: the reply as the transceiver framed it.
Bytes to_peer(const Ep& peer, const Ep& client, const Ep& vip, const Bytes& payload) {
  return frame(peer.family == 6 ? kPeerListen6 : kPeerListen4, peer, concat(pp2(client, vip), payload),
               relay_out());
}

void owner_for_a_peer_ingress(Harness& h) {
  configure_owner_role(h);
  const Bytes check = binding(mint(kCluster, 2));
  const Bytes framed = concat(pp2(kClient4, kVip4), check);

  // Trust, framing and "no chains" come first; none of them leaves state.
  h.step(frame(ep("198.18.8.8", 40000), kPeerListen4, framed), {XDP_DROP, RTCE_XDP_PEER_UNTRUSTED});
  h.step(frame(kIngress4, kPeerListen4, check), {XDP_DROP, RTCE_XDP_PEER_MALFORMED});
  h.step(frame(kIngress4, kPeerListen4, concat(pp2(kClient4, kVip4), rtp(100))),
         {XDP_PASS, RTCE_XDP_NO_FLOW});
  h.step(frame(kIngress4, kPeerListen4, concat(pp2(kClient4, kVip4), binding(mint(9, 2)))),
         {XDP_DROP, RTCE_XDP_HINT_REJECTED});
  EXPECT_EQ(h.flow_count(), 0u);

  // The check makes an owner flow and goes to endpoint 2 as it came, from the return port.
  h.step(frame(kIngress4, kPeerListen4, framed),
         {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER,
          frame(kRelay4, kEndpoint2, framed, relay_out())});
  auto f = h.flow(kClient4, kVip4);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->role, RTCE_RELAY_ROLE_OWNER);
  EXPECT_EQ(f->endpoint_id, 2);
  auto ev = h.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].role, RTCE_RELAY_ROLE_OWNER);

  const Bytes media = concat(pp2(kClient4, kVip4), rtp(200));
  h.step(frame(kIngress4, kPeerListen4, media), {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                                 frame(kRelay4, kEndpoint2, media, relay_out())});
  const Bytes reply = rtp(160);
  h.step(from_endpoint(kEndpoint2, kClient4, kVip4, reply),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, to_peer(kIngress4, kClient4, kVip4, reply)});

  // Another trusted peer: its media is refused, its verified check moves the flow there (the
  // client's ingress restarted elsewhere), over IPv6 towards the IPv4 endpoint.
  h.step(frame(kIngress6, kPeerListen6, media), {XDP_DROP, RTCE_XDP_PEER_WRONG_SENDER});
  h.step(frame(kIngress6, kPeerListen6, concat(pp2(kClient4, kVip4), rtp(30))),
         {XDP_DROP, RTCE_XDP_PEER_WRONG_SENDER});
  h.step(frame(kIngress6, kPeerListen6, framed), {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_TRANSCEIVER,
                                                  frame(kRelay4, kEndpoint2, framed, relay_out())});
  h.step(from_endpoint(kEndpoint2, kClient4, kVip4, reply),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, to_peer(kIngress6, kClient4, kVip4, reply)});
  h.step(frame(kIngress4, kPeerListen4, media), {XDP_DROP, RTCE_XDP_PEER_WRONG_SENDER});

  // An ingress relay's ICE-TCP flow (STREAM header), check or media: the owner's userspace
  // workers take it (the program keeps no TCP flows).
  Bytes stream = pp2(kClient4, kVip4);
  stream[13] = RTCE_PP2_FAM_INET_STREAM;
  for (const Bytes& payload : {check, rtp(40)})
    h.step(frame(kIngress4, kPeerListen4, concat(stream, payload)),
           {XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, RTCE_XDP_DIR_TO_TRANSCEIVER});

  // A local flow is nobody's to forward.
  h.step(frame(kClient6, kVip6, binding(mint(kCluster, 3))), kNewFlow);
  h.step(frame(kIngress4, kPeerListen4, concat(pp2(kClient6, kVip6), binding(mint(kCluster, 3)))),
         {XDP_DROP, RTCE_XDP_PEER_WRONG_SENDER});

  EXPECT_EQ(role_packets(h, RTCE_RELAY_ROLE_OWNER, RTCE_XDP_DIR_TO_TRANSCEIVER), 3u);
  EXPECT_EQ(role_packets(h, RTCE_RELAY_ROLE_OWNER, RTCE_XDP_DIR_TO_CLIENT), 2u);
  EXPECT_EQ(role_packets(h, RTCE_RELAY_ROLE_LOCAL, RTCE_XDP_DIR_TO_TRANSCEIVER), 0u)
      << "local is not counted";
}

void flow_miss_passes(Harness& h) {
  h.step(frame(kClient4, kVip4, binding(mint(kCluster, 9))), {XDP_PASS, RTCE_XDP_UNKNOWN_ENDPOINT});
  h.step(frame(kClient4, kVip4, stun(0x0001, {{0x0024, "abcd"}, {0x802a, "12345678"}})),
         {XDP_PASS, RTCE_XDP_STUN_NO_USERNAME});
  h.step(frame(kClient4, kVip4, stun(0x0101, {{0x0006, mint(kCluster, 2) + ":a"}})),
         {XDP_PASS, RTCE_XDP_STUN_NOT_BINDING_REQUEST});
  Bytes bad_attr = stun(0x0001, {{0x0024, "abcd"}});
  bad_attr[23] = 200;
  h.step(frame(kClient4, kVip4, bad_attr), {XDP_PASS, RTCE_XDP_STUN_MALFORMED});
  h.step(frame(kClient4, kVip4, stun(0x0001, {{0x0006, "nocolon"}})), {XDP_PASS, RTCE_XDP_STUN_MALFORMED});
  h.step(frame(kClient4, kVip4, rtp(200)), {XDP_PASS, RTCE_XDP_NO_FLOW});
  h.step(frame(kClient6, kVip6, Bytes{0x16, 0xfe, 0xfd, 0, 0}), {XDP_PASS, RTCE_XDP_NO_FLOW});
  h.step(frame(kClient4, kVip4, Bytes{}), {XDP_PASS, RTCE_XDP_NO_FLOW});
  EXPECT_EQ(h.flow_count(), 0u);
}

void stun_too_long_for_the_window(Harness& h) {
  const Bytes s = stun(0x0001, {{0x8022, std::string(600, 's')}, {0x0006, mint(kCluster, 2) + ":a"}});
  ASSERT_GT(s.size(), static_cast<size_t>(RTCE_XDP_STUN_WINDOW));
  h.step(frame(kClient4, kVip4, s), {XDP_PASS, RTCE_XDP_PASS_STUN_TOO_LONG});
  // Exactly at the window: still walked in XDP.
  std::string pad(RTCE_XDP_STUN_WINDOW - 20 - 4 - 4 - 24, 'p');
  const Bytes at = stun(0x0001, {{0x8022, pad}, {0x0006, mint(kCluster, 2) + ":abcdefg"}});
  ASSERT_EQ(at.size(), static_cast<size_t>(RTCE_XDP_STUN_WINDOW));
  h.step(frame(kClient4, kVip4, at), kNewFlow);
}

void truncation_at_every_offset(Harness& h) {
  const Bytes full = chrome_binding_request();
  // A shorter datagram (consistent IP/UDP lengths) at every length.
  for (size_t len = 0; len < full.size(); len++) {
    SCOPED_TRACE("datagram length " + std::to_string(len));
    const Bytes cut(full.begin(), full.begin() + static_cast<long>(len));
    const uint32_t reason = len == 0 ? RTCE_XDP_NO_FLOW : RTCE_XDP_STUN_MALFORMED;
    h.step(frame(kClient4, kVip4, cut), {XDP_PASS, reason});
  }
  // The frame itself cut at every offset: lengths then disagree with the bytes present.
  // (BPF_PROG_TEST_RUN refuses frames shorter than an Ethernet header; so do drivers.)
  const Bytes f = frame(kClient4, kVip4, full);
  for (size_t len = 14; len < f.size(); len++) {
    SCOPED_TRACE("frame length " + std::to_string(len));
    const Bytes cut(f.begin(), f.begin() + static_cast<long>(len));
    auto r = h.run(cut);
    EXPECT_EQ(r.action, XDP_PASS);
    EXPECT_EQ(r.out, cut);
  }
  EXPECT_EQ(h.flow_count(), 0u);
  EXPECT_TRUE(h.take_events().empty());
  // The truncated frames that still reach UDP count as bad_length at the VIP.
  const Bytes cut(f.begin(), f.end() - 1);
  h.step(cut, {XDP_PASS, RTCE_XDP_PASS_BAD_LENGTH});
}

void bad_lengths(Harness& h) {
  const Bytes s = chrome_binding_request();
  FrameOpts o;
  o.udp_len_delta = -4;
  h.step(frame(kClient4, kVip4, s, o), {XDP_PASS, RTCE_XDP_PASS_BAD_LENGTH});
  o = {};
  o.tot_len_delta = 8;
  h.step(frame(kClient6, kVip6, s, o), {XDP_PASS, RTCE_XDP_PASS_BAD_LENGTH});
  o = {};
  o.pad_to = 14 + 20 + 8 + s.size() + 65;  // more than Ethernet padding
  h.step(frame(kClient4, kVip4, s, o), {XDP_PASS, RTCE_XDP_PASS_BAD_LENGTH});
  EXPECT_EQ(h.flow_count(), 0u);
}

void return_path_rejections(Harness& h) {
  h.step(frame(kClient4, kVip4, chrome_binding_request()), kNewFlow);
  const Bytes reply = rtp(50);
  Ep wrong_port = kEndpoint2;
  wrong_port.port = 9999;
  h.step(from_endpoint(wrong_port, kClient4, kVip4, reply),
         {XDP_DROP, RTCE_XDP_RETURN_WRONG_SENDER, RTCE_XDP_DIR_TO_CLIENT});
  const Ep other = ep("198.18.2.99", kEndpoint2.port);
  h.step(from_endpoint(other, kClient4, kVip4, reply),
         {XDP_DROP, RTCE_XDP_RETURN_WRONG_SENDER, RTCE_XDP_DIR_TO_CLIENT});
  h.step(from_endpoint(kEndpoint3, kClient4, kVip4, reply),
         {XDP_DROP, RTCE_XDP_RETURN_WRONG_SENDER, RTCE_XDP_DIR_TO_CLIENT});
  Ep unknown_client = kClient4;
  unknown_client.port = 1234;
  h.step(from_endpoint(kEndpoint2, unknown_client, kVip4, reply),
         {XDP_DROP, RTCE_XDP_RETURN_NO_FLOW, RTCE_XDP_DIR_TO_CLIENT});
  h.step(frame(kEndpoint2, kRelay4, reply), {XDP_DROP, RTCE_XDP_RETURN_MALFORMED, RTCE_XDP_DIR_TO_CLIENT});
  Bytes local = pp2(kClient4, kVip4);
  local[12] = 0x20;  // LOCAL command
  h.step(frame(kEndpoint2, kRelay4, concat(local, reply)),
         {XDP_DROP, RTCE_XDP_RETURN_MALFORMED, RTCE_XDP_DIR_TO_CLIENT});
  const Bytes hdr = pp2(kClient4, kVip4);
  for (size_t len = 0; len < hdr.size(); len++) {
    SCOPED_TRACE("PROXY v2 cut at " + std::to_string(len));
    h.step(frame(kEndpoint2, kRelay4, Bytes(hdr.begin(), hdr.begin() + static_cast<long>(len))),
           {XDP_DROP, RTCE_XDP_RETURN_MALFORMED, RTCE_XDP_DIR_TO_CLIENT});
  }
  // A header with TLVs is valid: userspace strips those.
  Bytes tlv = pp2(kClient4, kVip4);
  tlv[15] = static_cast<uint8_t>(tlv[15] + 4);
  put(tlv, Bytes{0x04, 0x00, 0x01, 0x00});  // PP2_TYPE_NOOP, length 1
  h.step(frame(kEndpoint2, kRelay4, concat(tlv, reply)),
         {XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, RTCE_XDP_DIR_TO_CLIENT});
  // A STREAM header (an ICE-TCP flow): its connection lives in a userspace worker.
  Bytes stream = pp2(kClient4, kVip4);
  stream[13] = RTCE_PP2_FAM_INET_STREAM;
  h.step(frame(kEndpoint2, kRelay4, concat(stream, reply)),
         {XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, RTCE_XDP_DIR_TO_CLIENT});
}

void foreign_traffic_passes(Harness& h) {
  const Bytes s = chrome_binding_request();
  Ep other_port = kVip4;
  other_port.port = 3479;
  h.step(frame(kClient4, other_port, s), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  h.step(frame(kClient4, ep("198.18.0.11", 3478), s), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  h.step(frame(kClient6, ep("2001:2::11", 3478), s), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  FrameOpts tcp;
  tcp.proto = 6;
  h.step(frame(kClient4, kVip4, s, tcp), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  h.step(frame(kClient6, kVip6, s, tcp), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  Bytes arp;
  put(arp, Bytes{0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  put(arp, kPeerMac.data(), 6);
  put(arp, Bytes{0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1});
  put(arp, kPeerMac.data(), 6);
  put(arp, kClient4.addr.data(), 4);
  put(arp, Bytes(6, 0));
  put(arp, kVip4.addr.data(), 4);
  h.step(arp, {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  Bytes qinq = frame(kClient4, kVip4, s, {.vlan = true});
  qinq.insert(qinq.begin() + 12, {0x88, 0xa8, 0x00, 0x05});  // 802.1ad outer tag
  h.step(qinq, {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  Bytes double_q = frame(kClient4, kVip4, s, {.vlan = true});
  double_q.insert(double_q.begin() + 12, {0x81, 0x00, 0x00, 0x05});
  h.step(double_q, {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  h.step(Bytes(14, 0xee), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  // The return port on another address is not ours either.
  h.step(frame(kEndpoint2, ep("198.18.0.2", kReturnPort), rtp(10)), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  EXPECT_EQ(h.flow_count(), 0u);
}

void ip_options_and_fragments(Harness& h) {
  const Bytes s = chrome_binding_request();
  FrameOpts opt;
  opt.ip_options = {0x94, 0x04, 0x00, 0x00};  // Router Alert
  h.step(frame(kClient4, kVip4, s, opt), {XDP_PASS, RTCE_XDP_PASS_IP_OPTIONS});
  h.step(frame(kEndpoint2, kRelay4, rtp(10), opt),
         {XDP_PASS, RTCE_XDP_PASS_IP_OPTIONS, RTCE_XDP_DIR_TO_CLIENT});
  Ep other = kVip4;
  other.port = 1;
  h.step(frame(kClient4, other, s, opt), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  FrameOpts first;
  first.frag = 0x2000;  // MF, offset 0
  h.step(frame(kClient4, kVip4, s, first), {XDP_PASS, RTCE_XDP_PASS_FRAGMENT});
  FrameOpts later;
  later.frag = 0x0010;  // offset 128 bytes: no UDP header to tell
  h.step(frame(kClient4, kVip4, s, later), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  FrameOpts hbh;
  hbh.v6_first_next = 0;
  hbh.v6_ext = {17, 0, 1, 4, 0, 0, 0, 0};  // hop-by-hop, PadN
  h.step(frame(kClient6, kVip6, s, hbh), {XDP_PASS, RTCE_XDP_PASS_IPV6_EXT});
  FrameOpts frag6;
  frag6.v6_first_next = 44;
  frag6.v6_ext = {17, 0, 0x00, 0x01, 0, 0, 0, 42};  // offset 0, M=1
  h.step(frame(kClient6, kVip6, s, frag6), {XDP_PASS, RTCE_XDP_PASS_FRAGMENT});
  frag6.v6_ext[2] = 0x01;  // offset 32 bytes
  h.step(frame(kClient6, kVip6, s, frag6), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
  EXPECT_EQ(h.flow_count(), 0u);
}

void zero_udp_checksum(Harness& h) {
  FrameOpts z;
  z.zero_csum = true;
  const Bytes s = chrome_binding_request();
  // IPv4 outer: no checksum stays no checksum.
  Bytes want = to_endpoint(kClient4, kVip4, kEndpoint2, s);
  want[14 + 20 + 6] = want[14 + 20 + 7] = 0;
  h.step(frame(kClient4, kVip4, s, z),
         {XDP_TX, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER, want});
  // IPv6 outer needs one: userspace computes it.
  Ep client = kClient4;
  client.port = 50001;
  h.step(frame(client, kVip4, binding(mint(kCluster, 3)), z), {XDP_PASS, RTCE_XDP_PASS_ZERO_CSUM});
  // The hint was valid, so the flow exists (as in userspace); only this datagram goes up.
  EXPECT_TRUE(h.flow(client, kVip4));
  // Return path, IPv4 endpoint without checksum, for an IPv6 client: passed.
  h.step(frame(kClient6, kVip6, binding(mint(kCluster, 2))), kNewFlow);
  h.step(frame(kEndpoint2, kRelay4, concat(pp2(kClient6, kVip6), rtp(20)), z),
         {XDP_PASS, RTCE_XDP_PASS_ZERO_CSUM, RTCE_XDP_DIR_TO_CLIENT});
  // ... and for an IPv4 client: forwarded without one.
  Bytes back = to_client(kClient4, kVip4, rtp(20));
  back[14 + 20 + 6] = back[14 + 20 + 7] = 0;
  h.step(frame(kEndpoint2, kRelay4, concat(pp2(kClient4, kVip4), rtp(20)), z),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, back});
}

void no_relay_address_for_family(Harness& h) {
  h.configure(RTCE_XDP_F_SKIP_FIB | RTCE_XDP_F_HAVE_V4);
  h.step(frame(kClient4, kVip4, binding(mint(kCluster, 3))), {XDP_PASS, RTCE_XDP_PASS_NO_RELAY_ADDR});
  // Without an IPv6 relay address there is no IPv6 return port either.
  h.step(frame(kEndpoint3, kRelay6, rtp(10)), {XDP_PASS, RTCE_XDP_PASS_NOT_OURS});
}

void new_flow_budget(Harness& h) {
  h.configure(RTCE_XDP_F_SKIP_FIB | RTCE_XDP_F_HAVE_V4 | RTCE_XDP_F_HAVE_V6, 1, 60ULL * 1000000000ULL);
  h.step(frame(kClient4, kVip4, chrome_binding_request()), kNewFlow);
  Ep second = kClient4;
  second.port = 50003;
  h.step(frame(second, kVip4, chrome_binding_request()), {XDP_PASS, RTCE_XDP_NEW_FLOW_BUDGET});
  EXPECT_FALSE(h.flow(second, kVip4));
  // Existing flows are not limited.
  h.step(frame(kClient4, kVip4, rtp(40)), {XDP_TX, RTCE_XDP_FORWARDED});
}

// Issue 15 #4: one valid hint replayed from spoofed sources must not fill the flows map.
// Sources in distinct /24s (spoofed4), so only the per-hint bound can stop them.
void hint_flow_limit(Harness& h) {
  constexpr uint32_t kMax = 4, kReplays = 40;
  h.set_flow_limits(kMax, RTCE_FLOW_LIMIT_NONE, 10ULL * 1000000000ULL);
  const Bytes replayed = binding(mint(kCluster, 2, 0x5eed0001));
  for (uint32_t i = 0; i < kReplays; i++)
    h.step(frame(spoofed4(i), kVip4, replayed),
           i < kMax ? kNewFlow : Expect{XDP_DROP, RTCE_XDP_HINT_FLOW_LIMIT});
  EXPECT_EQ(h.flow_count(), kMax) << "the replay created only the bound";
  ASSERT_TRUE(h.hint_limit(kCluster, 2, 0x5eed0001));
  EXPECT_EQ(h.hint_limit(kCluster, 2, 0x5eed0001)->flows, kMax);
  EXPECT_FALSE(h.flow(spoofed4(kMax), kVip4));
  // New calls do not fail: another hint (another session, same endpoint) gets its flows,
  // also over IPv6 ...
  h.step(frame(kClient4, kVip4, binding(mint(kCluster, 2, 0x5eed0002))), kNewFlow);
  h.step(frame(kClient6, kVip6, binding(mint(kCluster, 3, 0x5eed0003))), kNewFlow);
  // ... and calls already up keep going, the replayed hint's own flows included.
  h.step(frame(spoofed4(0), kVip4, rtp(40)), {XDP_TX, RTCE_XDP_FORWARDED});
  h.step(frame(kClient4, kVip4, rtp(40)), {XDP_TX, RTCE_XDP_FORWARDED});
  // Consent checks of an existing flow are flow hits, never limited.
  h.step(frame(spoofed4(1), kVip4, replayed), {XDP_TX, RTCE_XDP_FORWARDED});
  // A window later the hint may make flows again (a NAT rebind late in a call).
  EXPECT_GE(h.age_flow_limit_windows(11ULL * 1000000000ULL), 1u);
  h.step(frame(spoofed4(kReplays), kVip4, replayed), kNewFlow);
  EXPECT_EQ(h.hint_limit(kCluster, 2, 0x5eed0001)->flows, 1u) << "a new window";
}

void source_prefix_flow_limit(Harness& h) {
  constexpr uint32_t kMax = 3;
  h.set_flow_limits(RTCE_FLOW_LIMIT_NONE, kMax, 10ULL * 1000000000ULL, 24, 56);
  // Many hints (one per offer) from one /24: the prefix bound applies.
  for (uint32_t i = 0; i < 8; i++) {
    Ep c = kClient4;
    c.addr[3] = static_cast<uint8_t>(10 + i);
    h.step(frame(c, kVip4, binding(mint(kCluster, 2, 0x7000 + i))),
           i < kMax ? kNewFlow : Expect{XDP_DROP, RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT});
  }
  // The next /24 is another prefix.
  Ep other = kClient4;
  other.addr[2] ^= 1;
  h.step(frame(other, kVip4, binding(mint(kCluster, 2, 0x7100))), kNewFlow);
  // IPv6: addresses that differ past bit 56 share the prefix; in bit 56 or before, not.
  for (uint32_t i = 0; i < 5; i++) {
    Ep c = kClient6;
    c.addr[7] = static_cast<uint8_t>(i);  // bits 56..63
    c.addr[15] = static_cast<uint8_t>(i);
    h.step(frame(c, kVip6, binding(mint(kCluster, 3, 0x7200 + i))),
           i < kMax ? kNewFlow : Expect{XDP_DROP, RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT});
  }
  Ep other6 = kClient6;
  other6.addr[6] ^= 1;  // bits 48..55
  h.step(frame(other6, kVip6, binding(mint(kCluster, 3, 0x7300))), kNewFlow);
}

void default_flow_limits(Harness& h) {
  h.set_flow_limits(0, 0);  // as a loader that has not synced yet: the defaults
  const Bytes replayed = binding(mint(kCluster, 2, 0x5eed0009));
  for (uint32_t i = 0; i < RTCE_FLOW_LIMIT_DEFAULT_PER_HINT + 4; i++)
    h.step(frame(spoofed4(i), kVip4, replayed),
           i < RTCE_FLOW_LIMIT_DEFAULT_PER_HINT ? kNewFlow : Expect{XDP_DROP, RTCE_XDP_HINT_FLOW_LIMIT});
  EXPECT_EQ(h.flow_count(), RTCE_FLOW_LIMIT_DEFAULT_PER_HINT);
}

void ring_buffer_overflow_is_counted(Harness& h) {
  const int n = RTCE_XDP_EVENTS_BYTES / static_cast<int>(sizeof(rtce_xdp_flow_event) + 8) + 10;
  const auto before = h.counters();
  for (int i = 0; i < n; i++) {
    Ep c = kClient4;
    c.addr[2] = static_cast<uint8_t>(i >> 8);
    c.addr[3] = static_cast<uint8_t>(i);
    ASSERT_EQ(h.run(frame(c, kVip4, chrome_binding_request())).action, XDP_TX);
  }
  const auto after = h.counters();
  const uint32_t lost = rtce_xdp_counter_index(RTCE_XDP_EVENT_LOST, RTCE_XDP_DIR_TO_TRANSCEIVER);
  const uint32_t created = rtce_xdp_counter_index(RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_DIR_TO_TRANSCEIVER);
  EXPECT_EQ(after[created] - before[created], static_cast<uint64_t>(n));
  EXPECT_GT(after[lost] - before[lost], 0u);
  const auto events = h.take_events();
  EXPECT_EQ(events.size() + (after[lost] - before[lost]), static_cast<uint64_t>(n));
}

// CLOCK_MONOTONIC, which bpf_ktime_get_ns and (a tick behind) bpf_ktime_get_coarse_ns read.
uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

constexpr uint64_t kSecond = 1000000000ULL;
// The coarse clock trails CLOCK_MONOTONIC by up to one tick (4 ms at HZ=250); margin.
constexpr uint64_t kCoarseLag = 50000000ULL;

// Expects last_seen_ns to have been written during [before, after] by the coarse clock.
void expect_refreshed(const std::optional<rtce_xdp_flow>& f, uint64_t before, uint64_t after) {
  ASSERT_TRUE(f);
  EXPECT_GE(f->last_seen_ns + kCoarseLag, before) << "last_seen_ns not refreshed";
  EXPECT_LE(f->last_seen_ns, after);
}

void new_flow_records_last_seen(Harness& h) {
  h.step(frame(kClient4, kVip4, chrome_binding_request()), kNewFlow);
  const auto f = h.flow(kClient4, kVip4);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->last_seen_ns, f->created_ns) << "a new flow is active as of its creation";
  EXPECT_EQ(f->pad, 0);
}

// A hit on a flow last seen a granularity ago or more writes the time; every other field
// stays as it was.
void flow_hit_refreshes_stale_last_seen(Harness& h) {
  h.step(frame(kClient4, kVip4, chrome_binding_request()), kNewFlow);
  const auto created = h.flow(kClient4, kVip4);
  ASSERT_TRUE(created);
  for (const uint64_t age : {10 * kSecond, kSecond + kSecond / 10}) {
    SCOPED_TRACE(age);
    h.set_last_seen(kClient4, kVip4, mono_ns() - age);
    const uint64_t before = mono_ns();
    h.step(frame(kClient4, kVip4, rtp(200)), {XDP_TX, RTCE_XDP_FORWARDED});
    const uint64_t after = mono_ns();
    const auto f = h.flow(kClient4, kVip4);
    expect_refreshed(f, before, after);
    rtce_xdp_flow want = *created;
    want.last_seen_ns = f->last_seen_ns;
    EXPECT_EQ(std::memcmp(&*f, &want, sizeof want), 0) << "a field other than last_seen_ns changed";
  }
  // A flow an older loader created (last_seen_ns 0: it had padding there) is refreshed too.
  h.set_last_seen(kClient4, kVip4, 0);
  const uint64_t before = mono_ns();
  h.step(frame(kClient4, kVip4, rtp(20)), {XDP_TX, RTCE_XDP_FORWARDED});
  expect_refreshed(h.flow(kClient4, kVip4), before, mono_ns());
}

// A hit on a flow seen less than a granularity ago only reads: the stored value stays
// exactly as it was (no dirtied cache line per packet). Nor does a value a little ahead of
// the coarse clock count as stale.
void flow_hit_leaves_fresh_last_seen(Harness& h) {
  h.step(frame(kClient4, kVip4, chrome_binding_request()), kNewFlow);
  const uint64_t now = mono_ns();
  for (const uint64_t stored : {now - kSecond / 2, now - kSecond / 10, now, now + kSecond / 2}) {
    SCOPED_TRACE(static_cast<int64_t>(stored - now));
    h.set_last_seen(kClient4, kVip4, stored);
    for (int i = 0; i < 3; i++) h.step(frame(kClient4, kVip4, rtp(200)), {XDP_TX, RTCE_XDP_FORWARDED});
    const auto f = h.flow(kClient4, kVip4);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->last_seen_ns, stored) << "a fresh last_seen_ns was rewritten";
  }
}

// The granularity comes from the config (the loader derives it from flows.idle_timeout):
// with 10 ms, a value 100 ms old is stale.
void last_seen_granularity_from_config(Harness& h) {
  h.configure(RTCE_XDP_F_SKIP_FIB | RTCE_XDP_F_HAVE_V4 | RTCE_XDP_F_HAVE_V6, 1000000, 0, 10000000);
  h.step(frame(kClient6, kVip6, binding(mint(kCluster, 3))), kNewFlow);
  h.set_last_seen(kClient6, kVip6, mono_ns() - kSecond / 10);
  const uint64_t before = mono_ns();
  h.step(frame(kClient6, kVip6, rtp(200)), {XDP_TX, RTCE_XDP_FORWARDED});
  expect_refreshed(h.flow(kClient6, kVip6), before, mono_ns());
}

// Only client packets make a flow active (as in the userspace relay): replies on the
// return path do not touch last_seen_ns.
void return_path_does_not_touch_last_seen(Harness& h) {
  h.step(frame(kClient4, kVip4, chrome_binding_request()), kNewFlow);
  const uint64_t stale = mono_ns() - 10 * kSecond;
  h.set_last_seen(kClient4, kVip4, stale);
  const Bytes reply = rtp(160);
  h.step(from_endpoint(kEndpoint2, kClient4, kVip4, reply),
         {XDP_TX, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT, to_client(kClient4, kVip4, reply)});
  const auto f = h.flow(kClient4, kVip4);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->last_seen_ns, stale);
}

// ------------------------------------------------------------------ mutation reference

// Would the userspace relay create a flow for this frame? Mirrors the XDP parse for an
// untagged Ethernet/IPv4 frame, then runs the shared wire code.
bool reference_creates_flow(const Bytes& f, rtce_flow_key* key) {
  if (f.size() < 14 + 20 + 8 || get16(f, 12) != 0x0800) return false;
  const uint8_t* ip = f.data() + 14;
  if (ip[0] != 0x45 || ip[9] != 17 || (get16(f, 14 + 6) & 0x3fff)) return false;
  const size_t tot = get16(f, 14 + 2);
  if (tot < 28 || 14 + tot > f.size() || f.size() - 14 - tot > 64) return false;
  const size_t udp_len = get16(f, 14 + 20 + 4);
  if (udp_len != tot - 20) return false;
  Ep dst;
  dst.family = 4;
  std::memcpy(dst.addr.data(), ip + 16, 4);
  dst.port = get16(f, 14 + 20 + 2);
  if (dst.addr != kVip4.addr || dst.port != kVip4.port) return false;
  const uint8_t* payload = f.data() + 14 + 28;
  const uint32_t len = static_cast<uint32_t>(udp_len - 8);
  uint32_t uoff = 0, ulen = 0;
  if (len == 0 || rtce_stun_server_ufrag(payload, len, &uoff, &ulen) != RTCE_STUN_OK) return false;
  rtce_hint_keyset ks{};
  ks.keys[0] = test_key(1);
  rtce_hint hint{};
  if (rtce_hint_open(payload + uoff, ulen, &ks, &hint) != RTCE_HINT_OK) return false;
  if (hint.cluster_id != kCluster || (hint.endpoint_id != 2 && hint.endpoint_id != 3)) return false;
  Ep src;
  src.family = 4;
  std::memcpy(src.addr.data(), ip + 12, 4);
  src.port = get16(f, 14 + 20);
  *key = flow_key(src, dst);
  return true;
}

void mutation_table(Harness& h) {
  const Bytes base = frame(kClient4, kVip4, chrome_binding_request());
  size_t runs = 0, created = 0;
  for (const Mutation& mutation : byte_mutations(base)) {
    const char* name = mutation.name;
    const size_t off = mutation.offset;
    const int bit = mutation.bit;
    const Bytes& m = mutation.frame;
    rtce_flow_key want{};
    const bool valid = reference_creates_flow(m, &want);
    auto r = h.run(m);
    runs++;
    const size_t flows = h.flow_count();
    if (valid) {
      EXPECT_EQ(r.action, XDP_TX) << name << " at " << off << " bit " << bit;
      ASSERT_EQ(flows, 1u) << name << " at " << off << " bit " << bit;
      rtce_flow_key got{};
      ASSERT_EQ(bpf_map__get_next_key(h.skel()->maps.flows, nullptr, &got, sizeof(got)), 0);
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(got)), 0) << "flow key, " << name << " at " << off;
      // The update is incremental: a datagram that arrived with a bad checksum (a
      // mutated payload) leaves with a bad one, and a good one stays good.
      EXPECT_EQ(udp_checksum_ok(r.out), udp_checksum_ok(m)) << name << " at " << off << " bit " << bit;
      created++;
    } else {
      EXPECT_EQ(flows, 0u) << "flow from an invalid packet: " << name << " at " << off << " bit " << bit;
      EXPECT_NE(r.action, XDP_TX) << name << " at " << off << " bit " << bit;
      EXPECT_NE(r.action, XDP_ABORTED) << name << " at " << off << " bit " << bit;
    }
    h.clear_flows();
  }
  h.take_events();
  EXPECT_GT(runs, 1000u);
  EXPECT_GT(created, 0u) << "mutations of addresses/ports keep the hint valid";
  std::printf("mutation table: %zu runs, %zu created a flow\n", runs, created);
}

// ------------------------------------------------------------------ table

struct NamedCase {
  const char* name;
  Case run;
};

// gtest prints a parameter on failure; the name says it all.
void PrintTo(const NamedCase& c, std::ostream* os) { *os << c.name; }

const std::vector<NamedCase>& cases() {
  static const std::vector<NamedCase> all = {
      {"ValidHintIpv4ChromeCapture", valid_hint_ipv4},
      {"ValidHintIpv6", valid_hint_ipv6},
      {"FlowHitThenReturnIpv4", flow_hit_then_return_ipv4},
      {"FlowHitIpv6AndReturn", flow_hit_ipv6_and_return},
      {"V4ClientToV6Endpoint", v4_client_to_v6_endpoint},
      {"V6ClientToV4Endpoint", v6_client_to_v4_endpoint},
      {"VlanTaggedStun", vlan_tagged_stun},
      {"EthernetPaddingIsTrimmed", ethernet_padding_is_trimmed},
      {"UsernameNotFirst", username_not_first},
      {"HintRejections", hint_rejections},
      {"IngressForAPeerCluster", ingress_for_a_peer_cluster},
      {"OwnerForAPeerIngress", owner_for_a_peer_ingress},
      {"FlowMissPasses", flow_miss_passes},
      {"StunTooLongForTheWindow", stun_too_long_for_the_window},
      {"TruncationAtEveryOffset", truncation_at_every_offset},
      {"BadLengths", bad_lengths},
      {"ReturnPathRejections", return_path_rejections},
      {"ForeignTrafficPasses", foreign_traffic_passes},
      {"IpOptionsAndFragments", ip_options_and_fragments},
      {"ZeroUdpChecksum", zero_udp_checksum},
      {"NoRelayAddressForFamily", no_relay_address_for_family},
      {"NewFlowBudget", new_flow_budget},
      {"HintFlowLimit", hint_flow_limit},
      {"SourcePrefixFlowLimit", source_prefix_flow_limit},
      {"DefaultFlowLimits", default_flow_limits},
      {"RingBufferOverflowIsCounted", ring_buffer_overflow_is_counted},
      {"MutationTable", mutation_table},
      {"NewFlowRecordsLastSeen", new_flow_records_last_seen},
      {"FlowHitRefreshesStaleLastSeen", flow_hit_refreshes_stale_last_seen},
      {"FlowHitLeavesFreshLastSeen", flow_hit_leaves_fresh_last_seen},
      {"LastSeenGranularityFromConfig", last_seen_granularity_from_config},
      {"ReturnPathDoesNotTouchLastSeen", return_path_does_not_touch_last_seen},
  };
  return all;
}

void pin_to_cpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof(set), &set);  // per-CPU budget state: stay on one CPU
}

class XdpFixture : public ::testing::TestWithParam<NamedCase> {
 protected:
  void SetUp() override {
    pin_to_cpu0();
    const std::string skip = h_.load();
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  Harness h_;
};

TEST_P(XdpFixture, Case) { GetParam().run(h_); }

INSTANTIATE_TEST_SUITE_P(Xdp, XdpFixture, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& info) { return info.param.name; });

// Runs every case against a fresh program and checks that, together, they exercise every
// exit reason except the guards no packet can reach (documented in wire/rtce_xdp.h and the
// program) and the fib reasons (XdpFib below).
TEST(XdpCoverage, EveryExitReasonIsExercised) {
  pin_to_cpu0();
  reasons_seen().clear();
  for (const auto& c : cases()) {
    if (std::string(c.name) == "MutationTable") continue;  // slow, adds no reason
    SCOPED_TRACE(c.name);
    Harness h;
    const std::string skip = h.load();
    if (!skip.empty()) GTEST_SKIP() << skip;
    c.run(h);
  }
  const std::set<uint32_t> unreachable = {RTCE_XDP_FLOW_INSERT_FAILED, RTCE_XDP_ABORTED, RTCE_XDP_EVENT_LOST,
                                          RTCE_XDP_PASS_NO_NEIGH, RTCE_XDP_PASS_FIB_FAILED};
  for (uint32_t r = 0; r < RTCE_XDP_REASON_COUNT; r++)
    if (!unreachable.count(r))
      EXPECT_TRUE(reasons_seen().count(r)) << "no fixture exits with " << rtce_xdp_reason_names[r];
}

TEST(XdpNames, TableMatchesEnum) {
  for (uint32_t r = 0; r < RTCE_XDP_REASON_COUNT; r++) ASSERT_NE(rtce_xdp_reason_names[r], nullptr);
  EXPECT_STREQ(rtce_xdp_reason_names[RTCE_XDP_HINT_REJECTED], "hint_rejected");
  EXPECT_STREQ(rtce_xdp_reason_names[RTCE_XDP_RETURN_WRONG_SENDER], "return_wrong_sender");
  EXPECT_STREQ(rtce_xdp_reason_names[RTCE_XDP_EVENT_LOST], "event_lost");
  // The userspace relay's DropReason names of the same drops (metric labels).
  EXPECT_STREQ(rtce_xdp_reason_names[RTCE_XDP_HINT_FLOW_LIMIT], "hint_flow_limit");
  EXPECT_STREQ(rtce_xdp_reason_names[RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT], "source_prefix_flow_limit");
}

// ------------------------------------------------------------------ fib lookups

// bpf_fib_lookup against routes this test controls: a private network namespace with one
// veth pair (v0 198.18.2.1/24, 2001:2::2:1/112), forwarding on.
class XdpFib : public ::testing::Test {
 protected:
  void SetUp() override {
    pin_to_cpu0();
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "unshare(CLONE_NEWNET): " << std::strerror(errno);
    const std::string skip = h_.load();
    if (!skip.empty()) GTEST_SKIP() << skip;
    h_.configure(RTCE_XDP_F_HAVE_V4 | RTCE_XDP_F_HAVE_V6);  // real fib lookups
  }
  static bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }
  bool make_link() {
    return sh("ip link add v0 type veth peer name v1") && sh("ip link set v0 up") &&
           sh("ip link set v1 up") && sh("ip addr add 198.18.2.1/24 dev v0") &&
           sh("ip -6 addr add 2001:2::2:1/112 dev v0 nodad") &&
           sh("sysctl -qw net.ipv4.conf.all.forwarding=1") && sh("sysctl -qw net.ipv6.conf.all.forwarding=1");
  }
  Harness h_;
};

TEST_F(XdpFib, NoRouteAndNoNeighbourPassTheOriginalUp) {
  // No route at all (fresh namespace): the datagram goes up untouched, and no rewrite
  // happened even though the flow now exists.
  h_.step(frame(kClient4, kVip4, chrome_binding_request()), {XDP_PASS, RTCE_XDP_PASS_FIB_FAILED});
  ASSERT_TRUE(make_link()) << "could not set up a veth pair in the test namespace";
  h_.step(frame(kClient4, kVip4, rtp(40)), {XDP_PASS, RTCE_XDP_PASS_NO_NEIGH});
  h_.step(frame(kClient6, kVip6, binding(mint(kCluster, 3))), {XDP_PASS, RTCE_XDP_PASS_NO_NEIGH});
}

TEST_F(XdpFib, ResolvedNeighbourRedirectsOrTransmits) {
  ASSERT_TRUE(make_link()) << "could not set up a veth pair in the test namespace";
  ASSERT_TRUE(sh("ip neigh add 198.18.2.2 lladdr 02:00:00:00:00:22 dev v0 nud permanent"));
  const Bytes s = chrome_binding_request();
  // Ingress on lo, egress on v0: redirect, with v0's MAC as source and the neighbour's.
  Bytes out = h_.step(frame(kClient4, kVip4, s), {XDP_REDIRECT, RTCE_XDP_FORWARDED_NEW_FLOW});
  const unsigned v0 = if_nametoindex("v0");
  ASSERT_NE(v0, 0u);
  Bytes want = to_endpoint(kClient4, kVip4, kEndpoint2, s);
  const Mac neigh = {0x02, 0, 0, 0, 0, 0x22};
  std::copy(neigh.begin(), neigh.end(), want.begin());
  // v0's MAC (sysfs shows the mounter's namespace, so ask the kernel directly).
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "v0", IFNAMSIZ - 1);
  ASSERT_EQ(ioctl(fd, SIOCGIFHWADDR, &ifr), 0);
  close(fd);
  std::copy(ifr.ifr_hwaddr.sa_data, ifr.ifr_hwaddr.sa_data + 6, want.begin() + 6);
  EXPECT_EQ(out, want);
  // Ingress on v0 itself: XDP_TX.
  h_.step(frame(kClient4, kVip4, rtp(30)), {XDP_TX, RTCE_XDP_FORWARDED}, v0);
}

}  // namespace
