// udp_blast.cpp — load generator and sink for the forwarding benchmark
// (bench/run_forwarding_bench.sh, docs/benchmarks.md).
//
// One process, two data threads, each in its own network namespace (setns(2) on a thread
// only moves that thread, and a socket stays in the namespace it was created in):
//
//   sender  (client namespace): a raw IPv4 socket (IPPROTO_RAW, so IP_HDRINCL) writing
//           whole IPv4/UDP packets with sendmmsg. Every flow has its own source port, so
//           one socket and one syscall per batch carry any number of flows. Each flow
//           first sends a STUN Binding request whose USERNAME is "<server ufrag>:x" with
//           a freshly minted, valid routing hint (the relay creates its flow from it;
//           nginx and nftables just forward it), then fixed-size payloads that carry a
//           phase id, a sequence number and the CLOCK_MONOTONIC send time.
//   sink    (sink namespace): one UDP socket, recvmmsg, strips a PROXY v2 header when
//           the datagram starts with 0x0D, and records now - send time for every packet.
//           Like a transceiver's media socket it has UDP_GRO on (--sink-gro), so a GSO
//           sender's run arrives as one receive, split by common/udp_batch (UdpReceiveBatch).
//
// The main thread runs the phases (one per offered rate) and samples CPU over each window:
// utime+stime of this process, of the middlebox processes (--watch-pid) and of the
// ksoftirqd and NAPI threads (--kernel-pid); see CpuSample for why that covers the kernel's
// forwarding work too. Only packets whose send timestamp lies in the measurement window
// count, so the figures have no edge effects; warm-up and drain time are outside it.
//
// One line per phase: "RESULT key=value ...", parsed by run_forwarding_bench.sh.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "byte_order.h"
#include "clock.h"
#include "error.h"
#include "hint_keys.h"
#include "net_address.h"
#include "random.h"
#include "rtce_proxy_v2.h"
#include "rtce_stun.h"
#include "udp_batch.h"
#include "udp_socket_options.h"

namespace {

using Nanos = int64_t;

constexpr uint32_t kMagic = 0x52544342;  // "RTCB"
constexpr size_t kIpUdpHeader = 28;
constexpr size_t kMinPayload = 32;
constexpr size_t kSinkBatch = 64;
constexpr size_t kSinkBuffer = 2048;

Nanos now_ns() { return rtce::monotonic_now(); }

using rtce::bench::sleep_until;

using rtce::load_be32;
using rtce::load_be64;
using rtce::store_be16;
using rtce::store_be32;
using rtce::store_be64;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "udp_blast: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

void enter_netns(const std::string& name) {
  if (name.empty()) return;
  const std::string path = "/run/netns/" + name;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("open " + path);
  if (setns(fd, CLONE_NEWNET) < 0) die("setns " + path);
  close(fd);
}

void pin_to(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    std::fprintf(stderr, "udp_blast: cannot pin to CPU %d\n", cpu);
}

sockaddr_in parse_v4(const std::string& text, bool need_port) {
  auto addr = rtce::SocketAddress::parse(text.find(':') == std::string::npos ? text + ":0" : text);
  if (!addr || !addr->is_v4() || (need_port && addr->port() == 0)) {
    std::fprintf(stderr, "udp_blast: '%s' is not an IPv4 address%s\n", text.c_str(),
                 need_port ? ":port" : "");
    std::exit(2);
  }
  sockaddr_in out{};
  std::memcpy(&out, addr->sa(), sizeof out);
  return out;
}

struct Options {
  std::string label = "run";
  std::string client_netns;
  std::string sink_netns;
  std::string src = "198.19.1.2";
  uint16_t src_port_base = 20000;
  uint32_t flows = 1000;
  std::string dst = "198.19.1.1:3478";
  std::string sink = "198.19.2.2:40000";
  std::string hint_key_file;
  unsigned cluster = 0;
  unsigned endpoint = 1;
  std::vector<std::string> rates = {"20000", "max"};
  double warmup_s = 0.5;
  double duration_s = 4.0;
  double drain_s = 0.3;
  size_t payload = 200;
  size_t batch = 32;
  std::vector<int> watch_pids;
  std::vector<int> kernel_pids;
  int sender_cpu = -1;
  int sink_cpu = -1;
  bool sink_gro = true;
};

struct PhaseSpec {
  uint32_t id = 0;
  uint64_t rate = 0;  // packets/s; 0 = as fast as the sender can
  Nanos start = 0;
  Nanos window_start = 0;
  Nanos window_end = 0;
  Nanos stop = 0;
};

// State shared by the three threads. A phase is published by storing its id with release
// after `spec` and the result fields are reset; a thread acknowledges with its own atomic.
struct Shared {
  std::atomic<bool> quit{false};
  PhaseSpec spec;
  std::atomic<uint32_t> sender_phase{0};
  std::atomic<uint32_t> sender_done{0};
  std::atomic<bool> primed{false};
  std::atomic<uint32_t> sink_phase{0};
  std::atomic<uint32_t> sink_seen{0};
  std::atomic<bool> sink_ready{false};
  // Sender results for the current phase.
  uint64_t sent_total = 0;
  uint64_t sent_in_window = 0;
  uint64_t send_errors = 0;
  // Sink results for the current phase.
  uint64_t recv_total = 0;
  uint64_t recv_in_window = 0;
  std::vector<uint32_t> latency_ns;
  // Sink results for the whole run.
  std::atomic<uint64_t> framed{0};
  std::atomic<uint64_t> unframed{0};
  std::atomic<uint64_t> stun_seen{0};
  std::atomic<uint64_t> foreign{0};
  std::atomic<bool> sink_gro{false};  // UDP_GRO on the sink's socket
};

// ---- sender -------------------------------------------------------------------------

class Sender {
 public:
  Sender(const Options& o, Shared& s) : o_(o), s_(s) {}

  void run() {
    enter_netns(o_.client_netns);
    pin_to(o_.sender_cpu);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    fd_ = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);  // IPPROTO_RAW implies IP_HDRINCL
    if (fd_ < 0) die("raw socket (needs root)");
    int big = 8 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
    src_ = parse_v4(o_.src, false);
    dst_ = parse_v4(o_.dst, true);
    prime();
    s_.primed.store(true, std::memory_order_release);

    uint32_t done = 0;
    while (!s_.quit.load(std::memory_order_acquire)) {
      uint32_t phase = s_.sender_phase.load(std::memory_order_acquire);
      if (phase == 0 || phase == done) {
        usleep(1000);
        continue;
      }
      blast(s_.spec);
      done = phase;
      s_.sender_done.store(phase, std::memory_order_release);
    }
    close(fd_);
  }

 private:
  // IPv4 + UDP header for a datagram of `payload_len` bytes from flow `flow`. The kernel
  // fills the IPv4 checksum, total length and id; UDP checksum 0 means "none" in IPv4
  // (RFC 768): the receiver does not verify in software what a real NIC verifies in hardware.
  void write_headers(uint8_t* p, uint32_t flow, size_t payload_len) const {
    std::memset(p, 0, kIpUdpHeader);
    p[0] = 0x45;
    store_be16(p + 2, static_cast<uint16_t>(kIpUdpHeader + payload_len));
    store_be16(p + 6, 0x4000);  // DF
    p[8] = 64;
    p[9] = IPPROTO_UDP;
    std::memcpy(p + 12, &src_.sin_addr, 4);
    std::memcpy(p + 16, &dst_.sin_addr, 4);
    store_be16(p + 20, static_cast<uint16_t>(o_.src_port_base + flow));
    std::memcpy(p + 22, &dst_.sin_port, 2);
    store_be16(p + 24, static_cast<uint16_t>(8 + payload_len));
  }

  size_t send_batch(std::vector<mmsghdr>& msgs, size_t n) {
    size_t sent = 0;
    while (sent < n) {
      int r = sendmmsg(fd_, msgs.data() + sent, static_cast<unsigned>(n - sent), 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        s_.send_errors++;
        sent++;  // skip the datagram the kernel refused
        continue;
      }
      sent += static_cast<size_t>(r);
    }
    return sent;
  }

  // One STUN Binding request per flow, USERNAME "<minted server ufrag>:x", sent twice
  // (a lost first packet would leave the relay without the flow), paced in small bursts.
  void prime() {
    std::vector<std::string> ufrags(o_.flows);
    if (!o_.hint_key_file.empty()) {
      const auto keys = rtce::HintKeys::load_file(o_.hint_key_file);
      for (auto& u : ufrags)
        u = rtce::mint_ufrag(keys, static_cast<uint8_t>(o_.cluster), static_cast<uint16_t>(o_.endpoint));
    } else {
      for (auto& u : ufrags) u = "AAAAAAAAAAAAAAAA";  // not a valid hint: fine for nginx/nft
    }
    constexpr size_t kBurst = 50;
    std::vector<uint8_t> buf(kBurst * 128);
    std::vector<iovec> iov(kBurst);
    std::vector<mmsghdr> msgs(kBurst);
    for (int round = 0; round < 2; round++) {
      for (uint32_t first = 0; first < o_.flows; first += kBurst) {
        size_t n = std::min<size_t>(kBurst, o_.flows - first);
        for (size_t i = 0; i < n; i++) {
          const uint32_t flow = first + static_cast<uint32_t>(i);
          uint8_t* p = buf.data() + i * 128;
          uint8_t* stun = p + kIpUdpHeader;
          const size_t len = rtce::bench::write_binding_request(stun, ufrags[flow] + ":x");
          write_headers(p, flow, len);
          iov[i] = {p, kIpUdpHeader + len};
          msgs[i] = {};
          msgs[i].msg_hdr.msg_name = &dst_;
          msgs[i].msg_hdr.msg_namelen = sizeof dst_;
          msgs[i].msg_hdr.msg_iov = &iov[i];
          msgs[i].msg_hdr.msg_iovlen = 1;
        }
        send_batch(msgs, n);
        usleep(1000);
      }
      usleep(20000);
    }
  }

  void blast(const PhaseSpec& spec) {
    const size_t pkt = kIpUdpHeader + o_.payload;
    const size_t batch = o_.batch;
    std::vector<uint8_t> buf(batch * pkt, 0);
    std::vector<iovec> iov(batch);
    std::vector<mmsghdr> msgs(batch);
    for (size_t i = 0; i < batch; i++) {
      iov[i] = {buf.data() + i * pkt, pkt};
      msgs[i].msg_hdr.msg_name = &dst_;
      msgs[i].msg_hdr.msg_namelen = sizeof dst_;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t seq = 0;
    uint64_t sent = 0;
    uint64_t in_window = 0;
    uint32_t flow = 0;
    sleep_until(spec.start);
    for (;;) {
      Nanos now = now_ns();
      if (now >= spec.stop) break;
      size_t n = batch;
      if (spec.rate) {
        const uint64_t due =
            static_cast<uint64_t>(static_cast<__int128>(now - spec.start) * spec.rate / 1'000'000'000) + 1;
        if (due <= sent) {
          sleep_until(spec.start +
                      static_cast<Nanos>(static_cast<__int128>(sent) * 1'000'000'000 / spec.rate));
          continue;
        }
        n = static_cast<size_t>(std::min<uint64_t>(batch, due - sent));
      }
      for (size_t i = 0; i < n; i++) {
        uint8_t* p = buf.data() + i * pkt;
        write_headers(p, flow, o_.payload);
        uint8_t* d = p + kIpUdpHeader;
        d[0] = 0x80;  // RTP version 2: outside the STUN range, opaque to the relay
        d[1] = 96;
        store_be16(d + 2, static_cast<uint16_t>(seq));
        store_be32(d + 4, kMagic);
        store_be32(d + 8, flow);
        store_be32(d + 12, spec.id);
        store_be64(d + 16, seq);
        store_be64(d + 24, static_cast<uint64_t>(now));
        seq++;
        flow = flow + 1 == o_.flows ? 0 : flow + 1;
      }
      const uint64_t before_errors = s_.send_errors;
      send_batch(msgs, n);
      const uint64_t ok = n - (s_.send_errors - before_errors);
      sent += n;  // refused datagrams count as offered (and lost)
      if (now >= spec.window_start && now < spec.window_end) in_window += ok;
    }
    s_.sent_total = sent;
    s_.sent_in_window = in_window;
  }

  const Options& o_;
  Shared& s_;
  int fd_ = -1;
  sockaddr_in src_{};
  sockaddr_in dst_{};
};

// ---- sink ---------------------------------------------------------------------------

void sink_main(const Options& o, Shared& s) {
  enter_netns(o.sink_netns);
  pin_to(o.sink_cpu);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("sink socket");
  int big = 64 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0) die("SO_RCVBUFFORCE");
  timeval tv{0, 20'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr = parse_v4(o.sink, true);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("bind sink " + o.sink);
  s.sink_ready.store(true, std::memory_order_release);

  // With UDP_GRO a relay's GSO run is one receive, which the batch splits. 64 slots either
  // way (of 64 KiB with GRO: 4 MiB, more than a transceiver spends, so that datagrams that
  // come one by one, from nginx say, still take one recvmmsg per 64 as they did).
  const bool gro = o.sink_gro && rtce::enable_udp_gro(fd);
  rtce::UdpReceiveBatch rx = gro ? rtce::UdpReceiveBatch::coalescing(kSinkBatch, kSinkBuffer)
                                 : rtce::UdpReceiveBatch(kSinkBatch, kSinkBuffer);
  s.sink_gro.store(gro, std::memory_order_relaxed);
  uint32_t seen = 0;
  PhaseSpec spec;
  uint64_t framed = 0, unframed = 0, stun = 0, foreign = 0;
  while (!s.quit.load(std::memory_order_acquire)) {
    const uint32_t cur = s.sink_phase.load(std::memory_order_acquire);
    if (cur != seen) {
      seen = cur;
      if (cur) spec = s.spec;
      s.framed.store(framed, std::memory_order_relaxed);
      s.unframed.store(unframed, std::memory_order_relaxed);
      s.stun_seen.store(stun, std::memory_order_relaxed);
      s.foreign.store(foreign, std::memory_order_relaxed);
      s.sink_seen.store(cur, std::memory_order_release);
    }
    // Blocks for the first datagram, at most 20 ms (SO_RCVTIMEO), to see phase changes.
    const size_t n = rx.receive(fd, /*wait=*/true);
    if (n == 0) continue;
    const Nanos now = now_ns();
    for (size_t i = 0; i < n; i++) {
      if (rx.truncated(i)) {
        foreign++;
        continue;
      }
      const uint8_t* p = rx.data(i);
      auto len = static_cast<uint32_t>(rx.length(i));
      if (len > 0 && p[0] == RTCE_PP2_FIRST_BYTE) {
        rtce_pp2_flow flow{};
        uint32_t off = 0;
        if (rtce_pp2_parse(p, len, &flow, &off) != RTCE_PP2_OK) {
          foreign++;
          continue;
        }
        framed++;
        p += off;
        len -= off;
      } else {
        unframed++;
      }
      if (len >= 1 && p[0] <= 3) {
        stun++;
        continue;
      }
      if (len < kMinPayload || load_be32(p + 4) != kMagic) {
        foreign++;
        continue;
      }
      if (!cur || load_be32(p + 12) != cur) continue;  // a straggler from an earlier phase
      const Nanos sent_at = static_cast<Nanos>(load_be64(p + 24));
      s.recv_total++;
      if (sent_at >= spec.window_start && sent_at < spec.window_end) {
        s.recv_in_window++;
        const Nanos lat = std::max<Nanos>(0, now - sent_at);
        if (s.latency_ns.size() < s.latency_ns.capacity())
          s.latency_ns.push_back(static_cast<uint32_t>(std::min<Nanos>(lat, UINT32_MAX)));
      }
    }
  }
  close(fd);
}

// ---- CPU accounting -----------------------------------------------------------------

// Without CONFIG_IRQ_TIME_ACCOUNTING (the case on the machine of docs/benchmarks.md) softirq
// work -- veth delivery, IP forwarding, NAT -- counts as run time of the task it ran in:
// the sender or the middlebox on its way out of a syscall, else ksoftirqd or a NAPI thread.
// So "benchmark CPU" = this process + the middlebox + those kernel threads, a figure that
// other tenants of a shared machine do not disturb. /proc/stat (tick-sampled, all CPUs)
// only serves as a rough indicator of how busy the rest of the machine was.
struct CpuSample {
  uint64_t busy = 0;  // user+nice+system+irq+softirq, clock ticks, all CPUs
  uint64_t softirq = 0;
  uint64_t system = 0;
  uint64_t steal = 0;
  uint64_t procs = 0;      // utime+stime of the watched processes
  uint64_t self = 0;       // utime+stime of this process (sender + sink)
  uint64_t ksoftirqd = 0;  // utime+stime of the ksoftirqd/N threads
};

std::vector<int> ksoftirqd_pids() {
  std::vector<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream comm(entry.path() / "comm");
    std::string c;
    if (std::getline(comm, c) && c.rfind("ksoftirqd/", 0) == 0) out.push_back(std::stoi(name));
  }
  return out;
}

uint64_t proc_ticks(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return 0;
  size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream fields(line.substr(close_paren + 2));
  std::string f;
  uint64_t utime = 0, stime = 0;
  // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> f; i++) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return utime + stime;
}

CpuSample sample_cpu(const std::vector<int>& pids, const std::vector<int>& softirq_threads) {
  CpuSample c;
  std::ifstream in("/proc/stat");
  std::string name;
  uint64_t v[10] = {};
  in >> name;
  for (auto& x : v) in >> x;
  // user nice system idle iowait irq softirq steal guest guest_nice
  c.busy = v[0] + v[1] + v[2] + v[5] + v[6];
  c.system = v[2];
  c.softirq = v[6];
  c.steal = v[7];
  for (int pid : pids) c.procs += proc_ticks("/proc/" + std::to_string(pid) + "/stat");
  c.self = proc_ticks("/proc/self/stat");
  for (int pid : softirq_threads) c.ksoftirqd += proc_ticks("/proc/" + std::to_string(pid) + "/stat");
  return c;
}

double percentile(std::vector<uint32_t>& v, double q) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k] / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string watch;
  std::string kernel;
  CLI::App app{"udp_blast: UDP load generator + sink for the rtcedge forwarding benchmark (needs root)"};
  app.add_option("--label", o.label, "name printed with every result line");
  app.add_option("--client-netns", o.client_netns, "network namespace (ip netns name) the sender runs in");
  app.add_option("--sink-netns", o.sink_netns, "network namespace (ip netns name) the sink runs in");
  app.add_option("--src", o.src, "client IPv4 source address");
  app.add_option("--src-port-base", o.src_port_base, "source port of flow 0; flow i uses base+i");
  app.add_option("--flows", o.flows, "client flows (distinct source ports)")->check(CLI::Range(1, 40000));
  app.add_option("--dst", o.dst, "address:port the clients send to (VIP, or the sink itself)");
  app.add_option("--sink", o.sink, "address:port the sink listens on");
  app.add_option("--hint-key-file", o.hint_key_file,
                 "mint a valid routing hint per flow for its STUN request");
  app.add_option("--cluster", o.cluster, "hint cluster id");
  app.add_option("--endpoint", o.endpoint, "hint endpoint id");
  app.add_option("--rates", o.rates, "offered packets/s per phase; 'max' = as fast as the sender can")
      ->delimiter(',');
  app.add_option("--warmup", o.warmup_s, "seconds sent before the measurement window");
  app.add_option("--duration", o.duration_s, "seconds of the measurement window");
  app.add_option("--drain", o.drain_s, "seconds the sink keeps receiving after the sender stops");
  app.add_option("--payload", o.payload, "UDP payload bytes")->check(CLI::Range(kMinPayload, size_t{1400}));
  app.add_option("--batch", o.batch, "datagrams per sendmmsg")->check(CLI::Range(1, 1024));
  app.add_option("--watch-pid", watch, "comma-separated pids whose utime+stime is the middlebox CPU");
  app.add_option("--kernel-pid", kernel, "comma-separated kernel threads (e.g. NAPI) counted with ksoftirqd");
  app.add_option("--sender-cpu", o.sender_cpu, "pin the sender thread to this CPU (-1 = no pinning)");
  app.add_option("--sink-cpu", o.sink_cpu, "pin the sink thread to this CPU (-1 = no pinning)");
  app.add_option("--sink-gro", o.sink_gro,
                 "UDP_GRO on the sink's socket, as a transceiver has it (a GSO sender's runs arrive whole)");
  CLI11_PARSE(app, argc, argv);
  auto pid_list = [](const std::string& text, std::vector<int>& out) {
    for (size_t start = 0; start < text.size();) {
      size_t end = text.find(',', start);
      if (end == std::string::npos) end = text.size();
      if (end > start) out.push_back(std::stoi(text.substr(start, end - start)));
      start = end + 1;
    }
  };
  pid_list(watch, o.watch_pids);
  pid_list(kernel, o.kernel_pids);
  std::vector<uint64_t> rates;
  for (const auto& r : o.rates) {
    uint64_t v = 0;
    if (r != "max" && (std::from_chars(r.data(), r.data() + r.size(), v).ec != std::errc() || v == 0)) {
      std::fprintf(stderr, "udp_blast: rate '%s' is not a positive number or 'max'\n", r.c_str());
      return 2;
    }
    rates.push_back(v);
  }

  Shared s;
  std::thread sink([&] { sink_main(o, s); });
  while (!s.sink_ready.load(std::memory_order_acquire)) usleep(1000);
  Sender sender(o, s);
  std::thread send([&] {
    try {
      sender.run();
    } catch (const rtce::ConfigError& e) {
      std::fprintf(stderr, "udp_blast: %s\n", e.what());
      std::exit(2);
    }
  });
  while (!s.primed.load(std::memory_order_acquire)) usleep(1000);
  usleep(200'000);

  std::vector<int> softirq_threads = ksoftirqd_pids();
  softirq_threads.insert(softirq_threads.end(), o.kernel_pids.begin(), o.kernel_pids.end());
  const long hz = sysconf(_SC_CLK_TCK);
  const auto ticks_ms = [hz](uint64_t t) {
    return static_cast<double>(t) * 1000.0 / static_cast<double>(hz);
  };
  const Nanos warmup = static_cast<Nanos>(o.warmup_s * 1e9);
  const Nanos window = static_cast<Nanos>(o.duration_s * 1e9);
  const Nanos drain = static_cast<Nanos>(o.drain_s * 1e9);
  uint32_t id = 0;
  for (uint64_t rate : rates) {
    id++;
    PhaseSpec spec;
    spec.id = id;
    spec.rate = rate;
    spec.start = now_ns() + 50'000'000;
    spec.window_start = spec.start + warmup;
    spec.window_end = spec.window_start + window;
    spec.stop = spec.window_end;
    s.spec = spec;
    s.sent_total = s.sent_in_window = s.send_errors = 0;
    s.recv_total = s.recv_in_window = 0;
    s.latency_ns.clear();
    const double expect = (rate ? static_cast<double>(rate) : 3e6) * o.duration_s * 1.2 + 1024;
    s.latency_ns.reserve(static_cast<size_t>(std::min(expect, 4e7)));
    s.sink_phase.store(id, std::memory_order_release);
    while (s.sink_seen.load(std::memory_order_acquire) != id) usleep(500);
    s.sender_phase.store(id, std::memory_order_release);

    sleep_until(spec.window_start);
    const CpuSample a = sample_cpu(o.watch_pids, softirq_threads);
    const Nanos a_t = now_ns();
    sleep_until(spec.window_end);
    const CpuSample b = sample_cpu(o.watch_pids, softirq_threads);
    const Nanos b_t = now_ns();
    while (s.sender_done.load(std::memory_order_acquire) != id) usleep(1000);
    sleep_until(spec.stop + drain);
    s.sink_phase.store(0, std::memory_order_release);
    while (s.sink_seen.load(std::memory_order_acquire) != 0) usleep(500);

    const double secs = o.duration_s;
    const double cpu_secs = static_cast<double>(b_t - a_t) / 1e9;
    const double offered = static_cast<double>(s.sent_in_window) / secs;
    const double fwd = static_cast<double>(s.recv_in_window) / secs;
    const double loss =
        s.sent_in_window
            ? 100.0 * (1.0 - static_cast<double>(s.recv_in_window) / static_cast<double>(s.sent_in_window))
            : 0;
    const double mpkts = static_cast<double>(s.recv_in_window) / 1e6 * (cpu_secs / secs);
    const double busy_ms = ticks_ms(b.busy - a.busy);
    const double procs_ms = ticks_ms(b.procs - a.procs);
    const double self_ms = ticks_ms(b.self - a.self);
    const double ksoftirqd_ms = ticks_ms(b.ksoftirqd - a.ksoftirqd);
    const double bench_ms = procs_ms + self_ms + ksoftirqd_ms;
    std::vector<uint32_t>& lat = s.latency_ns;
    const double p50 = percentile(lat, 0.50);
    const double p90 = percentile(lat, 0.90);
    const double p99 = percentile(lat, 0.99);
    const double p999 = percentile(lat, 0.999);
    const double pmax = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end()) / 1000.0;
    std::printf(
        "RESULT label=%s phase=%u rate=%s window_s=%.2f flows=%u payload=%zu sent=%llu received=%llu "
        "offered_pps=%.0f fwd_pps=%.0f loss_pct=%.3f p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f "
        "max_us=%.1f "
        "lat_samples=%zu cpu_busy_ms=%.0f cpu_system_ms=%.0f cpu_softirq_ms=%.0f cpu_steal_ms=%.0f "
        "mbox_cpu_ms=%.0f harness_cpu_ms=%.0f kthreads_cpu_ms=%.0f bench_cpu_ms=%.0f other_cpu_ms=%.0f "
        "bench_ms_per_mpkt=%.1f busy_ms_per_mpkt=%.1f mbox_ms_per_mpkt=%.1f send_errors=%llu "
        "framed=%llu unframed=%llu stun=%llu foreign=%llu sink_gro=%d\n",
        o.label.c_str(), id, rate ? std::to_string(rate).c_str() : "max", secs, o.flows, o.payload,
        static_cast<unsigned long long>(s.sent_in_window), static_cast<unsigned long long>(s.recv_in_window),
        offered, fwd, loss, p50, p90, p99, p999, pmax, lat.size(), busy_ms, ticks_ms(b.system - a.system),
        ticks_ms(b.softirq - a.softirq), ticks_ms(b.steal - a.steal), procs_ms, self_ms, ksoftirqd_ms,
        bench_ms, std::max(0.0, busy_ms - bench_ms), mpkts > 0 ? bench_ms / mpkts : 0.0,
        mpkts > 0 ? busy_ms / mpkts : 0.0, mpkts > 0 && !o.watch_pids.empty() ? procs_ms / mpkts : 0.0,
        static_cast<unsigned long long>(s.send_errors), static_cast<unsigned long long>(s.framed.load()),
        static_cast<unsigned long long>(s.unframed.load()),
        static_cast<unsigned long long>(s.stun_seen.load()),
        static_cast<unsigned long long>(s.foreign.load()), s.sink_gro.load() ? 1 : 0);
    std::fflush(stdout);
    usleep(100'000);
  }
  s.quit.store(true, std::memory_order_release);
  send.join();
  sink.join();
  return 0;
}
