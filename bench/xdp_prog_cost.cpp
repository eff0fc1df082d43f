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
//   hit floor   bench_xdp's hit_floor on the flow-hit frame: the flow key read from the
//               frame, one lookup in rtce_xdp's `flows` map, a per-CPU counter, XDP_TX. The
//               least any flow-table relay pays per packet: the flow hit's cost above it is
//               the relay's own work (checks, activity time, rewrite).
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
//
// Live frames (after the table; --no-live skips them): BPF_PROG_RUN with
// BPF_F_TEST_XDP_LIVE_FRAMES and a large repeat, in a network namespace of the benchmark's
// own (unshare: the kernel frees it, and the veth pair in it, when the process exits, also
// on a crash). The frame "arrives" on one end of a veth pair; XDP_TX sends it into the
// pair, whose other end runs bench_xdp's live_sink (count, XDP_DROP). Everything runs on
// the pinned CPU: the program, the transmit into the veth, the peer's NAPI poll and drop,
// so packets per second of CPU time is the forwarding rate of one core, without the
// single-sender ceiling of a traffic generator. The kernel recycles a frame's page without
// rewriting its bytes, so each case runs behind bench_xdp's live_restore (copy the
// original headers back, tail call) and the 2-instruction program behind it is the floor
// of the harness. Each run must move the case's counter and the sink's by exactly repeat.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
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
#include "bench_xdp.skel.h"
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
  bool live = true;
  int live_repeat = 5000000;  // frames per live run
  int live_rounds = 3;
  double relay_pps = 0;  // the userspace relay's packets per CPU-second, printed beside (0: not given)
};

// ------------------------------------------------------------------ live frames

// Runs a command (iproute2, sysctl files) in the benchmark's namespace; false if it failed.
bool sh(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

bool write_file(const char* path, const char* text) {
  std::FILE* f = std::fopen(path, "w");
  if (!f) return false;
  const bool ok = std::fputs(text, f) >= 0;
  return std::fclose(f) == 0 && ok;
}

double thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// A network namespace of the process's own, with a veth pair: rtce-lv0 (where the live frames
// arrive and where XDP_TX sends them) and rtce-lv1 (live_sink). unshare(), not `ip netns
// add`: nothing is named or mounted, so nothing can be left behind; the kernel removes the
// namespace and its devices once the process leaves it or exits, however it exits.
class LiveNetns {
  static constexpr const char* kLv0Mac = "02:00:00:00:4c:30";
  static constexpr const char* kLv1Mac = "02:00:00:00:4c:31";

 public:
  LiveNetns() = default;
  LiveNetns(const LiveNetns&) = delete;
  LiveNetns& operator=(const LiveNetns&) = delete;
  ~LiveNetns() { leave(); }

  // "" when ready, else why the live runs cannot happen here.
  std::string enter() {
    orig_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (orig_ < 0) return std::string("/proc/self/ns/net: ") + std::strerror(errno);
    if (unshare(CLONE_NEWNET)) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
    entered_ = true;
    // No IPv6 (no router solicitations into the sink); forwarding on, which bpf_fib_lookup
    // requires of the ingress device.
    write_file("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
    write_file("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
    // Fixed MACs: /sys/class/net shows the namespace that mounted sysfs, not this one.
    if (!sh("ip link add rtce-lv0 address " + std::string(kLv0Mac) +
            " type veth peer name rtce-lv1 address " + kLv1Mac) ||
        !sh("ip link set rtce-lv0 up") || !sh("ip link set rtce-lv1 up") || !sh("ip link set lo up"))
      return "creating the veth pair failed (ip link add ... type veth)";
    if (!write_file("/proc/sys/net/ipv4/ip_forward", "1")) return "cannot enable IPv4 forwarding";
    in_ = static_cast<int>(if_nametoindex("rtce-lv0"));
    out_ = static_cast<int>(if_nametoindex("rtce-lv1"));
    if (!in_ || !out_) return "the veth pair has no ifindex";
    return "";
  }

  // The fib lookup's view: the relay address on rtce-lv0 and the endpoint a permanent
  // neighbour behind it (the MAC of rtce-lv1). 198.18.0.0/15 only (RFC 2544 benchmarking).
  bool add_route(const std::string& relay, const std::string& endpoint) {
    return sh("ip addr add " + relay + "/15 dev rtce-lv0") &&
           sh("ip neigh replace " + endpoint + " lladdr " + kLv1Mac + " nud permanent dev rtce-lv0");
  }

  void leave() {
    if (sink_fd_ >= 0 && out_) bpf_xdp_detach(out_, XDP_FLAGS_DRV_MODE, nullptr);
    sink_fd_ = -1;
    if (entered_ && orig_ >= 0) setns(orig_, CLONE_NEWNET);  // the last reference: it goes
    entered_ = false;
    if (orig_ >= 0) close(orig_);
    orig_ = -1;
  }

  std::string attach_sink(int fd) {
    if (bpf_xdp_attach(out_, fd, XDP_FLAGS_DRV_MODE, nullptr))
      return std::string("attaching live_sink to rtce-lv1 (native): ") + std::strerror(errno);
    sink_fd_ = fd;
    return "";
  }

  int ingress() const { return in_; }

 private:
  int orig_ = -1;
  bool entered_ = false;
  int in_ = 0, out_ = 0, sink_fd_ = -1;
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
    if (helpers_) bench_xdp__destroy(helpers_);
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
    // BPF_XDP as libbpf gives SEC("xdp") programs: a tail call (the live runs) needs the same.
    LIBBPF_OPTS(bpf_prog_load_opts, nop_opts, .expected_attach_type = BPF_XDP);
    nop_fd_ = bpf_prog_load(BPF_PROG_TYPE_XDP, "bench_nop", "GPL", nop, 2, &nop_opts);
    if (nop_fd_ < 0) die(std::string("loading the 2-instruction XDP program: ") + std::strerror(errno));
    // The helpers; hit_floor looks flows up in rtce_xdp's own map.
    helpers_ = bench_xdp__open();
    if (!helpers_) die(std::string("bench_xdp__open: ") + std::strerror(errno));
    if (bpf_map__reuse_fd(helpers_->maps.flows, bpf_map__fd(rtce_->maps.flows)))
      die("bench_xdp: reusing rtce_xdp's flows map failed");
    if (int e = bench_xdp__load(helpers_); e) die(std::string("bench_xdp__load: ") + std::strerror(-e));
    floor_fd_ = bpf_program__fd(helpers_->progs.hit_floor);
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
    const Expected e_floor{XDP_TX, hit_in.size()};  // XDP_PASS if the lookup missed
    sizes_ = {base_in.size(), hit_in.size(), stun_in.size(), ret_in.size(), stun.size()};
    hit_frame_ = hit_in;
    base_frame_ = base_in;

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
    calls(floor_fd_, hit_in, 2000, e_floor);
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
        else if (c == "floor") {
          insert_flow();
          calls(floor_fd_, hit_in, n, e_floor);
        } else if (c == "hit" || c == "return") {
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
      rd.base_1[4] = calls(base_fd_, base_in, opt_.calls, e_base);
      rd.floor = calls(floor_fd_, hit_in, opt_.calls, e_floor);  // the same flow
      rounds_.push_back(rd);
      std::fprintf(
          stderr,
          "round %d: nop %.0f/%.1f  baseline %.0f/%.1f  hit %.1f  stun %.1f (backlog %.1f)  return %.1f  "
          "floor %.1f ns (repeat=N / repeat=1)\n",
          r + 1, rd.nop_n, rd.nop_1, rd.base_n, rd.base_1[0], rd.hit, rd.stun, rd.stun_backlog, rd.ret,
          rd.floor);
    }
    const auto c = counters();
    const uint64_t lost = c[rtce_xdp_counter_index(RTCE_XDP_EVENT_LOST, RTCE_XDP_DIR_TO_TRANSCEIVER)];
    if (lost) die("ring buffer events were lost: the first-STUN path measured was not the normal one");
  }

  void report(const std::string& command) const;

  // The live-frames runs; "" when done, else why they could not run here.
  std::string run_live();
  void report_live() const;

 private:
  struct LiveCase {
    const char* name;
    int fd;
    const Bytes* frame;
    bool fib;
    int reason;  // rtce_xdp counter that must move by repeat, -1: none
    std::vector<double> kernel_ns, cpu_ns, softirqd_share;
  };
  std::vector<LiveCase> live_;
  int live_ingress_ = 0;

  // One live run: `repeat` frames through live_restore -> fd. Returns false (and why) when a
  // counter did not move by exactly repeat.
  void live_once(LiveCase& c, uint64_t repeat);

  struct Round {
    double nop_n = 0, base_n = 0, nop_1 = 0;
    double base_1[5] = {0, 0, 0, 0, 0};  // right before hit, stun, stun backlog, return, floor
    double hit = 0, stun = 0, stun_backlog = 0, ret = 0, floor = 0;
  };

  // fib: look the next hop up (the live runs' namespace has a route and a neighbour for
  // it) instead of the fixed MACs of the fixtures.
  void configure(bool fib = false) {
    rtce_xdp_config cfg{};
    std::memcpy(cfg.relay_addr4, kRelay.addr.data(), 4);
    cfg.return_port_be = htons(kReturnPort);
    cfg.cluster_id = kCluster;
    cfg.flags = (fib ? 0 : RTCE_XDP_F_SKIP_FIB) | RTCE_XDP_F_HAVE_V4;
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
  bench_xdp* helpers_ = nullptr;
  int nop_fd_ = -1, base_fd_ = -1, rtce_fd_ = -1, flows_fd_ = -1, counters_fd_ = -1, floor_fd_ = -1;
  ring_buffer* rb_ = nullptr;
  uint64_t events_ = 0;
  rtce_hint_keyset hint_keyset_{};
  Bytes out_;
  std::vector<Round> rounds_;
  std::array<size_t, 5> sizes_{};
  Bytes hit_frame_, base_frame_;
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

// ksoftirqd of `cpu`: its pid, to add the softirq work it took over to the thread's CPU time.
int ksoftirqd_pid(int cpu) {
  const std::string want = "ksoftirqd/" + std::to_string(cpu);
  for (int pid = 2; pid < 4096; pid++) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    if (comm && std::getline(comm, name) && name == want) return pid;
  }
  return -1;
}

// utime + stime of a task in ns (clock ticks: 10 ms resolution, enough over a run of seconds).
double task_cpu_ns(int pid) {
  if (pid < 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return 0;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f;
  std::string field;
  for (size_t i = close + 2; i <= line.size(); i++) {
    if (i == line.size() || line[i] == ' ') {
      f.push_back(field);
      field.clear();
    } else {
      field += line[i];
    }
  }
  if (f.size() < 13) return 0;  // fields 14 and 15 of the file: utime, stime
  return (std::stod(f[11]) + std::stod(f[12])) * 1e9 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

void Bench::live_once(LiveCase& c, uint64_t repeat) {
  const uint32_t zero = 0;
  std::array<uint8_t, 80> head{};
  std::memcpy(head.data(), c.frame->data(), head.size());
  update(helpers_->maps.live_template, zero, head);
  if (bpf_map_update_elem(bpf_map__fd(helpers_->maps.under_test), &zero, &c.fd, BPF_ANY))
    die(std::string("under_test update: ") + std::strerror(errno));
  const int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> sink(static_cast<size_t>(ncpu), 0);
  if (bpf_map_update_elem(bpf_map__fd(helpers_->maps.sink_count), &zero, sink.data(), BPF_ANY))
    die("sink_count reset failed");
  configure(c.fib);
  std::vector<uint64_t> c0;
  if (c.reason >= 0) c0 = counters();

  xdp_md md{};
  md.data_end = static_cast<uint32_t>(c.frame->size());
  md.ingress_ifindex = static_cast<uint32_t>(live_ingress_);
  LIBBPF_OPTS(bpf_test_run_opts, o);
  o.data_in = c.frame->data();
  o.data_size_in = static_cast<uint32_t>(c.frame->size());
  o.ctx_in = &md;
  o.ctx_size_in = sizeof md;
  o.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
  o.repeat = static_cast<int>(repeat);
  o.batch_size = 64;  // NAPI's budget, the kernel's default
  const int softirqd = ksoftirqd_pid(opt_.cpu);
  const double k0 = task_cpu_ns(softirqd), t0 = thread_cpu_ns();
  if (bpf_prog_test_run_opts(bpf_program__fd(helpers_->progs.live_restore), &o))
    die(std::string("live run of ") + c.name + ": " + std::strerror(errno));
  const double t1 = thread_cpu_ns(), k1 = task_cpu_ns(softirqd);

  if (bpf_map_lookup_elem(bpf_map__fd(helpers_->maps.sink_count), &zero, sink.data()))
    die("sink_count read failed");
  uint64_t arrived = 0;
  for (uint64_t v : sink) arrived += v;
  if (arrived != repeat)
    die(std::string("live run of ") + c.name + ": " + std::to_string(arrived) +
        " frames reached the veth peer of " + std::to_string(repeat) + " sent");
  if (c.reason >= 0) {
    const auto c1 = counters();
    const uint32_t i = rtce_xdp_counter_index(static_cast<uint32_t>(c.reason), RTCE_XDP_DIR_TO_TRANSCEIVER);
    if (c1[i] - c0[i] != repeat)
      die(std::string("live run of ") + c.name + ": counter " + rtce_xdp_reason_names[c.reason] +
          " moved by " + std::to_string(c1[i] - c0[i]) + ", expected " + std::to_string(repeat));
  }
  const double cpu = (t1 - t0) + (k1 - k0);
  c.kernel_ns.push_back(o.duration);
  c.cpu_ns.push_back(cpu / static_cast<double>(repeat));
  c.softirqd_share.push_back(cpu > 0 ? (k1 - k0) / cpu : 0);
  std::fprintf(stderr, "live %s: %u ns/frame (kernel), %.1f ns/frame (CPU time, %.0f%% in ksoftirqd)\n",
               c.name, o.duration, cpu / static_cast<double>(repeat), cpu > 0 ? 100 * (k1 - k0) / cpu : 0.0);
}

std::string Bench::run_live() {
  LiveNetns ns;
  std::string why = ns.enter();
  if (why.empty()) why = ns.attach_sink(bpf_program__fd(helpers_->progs.live_sink));
  if (why.empty() && !ns.add_route("198.18.0.1", "198.18.2.2"))
    why = "adding the relay address and the endpoint's neighbour failed";
  if (!why.empty()) return why;
  live_ingress_ = ns.ingress();
  // The flow of the flow-hit frame, as in the table.
  rtce_xdp_flow flow{};
  flow.endpoint = endpoint_value(kEndpoint);
  flow.endpoint_id = kEndpointId;
  flow.created_ns = 1;
  const rtce_flow_key key = flow_key(kClient, kVip);
  if (bpf_map_update_elem(flows_fd_, &key, &flow, BPF_ANY)) die("flows update failed");
  live_ = {
      {"2-instruction program (r0 = XDP_TX)", nop_fd_, &base_frame_, false, -1, {}, {}, {}},
      {"baseline_xdp, 200 B UDP", base_fd_, &base_frame_, false, -1, {}, {}, {}},
      {"flow hit, fixed next hop (as the table)",
       rtce_fd_,
       &hit_frame_,
       false,
       RTCE_XDP_FORWARDED,
       {},
       {},
       {}},
      {"flow hit, bpf_fib_lookup next hop", rtce_fd_, &hit_frame_, true, RTCE_XDP_FORWARDED, {}, {}, {}},
  };
  for (auto& c : live_) live_once(c, 100000);  // warm-up: page pool, JIT'd code, CPU clocks
  for (auto& c : live_) {
    c.kernel_ns.clear();
    c.cpu_ns.clear();
    c.softirqd_share.clear();
  }
  for (int r = 0; r < opt_.live_rounds; r++)
    for (auto& c : live_) live_once(c, static_cast<uint64_t>(opt_.live_repeat));
  configure();
  ns.leave();
  return "";
}

void Bench::report_live() const {
  std::printf("\n### XDP live frames: forwarding rate of one core\n\n");
  std::printf(
      "BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, repeat=%d, batch 64, %d rounds, pinned to CPU %d, in a "
      "network namespace of the benchmark's own: each frame arrives on veth rtce-lv0, XDP_TX sends it into "
      "the pair, the peer rtce-lv1 counts and drops it (live_sink). Every case runs behind live_restore "
      "(original 80 header bytes copied back, tail call). Every run moved the sink counter, and for "
      "rtce_xdp the `forwarded` counter, by exactly repeat. CPU ns/frame: the benchmark thread's CPU time "
      "plus its CPU's ksoftirqd's, per frame (median over rounds); Mpps per core = 1000 / that. Kernel "
      "ns/frame: the run's `duration` (integer).\n\n",
      opt_.live_repeat, opt_.live_rounds, opt_.cpu);
  std::printf(
      "| case | kernel ns/frame | CPU ns/frame | Mpps per core | ns over the 2-instruction program |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  const double floor_ns = live_.empty() ? 0 : median(live_[0].cpu_ns);
  for (const auto& c : live_) {
    const double ns = median(c.cpu_ns);
    std::printf("| %s | %.0f | %.1f | %.2f | %.1f |\n", c.name, median(c.kernel_ns), ns, 1000 / ns,
                ns - floor_ns);
  }
  if (opt_.relay_pps > 0) {
    const double hit = median(live_[3].cpu_ns);
    std::printf(
        "| userspace relay (bench/run_forwarding_bench.sh, given with --relay-pps) | — | %.1f | %.3f | — |\n",
        1e9 / opt_.relay_pps, opt_.relay_pps / 1e6);
    std::printf("\nXDP flow hit (fib) / userspace relay, packets per CPU-second: %.1fx\n",
                (1000 / hit) / (opt_.relay_pps / 1e6));
  } else {
    std::printf(
        "\nThe userspace relay's rate per core: `sudo bench/run_forwarding_bench.sh --systems relay --rates "
        "max`;"
        " 1e9 / its \"middlebox process CPU ms/Mpkt\" x 1e3 is packets per CPU-second (pass it as "
        "--relay-pps "
        "to print it here).\n");
  }
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
       "<= 2.0x",
       2.0,
       &Round::hit,
       0,
       {},
       {},
       {}},
      {"first STUN, ring buffer drained (wakeup per flow)",
       fr(sizes_[2], sizes_[2] + 28),
       "XDP_TX, forwarded_new_flow",
       "<= 5x",
       5,
       &Round::stun,
       1,
       {},
       {},
       {}},
      {"first STUN, ring buffer backlog (no wakeup)",
       fr(sizes_[2], sizes_[2] + 28),
       "XDP_TX, forwarded_new_flow",
       "<= 5x",
       5,
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
      {"hit floor: one `flows` lookup + per-CPU counter (bench_xdp)",
       fr(sizes_[1], sizes_[1]),
       "XDP_TX",
       "—",
       0,
       &Round::floor,
       4,
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
    const double b = (r.base_1[0] + r.base_1[1] + r.base_1[2] + r.base_1[3] + r.base_1[4]) / 5;
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
      "                     [--no-live] [--live-repeat N] [--live-rounds N] [--relay-pps PPS]\n"
      "  Per-packet cost of rtce_xdp vs baseline_xdp under BPF_PROG_TEST_RUN. Needs root.\n"
      "  --rounds N   interleaved rounds (default 7)\n"
      "  --calls K    repeat=1 calls per case per round (default 20000)\n"
      "  --repeat N   repeat of the repeat=N batches (default 1000000)\n"
      "  --cpu C      CPU to pin to (default: the last online CPU)\n"
      "  --no-check   skip the repeat=2 demonstration\n"
      "  --profile C  only run case C (nop, baseline, hit, stun, stun-backlog, return, floor),\n"
      "               --rounds x --calls times, no table: for perf record\n"
      "  --no-live    skip the live-frames runs (BPF_F_TEST_XDP_LIVE_FRAMES on a veth pair in a\n"
      "               network namespace of the benchmark's own)\n"
      "  --live-repeat N  frames per live run (default 5000000)\n"
      "  --live-rounds N  live runs per case (default 3)\n"
      "  --relay-pps PPS  the userspace relay's packets per CPU-second (bench/run_forwarding_bench.sh),\n"
      "               printed beside the live figures\n");
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
    else if (a == "--no-live")
      opt.live = false;
    else if (a == "--live-repeat")
      opt.live_repeat = value(1000);
    else if (a == "--live-rounds")
      opt.live_rounds = value(1);
    else if (a == "--relay-pps")
      opt.relay_pps = value(1);
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
  if (!opt.profile.empty()) return 0;
  bench.report(command);
  if (opt.live) {
    const std::string live_why = bench.run_live();
    if (live_why.empty())
      bench.report_live();
    else
      std::printf("\nxdp_prog_cost: live frames not run: %s\n", live_why.c_str());
  }
  return 0;
}
