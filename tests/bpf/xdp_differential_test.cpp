// xdp_differential_test.cpp — the first-packet decision tree is written twice, in the XDP
// program (bpf/rtce_xdp.bpf.c, first_packet) and in the userspace relay
// (RelayCore::route_first_packet, loader/core/relay_core.cpp). This test feeds both the
// same frames and asserts the same decision for every one: forwarded by both to the same
// endpoint with the same flow key (and, when XDP transmits, the very bytes RelayCore
// frames), or dropped by RelayCore with the userspace twin of the XDP reason (and the same
// HintFailure for a rejected hint). A change to either side alone fails it.
//
// Inputs: the fixture frames of xdp_fixtures_test.cpp (one group per fixture case, state
// reset between groups), the mutation table over Chrome's real Binding request, and a few
// thousand frames from a seeded PRNG (RTCE_DIFF_SEED replays a seed). Frames whose XDP exit
// lies outside RelayCore's view (not ours, IP options, fragments, bad lengths, a STUN longer
// than the XDP window, ...) are excluded by the twin table and counted. Each test ends with
// coverage counts, so that it cannot silently stop reaching a branch.
//
// The program is loaded for real (root; skipped with the reason otherwise), with
// RTCE_XDP_F_SKIP_FIB so that forwarding is XDP_TX whatever the host's routes.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net_address.h"
#include "relay_core.h"
#include "rtce_flow_limit.h"
#include "rtce_hint.h"
#include "rtce_xdp.h"
#include "stun_payloads.h"
#include "xdp_harness.h"
#include "xdp_mutations.h"
#include "xdp_packets.h"

namespace {

using namespace rtce;
using namespace rtce::xdp_packets;

// ------------------------------------------------------------------ the twin table

// What the userspace relay does with a frame XDP exited with a given reason: forward it
// (XDP forwarded it, or passed it up for a reason that is only about XDP's rewrite), drop
// it with a DropReason, or nothing to compare (an exit before or beside the first-packet
// decision, outside RelayCore's view of a client datagram to a VIP).
enum class Twin : uint8_t { forward, drop, xdp_only };

struct XdpTwin {
  uint32_t reason;
  int action;  // the verdict the program returns with this reason (skip-fib mode)
  Twin twin;
  DropReason drop;  // when twin == drop
};

constexpr int kNoExit = -1;

// How RelayCore's view of a client datagram to a VIP relates to each XDP exit: this is
// the test's own knowledge, one word per reason. The verdict comes from the wire table
// (rtce_xdp_reason_verdicts) and the DropReason from the shared label (rtce_xdp.h: "labels
// match the userspace drop reason where they mean the same thing"), so neither is written
// here a second time.
constexpr std::array<Twin, RTCE_XDP_REASON_COUNT> kViews = [] {
  std::array<Twin, RTCE_XDP_REASON_COUNT> v{};
  v.fill(Twin::xdp_only);  // the return path, parsing before any decision, fib, budgets
  for (uint32_t r : {RTCE_XDP_FORWARDED, RTCE_XDP_FORWARDED_NEW_FLOW,
                     // Decided (the flow exists) but not rewritten: userspace sends it with a checksum.
                     RTCE_XDP_PASS_ZERO_CSUM})
    v[r] = Twin::forward;
  for (uint32_t r : {RTCE_XDP_NO_FLOW, RTCE_XDP_STUN_MALFORMED, RTCE_XDP_STUN_NOT_BINDING_REQUEST,
                     RTCE_XDP_STUN_NO_USERNAME, RTCE_XDP_HINT_REJECTED, RTCE_XDP_UNKNOWN_ENDPOINT,
                     RTCE_XDP_HINT_FLOW_LIMIT, RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT})
    v[r] = Twin::drop;
  // RTCE_XDP_FLOW_INSERT_FAILED stays XDP-only: the flows map is an LRU and never refuses.
  return v;
}();

int action_of(uint32_t reason) {
  switch (rtce_xdp_reason_verdicts[reason]) {
    case RTCE_XDP_VERDICT_FORWARD: return XDP_TX;  // skip-fib mode transmits on the ingress
    case RTCE_XDP_VERDICT_PASS: return XDP_PASS;
    case RTCE_XDP_VERDICT_DROP: return XDP_DROP;
    case RTCE_XDP_VERDICT_ABORTED: return XDP_ABORTED;
    case RTCE_XDP_VERDICT_SIDE_COUNTER: return kNoExit;
  }
  return kNoExit;
}

// The userspace drop reason with the same label, or DropReason::count.
DropReason drop_twin_of(uint32_t reason) {
  for (size_t d = 0; d < static_cast<size_t>(DropReason::count); d++)
    if (std::string_view(drop_reason_name(static_cast<DropReason>(d))) == rtce_xdp_reason_names[reason])
      return static_cast<DropReason>(d);
  return DropReason::count;
}

XdpTwin twin_of(uint32_t reason) {
  XdpTwin t{reason, action_of(reason), kViews[reason], DropReason::count};
  if (t.twin == Twin::drop) t.drop = drop_twin_of(reason);
  return t;
}

TEST(DifferentialTwins, EveryComparedDropHasAUserspaceTwinOfTheSameLabel) {
  for (uint32_t r = 0; r < RTCE_XDP_REASON_COUNT; r++)
    if (kViews[r] == Twin::drop)
      EXPECT_NE(twin_of(r).drop, DropReason::count) << rtce_xdp_reason_names[r] << " has no userspace twin";
}

// DropReasons RelayCore's first-packet path (no flow store attached) can return, and which
// this test must see XDP agree on. flow_table_full is one too, but the XDP flows map is an
// LRU that never refuses: it has no twin to agree with.
const std::vector<DropReason> kFirstPacketDrops = {
    DropReason::no_flow,
    DropReason::stun_malformed,
    DropReason::stun_not_binding_request,
    DropReason::stun_no_username,
    DropReason::hint_rejected,
    DropReason::unknown_endpoint,
    DropReason::hint_flow_limit,
    DropReason::source_prefix_flow_limit,
};

// ------------------------------------------------------------------ frames

struct ParsedFrame {
  Ep src, dst;
  Bytes payload;  // the UDP payload, as long as the UDP header says
};

// Reads an Ethernet (one optional 802.1Q tag) / IPv4 without options or IPv6 without
// extension headers / UDP frame. Only asked for frames XDP parsed as such.
std::optional<ParsedFrame> parse_udp_frame(const Bytes& f) {
  ParsedFrame p;
  size_t off = 12;
  if (f.size() < off + 2) return std::nullopt;
  uint16_t type = get16(f, off);
  if (type == 0x8100) {
    off += 4;
    if (f.size() < off + 2) return std::nullopt;
    type = get16(f, off);
  }
  off += 2;
  if (type == 0x0800) {
    if (f.size() < off + 20 || f[off] != 0x45 || f[off + 9] != 17) return std::nullopt;
    p.src.family = p.dst.family = 4;
    std::memcpy(p.src.addr.data(), f.data() + off + 12, 4);
    std::memcpy(p.dst.addr.data(), f.data() + off + 16, 4);
    off += 20;
  } else if (type == 0x86dd) {
    if (f.size() < off + 40 || f[off + 6] != 17) return std::nullopt;
    p.src.family = p.dst.family = 6;
    std::memcpy(p.src.addr.data(), f.data() + off + 8, 16);
    std::memcpy(p.dst.addr.data(), f.data() + off + 24, 16);
    off += 40;
  } else {
    return std::nullopt;
  }
  if (f.size() < off + 8) return std::nullopt;
  p.src.port = get16(f, off);
  p.dst.port = get16(f, off + 2);
  const size_t udp_len = get16(f, off + 4);
  if (udp_len < 8 || off + udp_len > f.size()) return std::nullopt;
  p.payload.assign(f.begin() + static_cast<long>(off + 8), f.begin() + static_cast<long>(off + udp_len));
  return p;
}

SocketAddress socket_address(const Ep& e) {
  return SocketAddress::from_bytes(e.family, e.addr.data(), e.port);
}

sockaddr_in6 mapped(const rtce_xdp_endpoint& e) {
  return SocketAddress::from_bytes(e.family, e.addr, ntohs(e.port_be)).to_v6_mapped();
}

std::string hex_key(const rtce_flow_key& k) {
  const auto* b = reinterpret_cast<const uint8_t*>(&k);
  std::string s;
  char buf[4];
  for (size_t i = 0; i < sizeof k; i++) {
    std::snprintf(buf, sizeof buf, "%02x", b[i]);
    s += buf;
  }
  return s;
}

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // bpf_ktime_get_ns()'s clock
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// ------------------------------------------------------------------ both data paths

// Flow limits as an operator configures them (the flows.* keys: 0 = no limit), written to
// each side the way the relay does: RelayCore takes them as they are, XdpDataPath::sync
// writes 0 as RTCE_FLOW_LIMIT_NONE. `defaults` leaves the XDP map all zero (a loader that
// has not synced yet: the program's defaults) and RelayCore at FlowLimits{} (its defaults).
struct Limits {
  uint32_t max_per_hint = 0;
  uint32_t max_per_source_prefix = 0;
  uint64_t window_ns = 3600ULL * 1000000000ULL;  // no window ends during a test
  uint8_t prefix4 = 24;
  uint8_t prefix6 = 56;
  bool defaults = false;
};

struct Tally {
  std::map<uint32_t, uint64_t> xdp_reasons;  // every input, by XDP exit reason
  std::map<uint32_t, uint64_t> xdp_only;     // inputs left out of the comparison
  std::map<DropReason, uint64_t> drops;      // compared inputs both dropped
  std::map<HintFailure, uint64_t> hint_failures;
  uint64_t inputs = 0, compared = 0, new_flows = 0, flow_hits = 0, mismatches = 0;
};

std::string hint_failure_list(const std::map<HintFailure, uint64_t>& m) {
  std::string s;
  for (const auto& [f, n] : m)
    s += std::string(s.empty() ? "" : ", ") + hint_failure_name(f) + " " + std::to_string(n);
  return s;
}

void print_tally(const char* what, const Tally& t) {
  std::printf("%s: %llu inputs, %llu compared (%llu new flows, %llu flow hits), %llu XDP-only\n", what,
              static_cast<unsigned long long>(t.inputs), static_cast<unsigned long long>(t.compared),
              static_cast<unsigned long long>(t.new_flows), static_cast<unsigned long long>(t.flow_hits),
              static_cast<unsigned long long>(t.inputs - t.compared));
  for (const auto& [r, n] : t.xdp_reasons) {
    const XdpTwin tw = twin_of(r);
    std::printf("  %-26s %6llu  -> %s\n", rtce_xdp_reason_names[r], static_cast<unsigned long long>(n),
                tw.twin == Twin::forward ? "forwarded"
                : tw.twin == Twin::drop  ? drop_reason_name(tw.drop)
                                         : "(XDP only, not compared)");
  }
  std::printf("  hint failures: %s\n", hint_failure_list(t.hint_failures).c_str());
}

class Differential {
 public:
  // Returns a skip reason, or "" when the program is loaded.
  std::string load() {
    const std::string skip = xdp_.load(kMaxFlows);
    if (!skip.empty()) return skip;
    auto routing = std::make_shared<RoutingTable>();
    routing->cluster_id = kCluster;
    routing->keys.keys[0] = test_key(1);  // as XdpProgram::configure
    routing->endpoints[2] = socket_address(kEndpoint2).to_v6_mapped();
    routing->endpoints[3] = socket_address(kEndpoint3).to_v6_mapped();
    routing_ = routing;
    last_counters_ = xdp_.counters();
    for (uint32_t s = 0; s < RTCE_XDP_HINT_FAILURE_SLOTS; s++) last_hint_failures_[s] = xdp_.hint_failures(s);
    reset({});
    return "";
  }

  // Both sides back to no flows and no flow-limit windows, with these limits.
  void reset(const Limits& l, uint32_t new_flow_budget = 1000000, uint64_t budget_window_ns = 0) {
    xdp_.configure(RTCE_XDP_F_SKIP_FIB | RTCE_XDP_F_HAVE_V4 | RTCE_XDP_F_HAVE_V6, new_flow_budget,
                   budget_window_ns);
    xdp_.clear_flows();
    clear_map(xdp_.skel()->maps.hint_flow_limits);
    clear_map(xdp_.skel()->maps.prefix_flow_limits);
    clear_map(xdp_.skel()->maps.flow_budget, /*array=*/true);
    FlowLimits fl;
    if (l.defaults) {
      xdp_.set_flow_limits(0, 0);
    } else {
      fl.max_per_hint = l.max_per_hint;
      fl.max_per_source_prefix = l.max_per_source_prefix;
      fl.window = static_cast<Nanos>(l.window_ns);
      fl.source_prefix_v4 = l.prefix4;
      fl.source_prefix_v6 = l.prefix6;
      xdp_.set_flow_limits(l.max_per_hint ? l.max_per_hint : RTCE_FLOW_LIMIT_NONE,
                           l.max_per_source_prefix ? l.max_per_source_prefix : RTCE_FLOW_LIMIT_NONE,
                           l.window_ns, l.prefix4, l.prefix6);
    }
    FlowTable::Options o;
    o.capacity = kMaxFlows;  // above any input set: flow_table_full has no XDP twin
    core_ = std::make_unique<RelayCore>(o, routing_, fl);
    clock_skew_ = 0;
    xdp_.take_events();
  }

  // Moves both sides `ns` into the future as far as flow-limit windows go: XDP's windows
  // start earlier (its clock cannot be set), RelayCore's clock runs ahead.
  void advance(uint64_t ns) {
    xdp_.age_flow_limit_windows(ns);
    clock_skew_ += ns;
  }

  // Forgets every flow on both sides (the mutation table runs each frame from scratch).
  void forget_flows() {
    if (xdp_.flow_count()) xdp_.clear_flows();
    if (core_->flows().size()) core_->flows().for_each([&](Flow& f) { core_->flows().erase(&f); });
  }

  // One frame through both; records and checks the decision. Returns the XDP reason.
  uint32_t feed(const std::string& name, const Bytes& frame, Tally& t) {
    t.inputs++;
    const XdpProgram::Run r = xdp_.run(frame);
    const std::vector<uint64_t> now_counters = xdp_.counters();
    std::optional<uint32_t> exit;
    uint32_t exit_dir = RTCE_XDP_DIR_TO_TRANSCEIVER;
    std::string counter_errors;
    for (uint32_t reason = 0; reason < RTCE_XDP_REASON_COUNT; reason++) {
      if (reason == RTCE_XDP_EVENT_LOST) continue;  // side counter, not an exit
      for (uint32_t dir = 0; dir < RTCE_XDP_DIR_COUNT; dir++) {
        const uint32_t i = rtce_xdp_counter_index(reason, dir);
        const uint64_t moved = now_counters[i] - last_counters_[i];
        if (moved == 0) continue;
        if (moved != 1 || exit)
          counter_errors += std::string(" ") + rtce_xdp_reason_names[reason] + "+" + std::to_string(moved);
        exit = reason;
        exit_dir = dir;
      }
    }
    last_counters_ = now_counters;
    const std::vector<rtce_xdp_flow_event> events = xdp_.take_events();
    if (!exit || !counter_errors.empty()) {
      ADD_FAILURE() << name << ": the program must count exactly one exit reason;" << counter_errors;
      return RTCE_XDP_REASON_COUNT;
    }
    const uint32_t reason = *exit;
    t.xdp_reasons[reason]++;
    const XdpTwin twin = twin_of(reason);
    EXPECT_EQ(r.action, twin.action) << name << ": verdict of " << rtce_xdp_reason_names[reason];
    std::optional<HintFailure> xdp_hint_failure;
    if (reason == RTCE_XDP_HINT_REJECTED) xdp_hint_failure = moved_hint_failure(name);

    if (twin.twin == Twin::xdp_only) {
      t.xdp_only[reason]++;
      // Nothing to compare, and nothing may have changed: a flow here would leave the two
      // sides' state apart for every later input.
      EXPECT_TRUE(events.empty()) << name << ": XDP-only exit " << rtce_xdp_reason_names[reason]
                                  << " created a flow";
      return reason;
    }
    t.compared++;
    EXPECT_EQ(exit_dir, static_cast<uint32_t>(RTCE_XDP_DIR_TO_TRANSCEIVER))
        << name << ": a client datagram counted on the return path";

    const std::optional<ParsedFrame> p = parse_udp_frame(frame);
    if (!p) {
      ADD_FAILURE() << name << ": XDP decided (" << rtce_xdp_reason_names[reason]
                    << ") on a frame this test cannot parse";
      return reason;
    }

    // The userspace relay, given what its VIP socket would receive.
    if (p->payload.size() > buffer_.size() - kFramingHeadroom) {
      ADD_FAILURE() << name << ": a " << p->payload.size() << "-byte datagram does not fit the test's buffer";
      return reason;
    }
    const RelayCounters& uc = core_->counters();
    std::array<uint64_t, static_cast<size_t>(DropReason::count)> drops_before{};
    for (size_t i = 0; i < drops_before.size(); i++) drops_before[i] = uc.dropped[i].get();
    std::array<uint64_t, static_cast<size_t>(HintFailure::count)> hf_before{};
    for (size_t i = 0; i < hf_before.size(); i++) hf_before[i] = uc.hint_failures[i].get();
    const uint64_t created_before = uc.flows_created.get();
    std::memcpy(buffer_.data() + kFramingHeadroom, p->payload.data(), p->payload.size());
    const auto out = core_->on_client_packet(socket_address(p->src), socket_address(p->dst), 0,
                                             buffer_.data() + kFramingHeadroom, p->payload.size(),
                                             static_cast<Nanos>(mono_ns() + clock_skew_));
    std::optional<DropReason> user_drop;
    std::string drop_errors;
    for (size_t i = 0; i < drops_before.size(); i++) {
      if (uc.dropped[i].get() == drops_before[i]) continue;
      if (user_drop) drop_errors += std::string(" ") + drop_reason_name(static_cast<DropReason>(i));
      user_drop = static_cast<DropReason>(i);
    }
    std::optional<HintFailure> user_hint_failure;
    for (size_t i = 0; i < hf_before.size(); i++)
      if (uc.hint_failures[i].get() != hf_before[i]) user_hint_failure = static_cast<HintFailure>(i);
    const bool user_created = uc.flows_created.get() != created_before;
    EXPECT_TRUE(drop_errors.empty()) << name << ": RelayCore counted more than one drop:" << drop_errors;

    // The two decisions, each in the same words.
    const rtce_flow_key key = flow_key(p->src, p->dst);
    const std::optional<rtce_xdp_flow> xdp_flow = xdp_.flow(p->src, p->dst);
    const Flow* user_flow = core_->flows().find(key);
    std::string xdp_says, user_says;
    if (twin.twin == Twin::forward) {
      xdp_says = "forward to endpoint " + (xdp_flow ? std::to_string(xdp_flow->endpoint_id) : "?") +
                 (events.empty() ? " (flow hit)" : " (new flow)");
    } else {
      xdp_says = std::string("drop ") + drop_reason_name(twin.drop);
      if (xdp_hint_failure) xdp_says += std::string("/") + hint_failure_name(*xdp_hint_failure);
      if (!events.empty()) xdp_says += " (but created a flow)";
    }
    if (out) {
      user_says = "forward to endpoint " + (user_flow ? std::to_string(user_flow->value.endpoint_id) : "?") +
                  (user_created ? " (new flow)" : " (flow hit)");
    } else {
      user_says = std::string("drop ") + (user_drop ? drop_reason_name(*user_drop) : "(uncounted)");
      if (user_hint_failure) user_says += std::string("/") + hint_failure_name(*user_hint_failure);
      if (user_created) user_says += " (but created a flow)";
    }
    bool same = xdp_says == user_says;
    if (same && out) same = check_same_flow(name, key, xdp_flow, user_flow, events, *out, r);
    if (!same) {
      t.mismatches++;
      if (t.mismatches <= kMaxReported)
        ADD_FAILURE() << name << ":\n  XDP      " << rtce_xdp_reason_names[reason] << " -> " << xdp_says
                      << "\n  RelayCore " << user_says
                      << (xdp_says == user_says ? "\n  (the same decision, but not the same flow: above)"
                                                : "");
      // Neither side keeps the flow, so that one disagreement is not reported again as
      // every later packet of that client.
      if (xdp_flow) bpf_map__delete_elem(xdp_.skel()->maps.flows, &key, sizeof key, 0);
      if (Flow* f = core_->flows().find(key)) core_->flows().erase(f);
      return reason;
    }
    if (out) {
      (user_created ? t.new_flows : t.flow_hits)++;
    } else {
      t.drops[*user_drop]++;
      if (user_hint_failure) t.hint_failures[*user_hint_failure]++;
    }
    return reason;
  }

 private:
  static constexpr uint32_t kMaxFlows = 65536;
  static constexpr uint64_t kMaxReported = 25;  // then only counted: a mutant fails thousands

  // The hint_failures slot that moved since the last rejected hint, as a HintFailure.
  std::optional<HintFailure> moved_hint_failure(const std::string& name) {
    std::optional<HintFailure> found;
    for (uint32_t s = 0; s < RTCE_XDP_HINT_FAILURE_SLOTS; s++) {
      const uint64_t v = xdp_.hint_failures(s);
      if (v == last_hint_failures_[s]) continue;
      last_hint_failures_[s] = v;
      // HintFailure is indexed by the XDP slot (both come from RTCE_HINT_FAILURES).
      if (s == 0)
        ADD_FAILURE() << name << ": hint_failures slot 0 (RTCE_HINT_OK) moved";
      else
        found = static_cast<HintFailure>(s);
    }
    if (!found) ADD_FAILURE() << name << ": hint_rejected without a hint_failures count";
    return found;
  }

  // Both forwarded: the same flow (key, endpoint id, endpoint address), and when XDP
  // transmitted, the bytes RelayCore framed, to the address RelayCore sends them to.
  bool check_same_flow(const std::string& name, const rtce_flow_key& key,
                       const std::optional<rtce_xdp_flow>& xf, const Flow* uf,
                       const std::vector<rtce_xdp_flow_event>& events, const ToTransceiver& out,
                       const XdpProgram::Run& r) {
    if (!xf || !uf) {
      ADD_FAILURE() << name << ": forwarded without a flow under key " << hex_key(key) << " (XDP "
                    << (xf ? "has" : "lacks") << " it, RelayCore " << (uf ? "has" : "lacks") << " it)";
      return false;
    }
    bool ok = true;
    if (!same_endpoint(mapped(xf->endpoint), uf->value.endpoint)) {
      ADD_FAILURE() << name << ": the flow's endpoint address differs: XDP "
                    << SocketAddress::from_bytes(xf->endpoint.family, xf->endpoint.addr,
                                                 ntohs(xf->endpoint.port_be))
                           .to_string()
                    << ", RelayCore "
                    << SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&uf->value.endpoint),
                                                    sizeof uf->value.endpoint)
                           .to_string();
      ok = false;
    }
    if (!same_endpoint(*out.endpoint, uf->value.endpoint)) {
      ADD_FAILURE() << name << ": RelayCore sent elsewhere than its flow says";
      ok = false;
    }
    if (!events.empty()) {
      if (events.size() != 1 || std::memcmp(&events[0].key, &key, sizeof key) != 0 ||
          events[0].endpoint_id != xf->endpoint_id) {
        ADD_FAILURE() << name << ": the flow event does not name the new flow (" << events.size()
                      << " events)";
        ok = false;
      }
    }
    if (r.action == XDP_TX) {
      const std::optional<ParsedFrame> sent = parse_udp_frame(r.out);
      const Bytes framed(out.data, out.data + out.len);
      if (!sent) {
        ADD_FAILURE() << name << ": XDP transmitted a frame this test cannot parse";
        ok = false;
      } else {
        if (!same_endpoint(socket_address(sent->dst).to_v6_mapped(), *out.endpoint)) {
          ADD_FAILURE() << name << ": XDP sent to " << socket_address(sent->dst).to_string()
                        << ", RelayCore to another address";
          ok = false;
        }
        if (sent->payload != framed) {
          ADD_FAILURE() << name << ": XDP's PROXY v2 + payload differs from RelayCore's ("
                        << sent->payload.size() << " vs " << framed.size() << " bytes)";
          ok = false;
        }
      }
    }
    return ok;
  }

  void clear_map(bpf_map* map, bool array = false) {
    const size_t key_size = bpf_map__key_size(map);
    if (array) {
      const int ncpu = libbpf_num_possible_cpus();
      // Per-CPU values: one per possible CPU, each rounded up to 8 bytes.
      std::vector<uint8_t> zero((bpf_map__value_size(map) + 7) / 8 * 8 * static_cast<size_t>(ncpu));
      for (uint32_t k = 0; k < bpf_map__max_entries(map); k++)
        EXPECT_EQ(bpf_map_update_elem(bpf_map__fd(map), &k, zero.data(), BPF_ANY), 0) << bpf_map__name(map);
      return;
    }
    std::vector<uint8_t> key(key_size);
    while (bpf_map__get_next_key(map, nullptr, key.data(), key_size) == 0)
      if (bpf_map__delete_elem(map, key.data(), key_size, 0) != 0) break;
  }

  XdpProgram xdp_;
  std::shared_ptr<const RoutingTable> routing_;
  std::unique_ptr<RelayCore> core_;
  std::vector<uint64_t> last_counters_;
  std::array<uint64_t, RTCE_XDP_HINT_FAILURE_SLOTS> last_hint_failures_{};
  uint64_t clock_skew_ = 0;
  alignas(8) std::array<uint8_t, kFramingHeadroom + 2048> buffer_{};
};

void pin_to_cpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof(set), &set);  // per-CPU budget and scratch: stay on one CPU
}

class XdpDifferential : public ::testing::Test {
 protected:
  void SetUp() override {
    pin_to_cpu0();
    const std::string skip = d_.load();
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  Differential d_;
  Tally t_;
};

// ------------------------------------------------------------------ (a) fixture frames

// One input of a group: a frame, or (advance_ns) a jump of both clocks.
struct Step {
  std::string name;
  Bytes frame;
  uint64_t advance_ns = 0;
};

struct Group {
  const char* name;  // the xdp_fixtures_test.cpp case these frames come from
  Limits limits;
  std::vector<Step> steps;
  uint32_t new_flow_budget = 1000000;
  uint64_t budget_window_ns = 0;
};

// The client -> VIP frames of each fixture case, in the case's order. Return-path frames
// (endpoint -> relay) are RelayCore::on_transceiver_packet's, not part of this tree; the
// fib cases need routes, and the last_seen cases repeat FlowHit's frames for timekeeping.
std::vector<Group> fixture_groups() {
  const Bytes chrome = chrome_binding_request();
  std::vector<Group> g;
  auto add = [&](const char* name, std::vector<Step> steps, Limits l = {}) {
    g.push_back({name, l, std::move(steps)});
  };
  add("ValidHintIpv4ChromeCapture", {{"chrome", frame(kClient4, kVip4, chrome)}});
  add("ValidHintIpv6", {{"binding v6", frame(kClient6, kVip6, binding(mint(kCluster, 3)), {.tos = 0xb8})}});
  add("FlowHitThenReturnIpv4",
      {{"chrome", frame(kClient4, kVip4, chrome)}, {"rtp", frame(kClient4, kVip4, rtp(200), {.tos = 0xb8})}});
  add("FlowHitIpv6AndReturn", {{"binding", frame(kClient6, kVip6, binding(mint(kCluster, 3)))},
                               {"rtp", frame(kClient6, kVip6, rtp(200))}});
  add("V4ClientToV6Endpoint", {{"binding", frame(kClient4, kVip4, binding(mint(kCluster, 3, 0xdeadbeef)))},
                               {"rtp", frame(kClient4, kVip4, rtp(201))}});
  add("V6ClientToV4Endpoint", {{"binding", frame(kClient6, kVip6, binding(mint(kCluster, 2, 77)))}});
  add("VlanTaggedStun", {{"chrome vlan", frame(kClient4, kVip4, chrome, {.vlan = true})}});
  {
    FrameOpts o;
    o.pad_to = 60;
    add("EthernetPaddingIsTrimmed",
        {{"chrome", frame(kClient4, kVip4, chrome)}, {"tiny padded", frame(kClient4, kVip4, rtp(4), o)}});
  }
  add("UsernameNotFirst", {{"username last", frame(kClient4, kVip4,
                                                   stun(0x0001, {{0xc057, std::string("\x00\x01\x00\x00", 4)},
                                                                 {0x802a, "abcdefgh"},
                                                                 {0x0024, "\x6e\x7e\x1e\xff"},
                                                                 {0x0006, mint(kCluster, 2) + ":xyz1"}}))}});
  {
    std::string bad_mac = mint(kCluster, 2);
    bad_mac[15] = bad_mac[15] == 'A' ? 'B' : 'A';
    std::vector<Step> s;
    for (const std::string& u : {bad_mac, mint(kCluster + 1, 2), mint(kCluster, 2, 5, 7), std::string("abcd"),
                                 std::string("EQEAAhmWo1ORAx-A"), std::string("IQEAAhmWo1ORAxOA")})
      s.push_back({"ufrag " + u, frame(kClient4, kVip4, binding(u))});
    add("HintRejections", std::move(s));
  }
  {
    Bytes bad_attr = stun(0x0001, {{0x0024, "abcd"}});
    bad_attr[23] = 200;
    add("FlowMissPasses",
        {{"unknown endpoint", frame(kClient4, kVip4, binding(mint(kCluster, 9)))},
         {"no username", frame(kClient4, kVip4, stun(0x0001, {{0x0024, "abcd"}, {0x802a, "12345678"}}))},
         {"not a request", frame(kClient4, kVip4, stun(0x0101, {{0x0006, mint(kCluster, 2) + ":a"}}))},
         {"bad attribute", frame(kClient4, kVip4, bad_attr)},
         {"no colon", frame(kClient4, kVip4, stun(0x0001, {{0x0006, "nocolon"}}))},
         {"rtp", frame(kClient4, kVip4, rtp(200))},
         {"dtls v6", frame(kClient6, kVip6, Bytes{0x16, 0xfe, 0xfd, 0, 0})},
         {"empty", frame(kClient4, kVip4, Bytes{})}});
  }
  {
    const std::string pad(RTCE_XDP_STUN_WINDOW - 20 - 4 - 4 - 24, 'p');
    add("StunTooLongForTheWindow",
        {{"too long",
          frame(kClient4, kVip4,
                stun(0x0001, {{0x8022, std::string(600, 's')}, {0x0006, mint(kCluster, 2) + ":a"}}))},
         {"at the window",
          frame(kClient4, kVip4, stun(0x0001, {{0x8022, pad}, {0x0006, mint(kCluster, 2) + ":abcdefg"}}))}});
  }
  {
    std::vector<Step> s;
    for (size_t len = 0; len < chrome.size(); len++)
      s.push_back({"datagram length " + std::to_string(len),
                   frame(kClient4, kVip4, Bytes(chrome.begin(), chrome.begin() + static_cast<long>(len)))});
    const Bytes f = frame(kClient4, kVip4, chrome);
    for (size_t len = 14; len < f.size(); len++)
      s.push_back(
          {"frame length " + std::to_string(len), Bytes(f.begin(), f.begin() + static_cast<long>(len))});
    add("TruncationAtEveryOffset", std::move(s));
  }
  {
    FrameOpts udp_short, ip_long, padded;
    udp_short.udp_len_delta = -4;
    ip_long.tot_len_delta = 8;
    padded.pad_to = 14 + 20 + 8 + chrome.size() + 65;
    add("BadLengths", {{"udp short", frame(kClient4, kVip4, chrome, udp_short)},
                       {"ip long v6", frame(kClient6, kVip6, chrome, ip_long)},
                       {"over-padded", frame(kClient4, kVip4, chrome, padded)}});
  }
  {
    Ep other_port = kVip4;
    other_port.port = 3479;
    FrameOpts tcp;
    tcp.proto = 6;
    Bytes qinq = frame(kClient4, kVip4, chrome, {.vlan = true});
    qinq.insert(qinq.begin() + 12, {0x88, 0xa8, 0x00, 0x05});
    Bytes double_q = frame(kClient4, kVip4, chrome, {.vlan = true});
    double_q.insert(double_q.begin() + 12, {0x81, 0x00, 0x00, 0x05});
    add("ForeignTrafficPasses", {{"other port", frame(kClient4, other_port, chrome)},
                                 {"other address", frame(kClient4, ep("198.18.0.11", 3478), chrome)},
                                 {"other address v6", frame(kClient6, ep("2001:2::11", 3478), chrome)},
                                 {"tcp", frame(kClient4, kVip4, chrome, tcp)},
                                 {"tcp v6", frame(kClient6, kVip6, chrome, tcp)},
                                 {"qinq", qinq},
                                 {"double 802.1Q", double_q},
                                 {"runt", Bytes(14, 0xee)}});
  }
  {
    FrameOpts opt, first, later, hbh, frag6;
    opt.ip_options = {0x94, 0x04, 0x00, 0x00};
    first.frag = 0x2000;
    later.frag = 0x0010;
    hbh.v6_first_next = 0;
    hbh.v6_ext = {17, 0, 1, 4, 0, 0, 0, 0};
    frag6.v6_first_next = 44;
    frag6.v6_ext = {17, 0, 0x00, 0x01, 0, 0, 0, 42};
    FrameOpts frag6_later = frag6;
    frag6_later.v6_ext[2] = 0x01;
    Ep other = kVip4;
    other.port = 1;
    add("IpOptionsAndFragments", {{"ip options", frame(kClient4, kVip4, chrome, opt)},
                                  {"ip options elsewhere", frame(kClient4, other, chrome, opt)},
                                  {"first fragment", frame(kClient4, kVip4, chrome, first)},
                                  {"later fragment", frame(kClient4, kVip4, chrome, later)},
                                  {"hop-by-hop", frame(kClient6, kVip6, chrome, hbh)},
                                  {"first fragment v6", frame(kClient6, kVip6, chrome, frag6)},
                                  {"later fragment v6", frame(kClient6, kVip6, chrome, frag6_later)}});
  }
  {
    FrameOpts z;
    z.zero_csum = true;
    Ep client = kClient4;
    client.port = 50001;
    add("ZeroUdpChecksum", {{"chrome no checksum", frame(kClient4, kVip4, chrome, z)},
                            {"to a v6 endpoint", frame(client, kVip4, binding(mint(kCluster, 3)), z)},
                            {"v6 client", frame(kClient6, kVip6, binding(mint(kCluster, 2)))}});
  }
  {
    Ep second = kClient4;
    second.port = 50003;
    Group budget{"NewFlowBudget",
                 {},
                 {{"first", frame(kClient4, kVip4, chrome)},
                  {"over budget", frame(second, kVip4, chrome)},
                  {"flow hit", frame(kClient4, kVip4, rtp(40))}},
                 1,
                 60ULL * 1000000000ULL};
    g.push_back(std::move(budget));
  }
  {
    constexpr uint32_t kMax = 4, kReplays = 40;
    const Bytes replayed = binding(mint(kCluster, 2, 0x5eed0001));
    std::vector<Step> s;
    for (uint32_t i = 0; i < kReplays; i++)
      s.push_back({"replay " + std::to_string(i), frame(spoofed4(i), kVip4, replayed)});
    s.push_back({"another hint", frame(kClient4, kVip4, binding(mint(kCluster, 2, 0x5eed0002)))});
    s.push_back({"another hint v6", frame(kClient6, kVip6, binding(mint(kCluster, 3, 0x5eed0003)))});
    s.push_back({"replayed hint's flow", frame(spoofed4(0), kVip4, rtp(40))});
    s.push_back({"other flow", frame(kClient4, kVip4, rtp(40))});
    s.push_back({"consent check", frame(spoofed4(1), kVip4, replayed)});
    s.push_back({"11 s later", {}, 11ULL * 1000000000ULL});
    s.push_back({"replay a window later", frame(spoofed4(kReplays), kVip4, replayed)});
    Limits l;
    l.max_per_hint = kMax;
    l.window_ns = 10ULL * 1000000000ULL;
    add("HintFlowLimit", std::move(s), l);
  }
  {
    std::vector<Step> s;
    for (uint32_t i = 0; i < 8; i++) {
      Ep c = kClient4;
      c.addr[3] = static_cast<uint8_t>(10 + i);
      s.push_back(
          {"same /24 #" + std::to_string(i), frame(c, kVip4, binding(mint(kCluster, 2, 0x7000 + i)))});
    }
    Ep other = kClient4;
    other.addr[2] ^= 1;
    s.push_back({"next /24", frame(other, kVip4, binding(mint(kCluster, 2, 0x7100)))});
    for (uint32_t i = 0; i < 5; i++) {
      Ep c = kClient6;
      c.addr[7] = static_cast<uint8_t>(i);
      c.addr[15] = static_cast<uint8_t>(i);
      s.push_back(
          {"same /56 #" + std::to_string(i), frame(c, kVip6, binding(mint(kCluster, 3, 0x7200 + i)))});
    }
    Ep other6 = kClient6;
    other6.addr[6] ^= 1;
    s.push_back({"next /56", frame(other6, kVip6, binding(mint(kCluster, 3, 0x7300)))});
    Limits l;
    l.max_per_source_prefix = 3;
    l.window_ns = 10ULL * 1000000000ULL;
    add("SourcePrefixFlowLimit", std::move(s), l);
  }
  {
    std::vector<Step> s;
    const Bytes replayed = binding(mint(kCluster, 2, 0x5eed0009));
    for (uint32_t i = 0; i < RTCE_FLOW_LIMIT_DEFAULT_PER_HINT + 4; i++)
      s.push_back({"replay " + std::to_string(i), frame(spoofed4(i), kVip4, replayed)});
    Limits l;
    l.defaults = true;  // the program's defaults against RelayCore's
    add("DefaultFlowLimits", std::move(s), l);
  }
  {
    std::vector<Step> s;
    const int n = RTCE_XDP_EVENTS_BYTES / static_cast<int>(sizeof(rtce_xdp_flow_event) + 8) + 10;
    for (int i = 0; i < n; i++) {
      Ep c = kClient4;
      c.addr[2] = static_cast<uint8_t>(i >> 8);
      c.addr[3] = static_cast<uint8_t>(i);
      s.push_back({"client " + std::to_string(i), frame(c, kVip4, chrome)});
    }
    add("RingBufferOverflowIsCounted", std::move(s));
  }
  return g;
}

TEST_F(XdpDifferential, FixtureFrames) {
  for (const Group& group : fixture_groups()) {
    d_.reset(group.limits, group.new_flow_budget, group.budget_window_ns);
    for (const Step& s : group.steps) {
      if (s.advance_ns) {
        d_.advance(s.advance_ns);
        continue;
      }
      d_.feed(std::string(group.name) + " / " + s.name, s.frame, t_);
    }
  }
  print_tally("fixture frames", t_);
  EXPECT_EQ(t_.mismatches, 0u) << "fixture frames on which XDP and RelayCore disagree";
  // Every decision the fixtures reach, reached here too.
  for (uint32_t r : {RTCE_XDP_FORWARDED, RTCE_XDP_FORWARDED_NEW_FLOW, RTCE_XDP_NO_FLOW,
                     RTCE_XDP_STUN_MALFORMED, RTCE_XDP_STUN_NOT_BINDING_REQUEST, RTCE_XDP_STUN_NO_USERNAME,
                     RTCE_XDP_HINT_REJECTED, RTCE_XDP_UNKNOWN_ENDPOINT, RTCE_XDP_HINT_FLOW_LIMIT,
                     RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT, RTCE_XDP_PASS_ZERO_CSUM, RTCE_XDP_NEW_FLOW_BUDGET,
                     RTCE_XDP_PASS_STUN_TOO_LONG, RTCE_XDP_PASS_NOT_OURS, RTCE_XDP_PASS_IP_OPTIONS,
                     RTCE_XDP_PASS_IPV6_EXT, RTCE_XDP_PASS_FRAGMENT, RTCE_XDP_PASS_BAD_LENGTH})
    EXPECT_GE(t_.xdp_reasons[r], 1u) << "no fixture frame exits with " << rtce_xdp_reason_names[r];
  for (DropReason d : kFirstPacketDrops)
    EXPECT_GE(t_.drops[d], 1u) << "no agreed drop " << drop_reason_name(d);
  for (HintFailure f : kHintFailures)
    EXPECT_GE(t_.hint_failures[f], 1u) << "no agreed hint failure " << hint_failure_name(f);
}

// ------------------------------------------------------------------ (b) mutation table

TEST_F(XdpDifferential, MutationTableOverChromeCapture) {
  const Bytes base = frame(kClient4, kVip4, chrome_binding_request());
  const std::vector<Mutation> mutations = byte_mutations(base);
  for (const Mutation& m : mutations) {
    d_.feed(std::string(m.name) + " at " + std::to_string(m.offset) + " bit " + std::to_string(m.bit),
            m.frame, t_);
    d_.forget_flows();
  }
  print_tally("mutation table", t_);
  EXPECT_EQ(t_.mismatches, 0u) << "mutations on which XDP and RelayCore disagree";
  EXPECT_EQ(t_.inputs, mutations.size());
  EXPECT_GT(t_.compared, 1000u) << "most mutations reach the first-packet decision";
  EXPECT_GT(t_.new_flows, 0u) << "mutations of addresses and ports keep the hint valid";
  EXPECT_GT(t_.drops[DropReason::hint_rejected], 0u) << "mutations of the ufrag break the hint";
  EXPECT_GT(t_.drops[DropReason::stun_malformed], 0u);
  EXPECT_GT(t_.drops[DropReason::no_flow], 0u) << "mutations of the first byte or cookie are not STUN";
  EXPECT_GT(t_.xdp_only[RTCE_XDP_PASS_NOT_OURS], 0u);
}

// ------------------------------------------------------------------ (c) generated frames

// splitmix64: the same sequence from a seed on every platform (std distributions differ).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
  bool chance(uint32_t percent) { return below(100) < percent; }
  uint8_t byte() { return static_cast<uint8_t>(next()); }
  Bytes bytes(size_t n) {
    Bytes b(n);
    for (auto& x : b) x = byte();
    return b;
  }

 private:
  uint64_t s_;
};

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  // A frame to a VIP (now and then to another port) and what it is meant to be.
  std::pair<std::string, Bytes> next() {
    const bool v6 = rng_.chance(30);
    const uint32_t category = rng_.below(kCategories);
    std::string what;
    Ep client;
    Bytes payload;
    if (category == kRepeated && !clients_[v6].empty()) {
      // A client seen before: a flow hit when that one made a flow, else decided again.
      client = clients_[v6][rng_.below(static_cast<uint32_t>(clients_[v6].size()))];
      what = "repeated client";
      switch (rng_.below(3)) {
        case 0: payload = rtp(12 + rng_.below(300)); break;
        case 1: payload = binding_with(valid_hint()); break;
        default: payload = rng_.bytes(rng_.below(200)); break;
      }
    } else {
      const uint32_t c = category == kCrowded + 1 ? kCrowded : category;
      client = c == kCrowded || c == kCrowdedReplay ? crowded_client(v6) : fresh_client(v6);
      payload = this->payload(c, what);
    }
    if (clients_[v6].size() < 4096) clients_[v6].push_back(client);
    FrameOpts o;
    if (rng_.chance(10)) {
      o.vlan = true;
      what += ", 802.1Q";
    }
    if (!v6 && rng_.chance(5)) {
      o.zero_csum = true;
      what += ", no UDP checksum";
    }
    if (payload.size() < 20 && rng_.chance(30)) o.pad_to = 60;
    if (rng_.chance(20)) o.tos = 0xb8;
    Ep dst = v6 ? kVip6 : kVip4;
    if (rng_.chance(2)) {
      dst.port = static_cast<uint16_t>(1 + rng_.below(65535));
      what += ", to port " + std::to_string(dst.port);
    }
    return {what + (v6 ? ", IPv6" : ""), frame(client, dst, payload, o)};
  }

 private:
  static constexpr uint32_t kCategories = 23;
  static constexpr uint32_t kCrowded = 18;  // and 19
  static constexpr uint32_t kCrowdedReplay = 20;
  static constexpr uint32_t kRepeated = 22;

  // Anywhere in 198.18.0.0/15 or 2001:2::/48 (/24s and /56s: a few hundred prefixes).
  Ep fresh_client(bool v6) {
    Ep c = v6 ? kClient6 : kClient4;
    if (v6) {
      for (size_t i = 6; i < 16; i++) c.addr[i] = rng_.byte();
    } else {
      c.addr[1] = static_cast<uint8_t>(18 + rng_.below(2));
      c.addr[2] = rng_.byte();
      c.addr[3] = rng_.byte();
    }
    c.port = static_cast<uint16_t>(1024 + rng_.below(64000));
    return c;
  }

  // Many sessions from one prefix (a carrier NAT, or a spoofer): one /24 or /56 for 40
  // inputs, then the next.
  Ep crowded_client(bool v6) {
    Ep c = fresh_client(v6);
    const uint8_t prefix = static_cast<uint8_t>(0x40 + crowded_uses_++ / 40);
    if (v6) {
      c.addr[6] = prefix;
    } else {
      c.addr[1] = 19;
      c.addr[2] = prefix;
    }
    return c;
  }

  std::string random_chars(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; i++) s += kB64[rng_.below(64)];
    return s;
  }
  std::string client_ufrag() { return random_chars(1 + rng_.below(8)); }
  uint16_t known_endpoint() { return rng_.chance(50) ? 2 : 3; }
  std::string valid_hint() { return mint(kCluster, known_endpoint(), static_cast<uint32_t>(rng_.next())); }

  // A Binding request with this server ufrag; now and then attributes before USERNAME.
  Bytes binding_with(const std::string& ufrag) {
    std::vector<Attr> attrs;
    const uint32_t before = rng_.chance(30) ? rng_.below(4) : 0;
    for (uint32_t i = 0; i < before; i++)
      attrs.push_back({static_cast<uint16_t>(0x8000 | rng_.below(0x7fff)),
                       std::string(rng_.below(12), static_cast<char>('a' + rng_.below(26)))});
    attrs.push_back({0x0006, ufrag + ":" + client_ufrag()});
    attrs.push_back({0x0024, "\x6e\x7e\x1e\xff"});
    attrs.push_back({0x802a, "12345678"});
    return stun(0x0001, attrs);
  }

  Bytes payload(uint32_t category, std::string& what) {
    switch (category) {
      case 0:
      case 1:
      case 2: what = "valid hint"; return binding_with(valid_hint());
      case 3: {
        what = "forged MAC";
        std::string u = valid_hint();
        const size_t at = rng_.below(RTCE_HINT_CHARS);
        char c;
        do c = kB64[rng_.below(64)];
        while (c == u[at]);
        u[at] = c;
        return binding_with(u);
      }
      case 4:
        what = "wrong cluster";
        return binding_with(mint(static_cast<uint8_t>(kCluster + 1 + rng_.below(254)), known_endpoint(),
                                 static_cast<uint32_t>(rng_.next())));
      case 5:
        what = "unknown key id";
        return binding_with(mint(kCluster, known_endpoint(), static_cast<uint32_t>(rng_.next()),
                                 static_cast<uint8_t>(2 + rng_.below(200))));
      case 6: {
        what = "unknown endpoint";
        uint16_t e;
        do e = static_cast<uint16_t>(rng_.next());
        while (e == 2 || e == 3);
        return binding_with(mint(kCluster, e, static_cast<uint32_t>(rng_.next())));
      }
      case 7: {
        what = "truncated STUN";
        const Bytes b = binding_with(valid_hint());
        return Bytes(b.begin(), b.begin() + rng_.below(static_cast<uint32_t>(b.size())));
      }
      case 8: {
        what = "not a Binding request";
        uint16_t type;
        do type = static_cast<uint16_t>(rng_.next() & 0x3fff);
        while (type == 0x0001);
        return stun(type, {{0x0006, valid_hint() + ":" + client_ufrag()}});
      }
      case 9: {
        what = "no USERNAME";
        std::vector<Attr> attrs;
        for (uint32_t i = rng_.below(4); i > 0; i--)
          attrs.push_back(
              {static_cast<uint16_t>(0x8000 | rng_.below(0x7fff)), std::string(rng_.below(9), 'x')});
        return stun(0x0001, attrs);
      }
      case 10: what = "random bytes"; return rng_.bytes(rng_.below(700));
      case 11: {
        const bool dtls = rng_.chance(50);
        what = dtls ? "DTLS-looking" : "RTP-looking";  // RFC 7983 first-byte ranges
        Bytes b = rng_.bytes(13 + rng_.below(300));
        b[0] = dtls ? static_cast<uint8_t>(20 + rng_.below(44)) : static_cast<uint8_t>(128 + rng_.below(64));
        return b;
      }
      case 12:
        what = "oversize";
        if (rng_.chance(50)) return rtp(RTCE_XDP_STUN_WINDOW + 1 + rng_.below(900));
        return stun(0x0001, {{0x8022, std::string(RTCE_XDP_STUN_WINDOW + rng_.below(700), 's')},
                             {0x0006, valid_hint() + ":" + client_ufrag()}});
      case 13: what = "short ufrag"; return binding_with(random_chars(1 + rng_.below(RTCE_HINT_CHARS - 1)));
      case 14: {
        what = "ufrag garbage";
        static const char kNotB64[] = "+/=!.~*";
        std::string u = valid_hint();
        if (rng_.chance(50))
          u[rng_.below(RTCE_HINT_CHARS)] = kNotB64[rng_.below(7)];
        else
          u[0] = kB64[rng_.below(64)];  // the version is in the first character's bits
        if (rng_.chance(20)) u += random_chars(1 + rng_.below(20));
        return binding_with(u);
      }
      case 15: {
        what = "STUN-looking garbage";
        Bytes b = rng_.bytes(20 + 4 * rng_.below(40));
        b[0] &= 0x03;
        b[4] = 0x21;
        b[5] = 0x12;
        b[6] = 0xa4;
        b[7] = 0x42;
        const size_t len = rng_.chance(70) ? b.size() - 20 : rng_.below(400);
        b[2] = static_cast<uint8_t>(len >> 8);
        b[3] = static_cast<uint8_t>(len);
        return b;
      }
      case 16: {
        what = "corrupted Binding request";
        Bytes b = binding_with(valid_hint());
        for (uint32_t i = 1 + rng_.below(3); i > 0; i--)
          b[rng_.below(static_cast<uint32_t>(b.size()))] = rng_.byte();
        return b;
      }
      case 17:
        // One hint replayed from sources all over: flows.max_per_hint.
        what = "replayed hint";
        if (replay_uses_++ % 12 == 0) replay_hint_ = valid_hint();
        return binding_with(replay_hint_);
      case kCrowded:
        // Sessions from an exhausted prefix: a valid hint is refused by the bound, and
        // anything else must still fail for its own reason, checked before the bound.
        if (rng_.chance(50)) {
          // Half of these fail after the hint is opened (bad hint, unknown endpoint).
          const Bytes b = payload(rng_.chance(50) ? 3 + rng_.below(4) : rng_.below(17), what);
          what += ", crowded prefix";
          return b;
        }
        what = "crowded prefix";
        return binding_with(valid_hint());
      case kCrowdedReplay:
        // Both bounds at once: which one counts is the order of the checks.
        what = "replayed hint, crowded prefix";
        if (replay_uses_++ % 12 == 0) replay_hint_ = valid_hint();
        return binding_with(replay_hint_);
      default: what = "chrome capture"; return chrome_;  // its hint's nonce is fixed: a replay too
    }
  }

  Rng rng_;
  std::array<std::vector<Ep>, 2> clients_;
  std::string replay_hint_;
  uint32_t replay_uses_ = 0;
  uint32_t crowded_uses_ = 0;
  const Bytes chrome_ = chrome_binding_request();
};

uint64_t generator_seed() {
  const char* env = std::getenv("RTCE_DIFF_SEED");
  if (!env || !*env) return 20261201;  // fixed by default: CI runs are repeatable
  if (std::string(env) == "random") return mono_ns() ^ (static_cast<uint64_t>(getpid()) << 32);
  return std::strtoull(env, nullptr, 0);
}

TEST_F(XdpDifferential, GeneratedFrames) {
  constexpr int kFrames = 4000;
  const uint64_t seed = generator_seed();
  std::printf(
      "generated frames: seed %llu (RTCE_DIFF_SEED=%llu replays it; RTCE_DIFF_SEED=random picks one)\n",
      static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  RecordProperty("seed", std::to_string(seed));
  Limits l;
  l.max_per_hint = 4;
  l.max_per_source_prefix = 6;
  d_.reset(l);
  Generator g(seed);
  for (int i = 0; i < kFrames; i++) {
    auto [what, f] = g.next();
    d_.feed("seed " + std::to_string(seed) + " #" + std::to_string(i) + " (" + what + ")", f, t_);
  }
  print_tally("generated frames", t_);
  EXPECT_EQ(t_.mismatches, 0u) << "generated frames on which XDP and RelayCore disagree (seed " << seed
                               << ")";
  // Coverage: every branch of the first-packet tree, several times, whatever the seed.
  constexpr uint64_t kAtLeast = 5;
  EXPECT_GE(t_.new_flows, kAtLeast);
  EXPECT_GE(t_.flow_hits, kAtLeast);
  for (DropReason d : kFirstPacketDrops) EXPECT_GE(t_.drops[d], kAtLeast) << drop_reason_name(d);
  for (HintFailure f : kHintFailures) EXPECT_GE(t_.hint_failures[f], kAtLeast) << hint_failure_name(f);
  for (uint32_t r : {RTCE_XDP_PASS_ZERO_CSUM, RTCE_XDP_PASS_STUN_TOO_LONG, RTCE_XDP_PASS_NOT_OURS})
    EXPECT_GE(t_.xdp_reasons[r], kAtLeast) << rtce_xdp_reason_names[r];
}

}  // namespace
