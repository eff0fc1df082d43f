// xdp_prog_cost.cpp — per-packet cost of the XDP program (bpf/rtce_xdp.bpf.c) under
// BPF_PROG_TEST_RUN, as a ratio to the minimal reflector bpf/baseline_xdp.bpf.c measured in
// the same run. See docs/benchmarks.md, "XDP program cost".
//
// Cases (IPv4, RTCE_XDP_F_SKIP_FIB so that the result does not depend on the host's routes):
//   baseline    baseline_xdp, 200-byte UDP payload: parse, swap MACs/addresses/ports, XDP_TX
//   flow hit    rtce_xdp, 200-byte RTP payload to the VIP, flow already in `flows`:
//               PROXY v2 prepended, sent to the endpoint (reason forwarded)
//   first STUN  rtce_xdp, Chrome-shaped Binding request whose USERNAME carries a valid hint,
//               no flow yet: STUN walk, hint check, flow insert, ring buffer event, then the
//               same rewrite as a hit (reason forwarded_new_flow). The flow is deleted
//               before each call (outside the timed part). Two variants:
//                 drained: the ring buffer is read after every call, as the loader's
//                   ring_buffer__poll keeps it when flows are sparse; every submit then
//                   wakes the reader (irq_work: a self-IPI, a VM exit on a KVM guest);
//                 backlog: read every 256 calls (a burst of new flows): 1 submit in 256
//                   wakes, the rest do not.
//   return      rtce_xdp, PROXY v2 + 200-byte payload from the endpoint to the return port,
//               flow present: header stripped, sent from the VIP to the client (forwarded)
//
// Why every case runs as repeat=1 calls. With repeat=N the kernel runs the program N times
// on the same xdp_buff without restoring it (net/bpf/test_run.c, bpf_test_run): repetition
// 2 of a flow hit sees the frame repetition 1 wrote (now addressed to the endpoint) and takes
// the "not ours" exit. The program checks this at start-up (--no-check skips it) and shows
// it: a flow hit with repeat=2 returns XDP_PASS. The baseline only swaps fields, so it
// survives repetition. Hence:
//   - each case is K calls with repeat=1; each call's `duration` (kernel ktime around the
//     run loop, syscall excluded) is one sample; per batch the interquartile mean is taken;
//   - the baseline is measured the same way, right before each case, so ratio(raw) =
//     case / baseline compares like with like;
//   - repeat=1 durations contain a fixed harness cost (one clock read, bh disable/enable,
//     cold-ish caches after the syscall) that repeat=N amortises. A 2-instruction program
//     (r0 = XDP_TX; exit) measures it: F = nop(repeat=1) - nop(repeat=N). ratio(floor
//     removed) = (case - F) / (baseline - F) is the ratio a repeat=N run would give if the
//     kernel restored the frame; baseline - F is printed next to baseline(repeat=N) as the
//     check of that correction.
// Every call's verdict and output length are checked, and after every batch the `counters`
// map must show exactly K packets under the expected reason and nothing else: a wrong path
// aborts the benchmark.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "baseline_xdp.skel.h"
#include "hint_keys.h"
#include "rtce_hint.h"
#include "rtce_xdp.h"
#include "rtce_xdp.skel.h"
#include "xdp_packets.h"

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "xdp_prog_cost: %s\n", msg.c_str());
  std::exit(1);
}

// ------------------------------------------------------------------ frames
// The fixtures' frame builder (tests/bpf/xdp_packets.h): checksums computed there.
using namespace rtce::xdp_packets;

const Ep& kRelay = kRelay4;
const Ep& kVip = kVip4;
const Ep& kClient = kClient4;
const Ep& kEndpoint = kEndpoint2;
constexpr uint16_t kEndpointId = 2;

Bytes rtp(size_t n) {
  Bytes b(n);
  b[0] = 0x80;
  b[1] = 0x6f;
  for (size_t i = 2; i < n; i++) b[i] = static_cast<uint8_t>(i * 7 + 3);
  return b;
}

uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return ~c;
}

// A Binding request shaped like Chrome's (tests/golden/chrome_binding_request.hex): USERNAME
// first, then GOOG-NETWORK-INFO, ICE-CONTROLLING, PRIORITY, MESSAGE-INTEGRITY (filler: the
// relay has no ICE password and does not check it) and a correct FINGERPRINT. 108 bytes.
Bytes chrome_like_binding(const std::string& server_ufrag) {
  Bytes s = {0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42};
  for (int i = 0; i < 12; i++) s.push_back(static_cast<uint8_t>('A' + i));
  auto attr = [&s](uint16_t type, const Bytes& v) {
    put16(s, type);
    put16(s, static_cast<uint16_t>(v.size()));
    put(s, v);
    while (s.size() % 4) s.push_back(0);
  };
  const std::string user = server_ufrag + ":02Jx";
  attr(0x0006, Bytes(user.begin(), user.end()));
  attr(0xc057, {0x00, 0x01, 0x00, 0x00});
  attr(0x802a, {0xcc, 0x0f, 0x23, 0x2a, 0x9b, 0x64, 0x49, 0xf2});
  attr(0x0024, {0x6e, 0x7e, 0x1e, 0xff});
  attr(0x0008, Bytes(20, 0x5a));
  const size_t fp_at = s.size();
  const size_t len = fp_at + 8 - 20;  // message length including FINGERPRINT
  s[2] = static_cast<uint8_t>(len >> 8);
  s[3] = static_cast<uint8_t>(len);
  put16(s, 0x8028);
  put16(s, 4);
  put32(s, crc32(s.data(), fp_at) ^ 0x5354554eu);
  return s;
}

rtce_flow_key flow_key(const Ep& client, const Ep& vip) {
  rtce_flow_key k{};
  std::memcpy(k.client_addr, client.addr.data(), 16);
  std::memcpy(k.vip_addr, vip.addr.data(), 16);
  k.client_port_be = htons(client.port);
  k.vip_port_be = htons(vip.port);
  k.family = 4;
  return k;
}

rtce_xdp_endpoint endpoint_value(const Ep& e) {
  rtce_xdp_endpoint v{};
  std::memcpy(v.addr, e.addr.data(), 16);
  v.port_be = htons(e.port);
  v.family = 4;
  return v;
}

// ------------------------------------------------------------------ statistics

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Mean of the middle half: sub-nanosecond resolution from integer samples, robust to the
// interrupts and hypervisor exits that land in a few calls.
double interquartile_mean(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  const size_t lo = v.size() / 4, hi = v.size() - v.size() / 4;
  double s = 0;
  for (size_t i = lo; i < hi; i++) s += v[i];
  return s / static_cast<double>(hi - lo);
}

// ------------------------------------------------------------------ the runner

struct Options {
  int rounds = 7;
  int calls = 20000;     // repeat=1 calls per batch
  int repeat = 1000000;  // repeat of the repeat=N batches
  int cpu = -1;          // -1: the last online CPU
  bool check = true;
  std::string profile;  // run one case only, for perf record
};

struct Expected {
  uint32_t action;
  size_t out_len;
  int reason = -1;  // rtce_xdp counter reason, -1: not rtce_xdp
  uint32_t dir = RTCE_XDP_DIR_TO_TRANSCEIVER;
};

class Bench {
 public:
  explicit Bench(const Options& o) : opt_(o) {}
  ~Bench() {
    if (rb_) ring_buffer__free(rb_);
    if (nop_fd_ >= 0) close(nop_fd_);
    if (rtce_) rtce_xdp__destroy(rtce_);
    if (base_) baseline_xdp__destroy(base_);
  }

  // "" when loaded, else the reason the benchmark cannot run here.
  std::string load() {
    if (geteuid() != 0) return "needs root (CAP_BPF + CAP_NET_ADMIN) to load XDP programs";
    base_ = baseline_xdp__open();
    if (!base_) return std::string("baseline_xdp__open: ") + std::strerror(errno);
    int err = baseline_xdp__load(base_);
    if (err == -EPERM) return "loading BPF programs is not permitted here (EPERM)";
    if (err) die(std::string("baseline_xdp__load: ") + std::strerror(-err));
    rtce_ = rtce_xdp__open();
    if (!rtce_) die(std::string("rtce_xdp__open: ") + std::strerror(errno));
    err = rtce_xdp__load(rtce_);
    if (err == -EPERM) return "loading BPF programs is not permitted here (EPERM)";
    if (err) die(std::string("rtce_xdp__load: ") + std::strerror(-err) + " (verifier log above)");
    // The harness floor: r0 = XDP_TX; exit.
    const bpf_insn nop[2] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = XDP_TX},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    nop_fd_ = bpf_prog_load(BPF_PROG_TYPE_XDP, "bench_nop", "GPL", nop, 2, nullptr);
    if (nop_fd_ < 0) die(std::string("loading the 2-instruction XDP program: ") + std::strerror(errno));
    base_fd_ = bpf_program__fd(base_->progs.baseline_xdp);
    rtce_fd_ = bpf_program__fd(rtce_->progs.rtce_xdp);
    flows_fd_ = bpf_map__fd(rtce_->maps.flows);
    counters_fd_ = bpf_map__fd(rtce_->maps.counters);
    rb_ = ring_buffer__new(bpf_map__fd(rtce_->maps.events), &Bench::on_event, this, nullptr);
    if (!rb_) die("ring_buffer__new failed");
    configure();
    return "";
  }

  void run() {
    const Bytes media = rtp(200);
    const Bytes base_in = frame(kClient, kVip, media);  // 242 bytes, like the flow hit
    const Bytes hit_in = frame(kClient, kVip, media);
    const rtce::HintKeys keys = rtce::HintKeys::generate(1);
    const Bytes stun = chrome_like_binding(rtce::mint_ufrag(keys, kCluster, kEndpointId));
    const Bytes stun_in = frame(kClient, kVip, stun);
    Bytes framed = pp2(kClient, kVip);
    put(framed, media);
    const Bytes ret_in = frame(kEndpoint, kRelay, framed);
    hint_keyset_ = keys.keyset();
    configure();
    const rtce_flow_key key = flow_key(kClient, kVip);
    const rtce_xdp_flow flow = [] {
      rtce_xdp_flow f{};
      f.endpoint = endpoint_value(kEndpoint);
      f.endpoint_id = kEndpointId;
      f.created_ns = 1;
      return f;
    }();
    auto insert_flow = [&] {
      if (bpf_map_update_elem(flows_fd_, &key, &flow, BPF_ANY)) die("flows update failed");
    };
    auto delete_flow = [&] {
      if (bpf_map_delete_elem(flows_fd_, &key)) die("flows delete failed: the previous call created no flow");
    };

    const Expected e_nop{XDP_TX, base_in.size()};
    const Expected e_base{XDP_TX, base_in.size()};
    const Expected e_hit{XDP_TX, hit_in.size() + 28, RTCE_XDP_FORWARDED};
    const Expected e_stun{XDP_TX, stun_in.size() + 28, RTCE_XDP_FORWARDED_NEW_FLOW};
    const Expected e_ret{XDP_TX, ret_in.size() - 28, RTCE_XDP_FORWARDED, RTCE_XDP_DIR_TO_CLIENT};
    sizes_ = {base_in.size(), hit_in.size(), stun_in.size(), ret_in.size(), stun.size()};

    if (opt_.check) {
      // Show why the rtce_xdp cases cannot use repeat=N (see the header comment).
      insert_flow();
      const auto before = counters();
      bpf_test_run_opts o = opts(hit_in, 2);
      if (bpf_prog_test_run_opts(rtce_fd_, &o)) die(std::string("test run: ") + std::strerror(errno));
      const auto after = counters();
      repeat2_retval_ = o.retval;
      repeat2_not_ours_ = after[rtce_xdp_counter_index(RTCE_XDP_PASS_NOT_OURS, RTCE_XDP_DIR_TO_TRANSCEIVER)] -
                          before[rtce_xdp_counter_index(RTCE_XDP_PASS_NOT_OURS, RTCE_XDP_DIR_TO_TRANSCEIVER)];
    }

    // Warm-up: one short batch of everything (JIT'd code and maps into cache, CPU clocks up).
    insert_flow();
    calls(nop_fd_, base_in, 2000, e_nop);
    calls(base_fd_, base_in, 2000, e_base);
    calls(rtce_fd_, hit_in, 2000, e_hit);
    calls(rtce_fd_, ret_in, 2000, e_ret);
    bpf_map_delete_elem(flows_fd_, &key);
    calls(rtce_fd_, stun_in, 2000, e_stun, delete_flow, 1);
    if (!opt_.profile.empty()) {
      const std::string& c = opt_.profile;
      const int n = opt_.calls;
      std::fprintf(stderr, "profiling %s: %d x %d calls\n", c.c_str(), opt_.rounds, n);
      for (int r = 0; r < opt_.rounds; r++) {
        if (c == "baseline")
          calls(base_fd_, base_in, n, e_base);
        else if (c == "nop")
          calls(nop_fd_, base_in, n, e_nop);
        else if (c == "hit" || c == "return") {
          insert_flow();
          if (c == "hit")
            calls(rtce_fd_, hit_in, n, e_hit);
          else
            calls(rtce_fd_, ret_in, n, e_ret);
        } else if (c == "stun" || c == "stun-backlog") {
          bpf_map_delete_elem(flows_fd_, &key);
          calls(rtce_fd_, stun_in, n, e_stun, delete_flow, c == "stun" ? 1 : 256);
        } else
          die("--profile: unknown case " + c);
      }
      return;
    }

    for (int r = 0; r < opt_.rounds; r++) {
      Round rd;
      rd.nop_n = repeated(nop_fd_, base_in, e_nop);
      rd.base_n = repeated(base_fd_, base_in, e_base);
      rd.nop_1 = calls(nop_fd_, base_in, opt_.calls, e_nop);
      insert_flow();  // the STUN batch leaves its flow; make it the hit's flow
      rd.base_1[0] = calls(base_fd_, base_in, opt_.calls, e_base);
      rd.hit = calls(rtce_fd_, hit_in, opt_.calls, e_hit);
      rd.base_1[1] = calls(base_fd_, base_in, opt_.calls, e_base);
      bpf_map_delete_elem(flows_fd_, &key);
      rd.stun = calls(rtce_fd_, stun_in, opt_.calls, e_stun, delete_flow, 1);
      rd.base_1[2] = calls(base_fd_, base_in, opt_.calls, e_base);
      bpf_map_delete_elem(flows_fd_, &key);
      rd.stun_backlog = calls(rtce_fd_, stun_in, opt_.calls, e_stun, delete_flow, 256);
      rd.base_1[3] = calls(base_fd_, base_in, opt_.calls, e_base);
      rd.ret = calls(rtce_fd_, ret_in, opt_.calls, e_ret);  // the STUN batch's last flow
      rounds_.push_back(rd);
      std::fprintf(
          stderr,
          "round %d: nop %.0f/%.1f  baseline %.0f/%.1f  hit %.1f  stun %.1f (backlog %.1f)  return %.1f ns "
          "(repeat=N / repeat=1)\n",
          r + 1, rd.nop_n, rd.nop_1, rd.base_n, rd.base_1[0], rd.hit, rd.stun, rd.stun_backlog, rd.ret);
    }
    const auto c = counters();
    const uint64_t lost = c[rtce_xdp_counter_index(RTCE_XDP_EVENT_LOST, RTCE_XDP_DIR_TO_TRANSCEIVER)];
    if (lost) die("ring buffer events were lost: the first-STUN path measured was not the normal one");
  }

  void report(const std::string& command) const;

 private:
  struct Round {
    double nop_n = 0, base_n = 0, nop_1 = 0;
    double base_1[4] = {0, 0, 0, 0};  // right before hit, stun, stun backlog, return
    double hit = 0, stun = 0, stun_backlog = 0, ret = 0;
  };

  void configure() {
    rtce_xdp_config cfg{};
    std::memcpy(cfg.relay_addr4, kRelay.addr.data(), 4);
    cfg.return_port_be = htons(kReturnPort);
    cfg.cluster_id = kCluster;
    cfg.flags = RTCE_XDP_F_SKIP_FIB | RTCE_XDP_F_HAVE_V4;
    cfg.new_flow_budget = 100000000;  // never the limit here
    std::memcpy(cfg.fixed_src_mac, kTxSrcMac.data(), 6);
    std::memcpy(cfg.fixed_dst_mac, kTxDstMac.data(), 6);
    update(rtce_->maps.config, uint32_t{0}, cfg);
    // The flow limits run as in production (lookups and charges) but are never reached:
    // every first-STUN call creates the same flow again.
    rtce_xdp_flow_limit_config limits{};
    limits.max_per_hint = RTCE_FLOW_LIMIT_NONE - 1;
    limits.max_per_source_prefix = RTCE_FLOW_LIMIT_NONE - 1;
    update(rtce_->maps.flow_limit_config, uint32_t{0}, limits);
    update(rtce_->maps.hint_keys, uint32_t{0}, hint_keyset_);
    rtce_xdp_vip_key k{};
    k.family = 4;
    k.port_be = htons(kVip.port);
    std::memcpy(k.addr, kVip.addr.data(), 16);
    update(rtce_->maps.vips, k, rtce_xdp_vip{0});
    auto ports = std::make_unique<rtce_xdp_vip_ports>();
    rtce_xdp_vip_port_set(ports.get(), kVip.port);
    update(rtce_->maps.vip_ports, uint32_t{0}, *ports);
    update(rtce_->maps.endpoints, kEndpointId, endpoint_value(kEndpoint));
  }

  template <typename K, typename V>
  void update(bpf_map* map, const K& key, const V& value) {
    if (bpf_map__update_elem(map, &key, sizeof(key), &value, sizeof(value), BPF_ANY))
      die(std::string("updating map ") + bpf_map__name(map) + ": " + std::strerror(errno));
  }

  bpf_test_run_opts opts(const Bytes& in, int repeat) {
    out_.resize(in.size() + 256);
    bpf_test_run_opts o{};
    o.sz = sizeof(o);
    o.data_in = in.data();
    o.data_size_in = static_cast<uint32_t>(in.size());
    o.data_out = out_.data();
    o.data_size_out = static_cast<uint32_t>(out_.size());
    o.repeat = repeat;
    return o;
  }

  std::vector<uint64_t> counters() {
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<uint64_t> out(RTCE_XDP_COUNTER_SLOTS);
    std::vector<rtce_xdp_counter> per(static_cast<size_t>(ncpu));
    for (uint32_t i = 0; i < RTCE_XDP_COUNTER_SLOTS; i++) {
      if (bpf_map_lookup_elem(counters_fd_, &i, per.data())) die("counters lookup failed");
      for (const auto& c : per) out[i] += c.packets;
    }
    return out;
  }

  static const char* action_name(uint32_t a) {
    switch (a) {
      case XDP_ABORTED: return "XDP_ABORTED";
      case XDP_DROP: return "XDP_DROP";
      case XDP_PASS: return "XDP_PASS";
      case XDP_TX: return "XDP_TX";
      case XDP_REDIRECT: return "XDP_REDIRECT";
      default: return "?";
    }
  }

  void check_counters(const std::vector<uint64_t>& before, const std::vector<uint64_t>& after, uint64_t n,
                      const Expected& e) {
    for (uint32_t reason = 0; reason < RTCE_XDP_REASON_COUNT; reason++)
      for (uint32_t dir = 0; dir < RTCE_XDP_DIR_COUNT; dir++) {
        const uint32_t i = rtce_xdp_counter_index(reason, dir);
        const uint64_t want = (static_cast<int>(reason) == e.reason && dir == e.dir) ? n : 0;
        if (after[i] - before[i] != want)
          die(std::string("counter ") + rtce_xdp_reason_names[reason] + "/" + rtce_xdp_direction_names[dir] +
              " moved by " + std::to_string(after[i] - before[i]) + ", expected " + std::to_string(want));
      }
  }

  // `n` calls with repeat=1; interquartile mean of the kernel-reported durations.
  // consume_every > 0: the case creates one flow event per call; read the ring buffer after
  // every consume_every-th call.
  double calls(int fd, const Bytes& in, int n, const Expected& e,
               const std::function<void()>& before_each = {}, int consume_every = 0) {
    const bool expect_events = consume_every > 0;
    std::vector<uint32_t> d;
    d.reserve(static_cast<size_t>(n));
    const bool rtce = e.reason >= 0;
    std::vector<uint64_t> c0;
    if (rtce) c0 = counters();
    events_ = 0;
    for (int i = 0; i < n; i++) {
      if (before_each && i > 0) before_each();
      bpf_test_run_opts o = opts(in, 1);
      if (bpf_prog_test_run_opts(fd, &o)) die(std::string("bpf_prog_test_run_opts: ") + std::strerror(errno));
      if (o.retval != e.action || o.data_size_out != e.out_len)
        die(std::string("wrong result: ") + action_name(o.retval) + ", " + std::to_string(o.data_size_out) +
            " bytes out; expected " + action_name(e.action) + ", " + std::to_string(e.out_len) + " (reason " +
            (rtce ? rtce_xdp_reason_names[e.reason] : "-") + ")");
      d.push_back(o.duration);
      if (expect_events && (i + 1) % consume_every == 0) ring_buffer__consume(rb_);
    }
    if (expect_events) ring_buffer__consume(rb_);
    if (rtce) check_counters(c0, counters(), static_cast<uint64_t>(n), e);
    if (expect_events && events_ != static_cast<uint64_t>(n))
      die("expected one flow event per call, got " + std::to_string(events_) + " for " + std::to_string(n));
    return interquartile_mean(std::move(d));
  }

  // One call with repeat=N (only for programs that leave the frame reusable): the kernel's
  // `duration`, an integer (truncated) ns average. Not the wall time of the call: when the
  // loop yields the CPU (cond_resched) the kernel stops its clock, the wall clock does not.
  double repeated(int fd, const Bytes& in, const Expected& e) {
    bpf_test_run_opts o = opts(in, opt_.repeat);
    if (bpf_prog_test_run_opts(fd, &o)) die(std::string("bpf_prog_test_run_opts: ") + std::strerror(errno));
    if (o.retval != e.action || o.data_size_out != e.out_len)
      die(std::string("wrong result with repeat: ") + action_name(o.retval));
    return o.duration;
  }

  static int on_event(void* ctx, void*, size_t) {
    static_cast<Bench*>(ctx)->events_++;
    return 0;
  }

  Options opt_;
  baseline_xdp* base_ = nullptr;
  rtce_xdp* rtce_ = nullptr;
  int nop_fd_ = -1, base_fd_ = -1, rtce_fd_ = -1, flows_fd_ = -1, counters_fd_ = -1;
  ring_buffer* rb_ = nullptr;
  uint64_t events_ = 0;
  rtce_hint_keyset hint_keyset_{};
  Bytes out_;
  std::vector<Round> rounds_;
  std::array<size_t, 5> sizes_{};
  int64_t repeat2_retval_ = -1;
  uint64_t repeat2_not_ours_ = 0;
};

std::string read_line(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s)) return "unreadable";
  return s;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown";
}

void Bench::report(const std::string& command) const {
  // Per round: F = nop(repeat=1) - nop(repeat=N); each case against the baseline batch run
  // right before it (base_1[i] precedes case i).
  struct Case {
    const char* name;
    std::string frame;
    const char* verdict;
    const char* target;
    double limit;  // 0: no target
    double Round::*value;
    int base;
    std::vector<double> ns, raw, corrected;
  };
  auto fr = [](size_t in, size_t out) { return std::to_string(in) + " -> " + std::to_string(out); };
  std::vector<Case> cases = {
      {"flow hit, 200 B RTP",
       fr(sizes_[1], sizes_[1] + 28),
       "XDP_TX, forwarded",
       "<= 1.5x",
       1.5,
       &Round::hit,
       0,
       {},
       {},
       {}},
      {"first STUN, ring buffer drained (wakeup per flow)",
       fr(sizes_[2], sizes_[2] + 28),
       "XDP_TX, forwarded_new_flow",
       "<= 4x",
       4,
       &Round::stun,
       1,
       {},
       {},
       {}},
      {"first STUN, ring buffer backlog (no wakeup)",
       fr(sizes_[2], sizes_[2] + 28),
       "XDP_TX, forwarded_new_flow",
       "<= 4x",
       4,
       &Round::stun_backlog,
       2,
       {},
       {},
       {}},
      {"return, PROXY v2 + 200 B",
       fr(sizes_[3], sizes_[3] - 28),
       "XDP_TX, forwarded (to client)",
       "—",
       0,
       &Round::ret,
       3,
       {},
       {},
       {}},
  };
  std::vector<double> nop_n, base_n, nop_1, base_1, F, base_1_minus_F;
  for (const auto& r : rounds_) {
    const double f = r.nop_1 - r.nop_n;
    nop_n.push_back(r.nop_n);
    base_n.push_back(r.base_n);
    nop_1.push_back(r.nop_1);
    const double b = (r.base_1[0] + r.base_1[1] + r.base_1[2] + r.base_1[3]) / 4;
    base_1.push_back(b);
    F.push_back(f);
    base_1_minus_F.push_back(b - f);
    for (auto& c : cases) {
      const double x = r.*(c.value), bb = r.base_1[c.base];
      c.ns.push_back(x);
      c.raw.push_back(x / bb);
      c.corrected.push_back((x - f) / (bb - f));
    }
  }
  auto range = [](const std::vector<double>& v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f–%.2f", *std::min_element(v.begin(), v.end()),
                  *std::max_element(v.begin(), v.end()));
    return std::string(buf);
  };
  utsname u{};
  uname(&u);
  const double f = median(F);
  std::printf("### XDP program cost, BPF_PROG_TEST_RUN\n\n");
  std::printf("- command: `%s`\n", command.c_str());
  std::printf("- machine: nproc %ld, CPU %s, kernel %s %s\n", sysconf(_SC_NPROCESSORS_ONLN),
              cpu_model().c_str(), u.sysname, u.release);
  std::printf("- net.core.bpf_jit_enable = %s, bpf_jit_harden = %s, kernel.bpf_stats_enabled = %s\n",
              read_line("/proc/sys/net/core/bpf_jit_enable").c_str(),
              read_line("/proc/sys/net/core/bpf_jit_harden").c_str(),
              read_line("/proc/sys/kernel/bpf_stats_enabled").c_str());
  std::printf(
      "- %d rounds, pinned to CPU %d; per round: the 2-instruction program and the baseline with "
      "repeat=%d, then %d calls with repeat=1 of each case, a baseline batch before each\n",
      opt_.rounds, opt_.cpu, opt_.repeat, opt_.calls);
  if (repeat2_retval_ >= 0)
    std::printf(
        "- flow hit with repeat=2 returned %s and counted %llu pass_not_ours: the kernel does not "
        "restore the frame between repetitions, so the rtce_xdp cases run as repeat=1 calls\n",
        action_name(static_cast<uint32_t>(repeat2_retval_)),
        static_cast<unsigned long long>(repeat2_not_ours_));
  std::printf(
      "- repeat=%d: 2-instruction program %.0f ns/pkt, baseline %.0f ns/pkt (kernel `duration`, "
      "integer); F = nop(repeat=1) - nop(repeat=N) = %.1f ns (rounds %s); check of the correction: "
      "baseline(repeat=1) - F = %.1f ns vs baseline(repeat=N) = %.0f ns\n",
      opt_.repeat, median(nop_n), median(base_n), f, range(F).c_str(), median(base_1_minus_F),
      median(base_n));
  std::printf(
      "\nns/pkt: median over rounds of each batch's interquartile mean of the kernel's per-call "
      "`duration` (repeat=1). ratio raw: median over rounds of case / the baseline batch just before "
      "it (range over rounds). ratio F removed: (case - F) / (baseline - F) from the medians, the "
      "repeat=N-equivalent ratio. met: both ratios within the target.\n\n");
  std::printf(
      "| case | frame in -> out (bytes) | verdict, reason | ns/pkt (repeat=1) | ns/pkt - F | ns over "
      "baseline "
      "| ratio raw (rounds) | ratio F removed | target | met |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|---|---|\n");
  const double b1 = median(base_1);
  std::printf("| 2-instruction program (r0 = XDP_TX) | %s | XDP_TX | %.1f | %.1f | — | — | — | — | — |\n",
              fr(sizes_[0], sizes_[0]).c_str(), median(nop_1), median(nop_1) - f);
  std::printf("| baseline_xdp, 200 B UDP | %s | XDP_TX | %.1f | %.1f | 0 | 1.00x | 1.00x | — | — |\n",
              fr(sizes_[0], sizes_[0]).c_str(), b1, b1 - f);
  for (const auto& c : cases) {
    const double x = median(c.ns), raw = median(c.raw), corr = (x - f) / (b1 - f);
    std::printf("| %s | %s | %s | %.1f | %.1f | %.0f | %.2fx (%s) | %.2fx | %s | %s |\n", c.name,
                c.frame.c_str(), c.verdict, x, x - f, x - b1, raw, range(c.raw).c_str(), corr, c.target,
                c.limit == 0 ? "—" : (raw <= c.limit && corr <= c.limit ? "yes" : "**no**"));
  }
  std::printf("\n(first STUN: %zu-byte Chrome-shaped Binding request with a freshly minted hint)\n",
              sizes_[4]);
}

void usage() {
  std::fprintf(
      stderr,
      "usage: xdp_prog_cost [--rounds N] [--calls K] [--repeat N] [--cpu C] [--no-check] [--profile CASE]\n"
      "  Per-packet cost of rtce_xdp vs baseline_xdp under BPF_PROG_TEST_RUN. Needs root.\n"
      "  --rounds N   interleaved rounds (default 7)\n"
      "  --calls K    repeat=1 calls per case per round (default 20000)\n"
      "  --repeat N   repeat of the repeat=N batches (default 1000000)\n"
      "  --cpu C      CPU to pin to (default: the last online CPU)\n"
      "  --no-check   skip the repeat=2 demonstration\n"
      "  --profile C  only run case C (nop, baseline, hit, stun, stun-backlog, return), --rounds x\n"
      "               --calls times, no table: for perf record\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::string command = "sudo build/bin/xdp_prog_cost";
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    command += " " + a;
    auto value = [&](int lo) {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      command += std::string(" ") + argv[i + 1];
      const int v = std::atoi(argv[++i]);
      if (v < lo) {
        usage();
        std::exit(2);
      }
      return v;
    };
    if (a == "--rounds")
      opt.rounds = value(1);
    else if (a == "--calls")
      opt.calls = value(100);
    else if (a == "--repeat")
      opt.repeat = value(1000);
    else if (a == "--cpu")
      opt.cpu = value(0);
    else if (a == "--no-check")
      opt.check = false;
    else if (a == "--profile" && i + 1 < argc) {
      opt.profile = argv[++i];
      command += " " + opt.profile;
    } else {
      usage();
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (opt.cpu < 0) opt.cpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(opt.cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set)) die(std::string("sched_setaffinity: ") + std::strerror(errno));

  Bench bench(opt);
  const std::string why = bench.load();
  if (!why.empty()) {
    std::printf("xdp_prog_cost: not run: %s\n", why.c_str());
    return 0;
  }
  try {
    bench.run();
  } catch (const std::exception& e) {
    die(e.what());
  }
  if (opt.profile.empty()) bench.report(command);
  return 0;
}
