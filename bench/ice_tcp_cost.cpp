// ice_tcp_cost.cpp — what ICE-TCP costs the relay per packet, against UDP, in one run
// (docs/benchmarks.md, "ICE-TCP: the relay's cost per packet, TCP against UDP").
//
// On loopback, one process plays every part but the relay:
//
//   relay        rtcedge-relay (--relay-bin), started here: userspace, one worker, not
//                pinned, VIP 127.0.0.1:P for UDP and ICE-TCP (--ice-tcp-port P), a key file
//                from `rtcedge-relay hint keygen`, endpoint 1 = the echo socket below.
//   echo         a thread with one UDP socket standing in for a transceiver endpoint: every
//                datagram (PROXY v2 header + payload) goes straight back, unchanged, to the
//                relay address it came from (the header names the flow; a relay takes its
//                own padded header back). recvmmsg/sendmmsg, 64 at a time.
//   clients      N UDP flows (one socket each) and N TCP connections (RFC 4571 framing). Each
//                first sends a STUN Binding request whose USERNAME carries a freshly minted
//                hint and waits for its echo (the flow exists), then fixed-size RTP-shaped
//                payloads carrying flow, phase, sequence and send time.
//
// Phases, one after the other with the same offered load: UDP then TCP at N x rate packets/s
// (paced in ticks: every --tick-us the load thread sends what is due, one send per packet,
// since each flow has its own socket), then optionally UDP and TCP "max" (closed loop:
// --max-window packets in flight per flow, each reply releases the next).
//
// Per phase, over the measurement window only (warm-up and drain outside it): the relay
// process's CPU (utime+stime of /proc/<pid>/stat, and the nanosecond sum of its threads'
// /proc/<pid>/task/*/schedstat), the packets it forwarded in both directions (its own
// rtcedge_relay_forwarded_packets_total), the ICE-TCP counters (frames, recv/send calls),
// the GSO messages it sent to the endpoint, and what came back to the clients (packets
// whose send time lies in the window). The admin endpoint is read outside the CPU window.
//
// Output: a Markdown table and one "RESULT key=value ..." line per phase. --check (the
// ctest smoke twin) exits 1 unless every phase delivered > 90 % of its packets back and the
// relay's TCP counters moved during the TCP phases.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "byte_order.h"
#include "clock.h"
#include "hint_keys.h"
#include "random.h"
#include "rtce_proxy_v2.h"
#include "rtce_stun.h"

namespace {

using Nanos = int64_t;
using rtce::load_be16;
using rtce::load_be32;
using rtce::load_be64;
using rtce::store_be16;
using rtce::store_be32;
using rtce::store_be64;

constexpr uint32_t kMagic = 0x52544354;  // "RTCT"
constexpr size_t kMinPayload = 32;
constexpr size_t kEchoBatch = 64;
constexpr size_t kMaxPhases = 8;

Nanos now_ns() { return rtce::monotonic_now(); }

using rtce::bench::sleep_until;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "ice_tcp_cost: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

sockaddr_in v4(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

uint16_t bound_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0) die("getsockname");
  return ntohs(a.sin_port);
}

// A port free on 127.0.0.1 for both UDP and TCP (the VIP takes both).
uint16_t free_port(bool udp_too) {
  for (int attempt = 0; attempt < 50; attempt++) {
    int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = v4(0);
    if (t < 0 || bind(t, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) die("bind a free TCP port");
    const uint16_t port = bound_port(t);
    bool ok = true;
    if (udp_too) {
      int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in b = v4(port);
      ok = u >= 0 && bind(u, reinterpret_cast<sockaddr*>(&b), sizeof b) == 0;
      if (u >= 0) close(u);
    }
    close(t);
    if (ok) return port;
  }
  errno = EADDRINUSE;
  die("no port free for both UDP and TCP");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- the relay process --------------------------------------------------------------

pid_t spawn(const std::vector<std::string>& args, const std::string& out_path, const std::string& err_path) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

// GET path from 127.0.0.1:port (HTTP/1.0, the server closes); empty on failure.
std::string http_get(uint16_t port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a = v4(port);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[16384];
      for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return out;
}

// The metric samples of a /metrics page, "name{labels}" -> value.
using Metrics = std::map<std::string, double>;

Metrics fetch_metrics(uint16_t admin_port) {
  Metrics m;
  std::istringstream in(http_get(admin_port, "/metrics"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("rtcedge_relay_", 0) != 0) continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    try {
      m[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
    } catch (...) {
    }
  }
  return m;
}

// Sum of every sample of a family whose labels contain `label` (e.g. direction="...").
double metric_sum(const Metrics& m, const std::string& name, const std::string& label = {}) {
  double total = 0;
  for (const auto& [k, v] : m) {
    if (k.rfind(name, 0) != 0) continue;
    const char next = k.size() > name.size() ? k[name.size()] : '\0';
    if (next != '\0' && next != '{') continue;
    if (!label.empty() && k.find(label) == std::string::npos) continue;
    total += v;
  }
  return total;
}

struct CpuSample {
  uint64_t ticks = 0;  // utime + stime, /proc/<pid>/stat
  uint64_t stime = 0;
  uint64_t run_ns = 0;  // sum over threads of /proc/<pid>/task/*/schedstat's first field
  uint64_t sleeps = 0;  // sum over threads of voluntary_ctxt_switches: a worker's wake-ups
};

CpuSample sample_cpu(pid_t pid) {
  CpuSample c;
  const std::string base = "/proc/" + std::to_string(pid);
  const std::string stat = read_file(base + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos) {
    std::istringstream fields(stat.substr(paren + 2));
    std::string f;
    for (int i = 3; i <= 15 && fields >> f; i++) {
      if (i == 14 || i == 15) c.ticks += std::stoull(f);
      if (i == 15) c.stime = std::stoull(f);
    }
  }
  if (DIR* d = opendir((base + "/task").c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::istringstream s(read_file(base + "/task/" + e->d_name + "/schedstat"));
      uint64_t ns = 0;
      if (s >> ns) c.run_ns += ns;
      std::istringstream status(read_file(base + "/task/" + e->d_name + "/status"));
      for (std::string line; std::getline(status, line);)
        if (line.rfind("voluntary_ctxt_switches:", 0) == 0) c.sleeps += std::stoull(line.substr(24));
    }
    closedir(d);
  }
  return c;
}

// ---- packets ------------------------------------------------------------------------

// A flow's first packet: a Binding request, USERNAME "<ufrag>:cli".
size_t write_binding_request(uint8_t* out, const std::string& ufrag) {
  return rtce::bench::write_binding_request(out, ufrag + ":cli");
}

void write_payload(uint8_t* d, size_t len, uint32_t flow, uint32_t phase, uint64_t seq, Nanos now) {
  std::memset(d, 0, len);
  d[0] = 0x80;  // RTP version 2: opaque to the relay
  d[1] = 96;
  store_be16(d + 2, static_cast<uint16_t>(seq));
  store_be32(d + 4, kMagic);
  store_be32(d + 8, flow);
  store_be32(d + 12, phase);
  store_be64(d + 16, seq);
  store_be64(d + 24, static_cast<uint64_t>(now));
}

// ---- echo transceiver ---------------------------------------------------------------

struct EchoStats {
  std::atomic<uint64_t> datagrams{0};
  std::atomic<uint64_t> stream{0};  // PROXY v2 family byte 0x11/0x21 (ICE-TCP flows)
  std::atomic<uint64_t> dgram{0};   // 0x12/0x22
  std::atomic<uint64_t> unframed{0};
  std::atomic<uint64_t> per_phase[kMaxPhases + 1] = {};
};

void echo_main(int fd, std::atomic<bool>& quit, EchoStats& st) {
  std::vector<std::array<uint8_t, 2048>> bufs(kEchoBatch);
  std::vector<sockaddr_in6> from(kEchoBatch);
  std::vector<iovec> iov(kEchoBatch);
  std::vector<mmsghdr> msgs(kEchoBatch);
  while (!quit.load(std::memory_order_acquire)) {
    for (size_t i = 0; i < kEchoBatch; i++) {
      iov[i] = {bufs[i].data(), bufs[i].size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof from[i];
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // Blocks for the first datagram (SO_RCVTIMEO 20 ms), then takes what is queued.
    const int n = recvmmsg(fd, msgs.data(), kEchoBatch, MSG_WAITFORONE, nullptr);
    if (n <= 0) continue;
    for (int i = 0; i < n; i++) {
      const uint8_t* p = bufs[i].data();
      const uint32_t len = msgs[i].msg_len;
      iov[i].iov_len = len;  // back unchanged, to its sender
      st.datagrams.fetch_add(1, std::memory_order_relaxed);
      uint32_t off = 0;
      rtce_pp2_flow flow{};
      if (len < 16 || p[0] != RTCE_PP2_FIRST_BYTE || rtce_pp2_parse(p, len, &flow, &off) != RTCE_PP2_OK) {
        st.unframed.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      ((p[13] & 0x0f) == 0x1 ? st.stream : st.dgram).fetch_add(1, std::memory_order_relaxed);
      if (len - off >= kMinPayload && load_be32(p + off + 4) == kMagic) {
        const uint32_t phase = load_be32(p + off + 12);
        if (phase <= kMaxPhases) st.per_phase[phase].fetch_add(1, std::memory_order_relaxed);
      }
    }
    for (int sent = 0; sent < n;) {
      const int r = sendmmsg(fd, msgs.data() + sent, static_cast<unsigned>(n - sent), 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        sent++;  // skip the one the kernel refused
        continue;
      }
      sent += r;
    }
  }
}

// ---- clients ------------------------------------------------------------------------

struct Flow {
  int fd = -1;
  // TCP: bytes of a partial frame from the relay.
  std::vector<uint8_t> rx;
  size_t rx_len = 0;
  uint64_t seq = 0;
  uint32_t in_flight = 0;  // max phase
  Nanos last_reply = 0;
  bool ready = false;  // its Binding request came back
};

struct PhaseSpec {
  uint32_t id = 0;
  bool tcp = false;
  bool max = false;
  uint64_t rate = 0;  // packets/s over all flows (paced phases)
  Nanos start = 0, window_start = 0, window_end = 0, stop = 0, drain_end = 0;
};

struct PhaseResult {
  uint64_t sent = 0, sent_in_window = 0, send_errors = 0;
  uint64_t received = 0, received_in_window = 0;
};

class Clients {
 public:
  Clients(bool tcp, uint32_t n, size_t payload, uint16_t vip_port, const rtce::HintKeys& keys)
      : tcp_(tcp), payload_(payload), flows_(n) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) die("epoll_create1");
    const sockaddr_in vip = v4(vip_port);
    for (uint32_t i = 0; i < n; i++) {
      Flow& f = flows_[i];
      f.fd = socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
      if (f.fd < 0) die("client socket");
      if (tcp) {
        int one = 1;
        setsockopt(f.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        timeval tv{1, 0};  // sends block (a frame is never cut), at most 1 s
        setsockopt(f.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        f.rx.resize(65536 + 2);
      }
      if (connect(f.fd, reinterpret_cast<const sockaddr*>(&vip), sizeof vip) < 0)
        die(std::string(tcp ? "TCP" : "UDP") + " connect to the VIP");
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = i;
      if (epoll_ctl(ep_, EPOLL_CTL_ADD, f.fd, &ev) < 0) die("epoll_ctl");
      uint8_t buf[2 + 128];
      const size_t len = write_binding_request(buf + 2, rtce::mint_ufrag(keys, 0, 1));
      send_packet(f, buf + 2, len);
    }
  }
  ~Clients() {
    for (Flow& f : flows_)
      if (f.fd >= 0) close(f.fd);
    close(ep_);
  }

  // Waits until every flow's Binding request came back (UDP: sent again every 200 ms).
  bool wait_ready(Nanos timeout, const rtce::HintKeys& keys) {
    const Nanos deadline = now_ns() + timeout;
    Nanos resend = now_ns() + 200'000'000;
    while (ready_ < flows_.size() && now_ns() < deadline) {
      poll_once(nullptr, 5'000'000);
      if (!tcp_ && now_ns() >= resend) {
        for (Flow& f : flows_) {
          if (f.ready) continue;
          uint8_t buf[128];
          send_packet(f, buf, write_binding_request(buf, rtce::mint_ufrag(keys, 0, 1)));
        }
        resend = now_ns() + 200'000'000;
      }
    }
    return ready_ == flows_.size();
  }

  void run(const PhaseSpec& spec, uint32_t max_window, Nanos tick, PhaseResult& r) {
    std::vector<uint8_t> buf(2 + payload_);
    const uint32_t n = static_cast<uint32_t>(flows_.size());
    auto send_one = [&](uint32_t i, Nanos now) {
      Flow& f = flows_[i];
      write_payload(buf.data() + 2, payload_, i, spec.id, f.seq++, now);
      const bool ok = send_packet(f, buf.data() + 2, payload_);
      r.sent++;
      if (!ok) r.send_errors++;
      if (ok && now >= spec.window_start && now < spec.window_end) r.sent_in_window++;
      if (ok) f.in_flight++;
    };
    auto on_reply = [&](uint32_t i, const uint8_t* p, size_t len) {
      if (len < kMinPayload || load_be32(p + 4) != kMagic || load_be32(p + 12) != spec.id) return;
      const Nanos sent_at = static_cast<Nanos>(load_be64(p + 24));
      r.received++;
      if (sent_at >= spec.window_start && sent_at < spec.window_end) r.received_in_window++;
      Flow& f = flows_[i];
      if (f.in_flight) f.in_flight--;
      f.last_reply = now_ns();
      if (spec.max && f.last_reply < spec.stop) send_one(i, f.last_reply);
    };
    const ReplyFn fn = on_reply;
    for (Flow& f : flows_) f.in_flight = 0, f.last_reply = spec.start;
    sleep_until(spec.start);
    if (spec.max) {
      const Nanos now = now_ns();
      for (uint32_t w = 0; w < max_window; w++)
        for (uint32_t i = 0; i < n; i++) send_one(i, now);
    }
    uint64_t due_sent = 0;  // paced: packets sent so far; packet k is due at start + k / rate
    Nanos next_refill = spec.start + 50'000'000;
    for (;;) {
      Nanos now = now_ns();
      if (now >= spec.drain_end) break;
      if (!spec.max && now < spec.stop) {
        const uint64_t due =
            static_cast<uint64_t>(static_cast<__int128>(now - spec.start) * spec.rate / 1'000'000'000) + 1;
        for (; due_sent < due; due_sent++) send_one(static_cast<uint32_t>(due_sent % n), now);
      }
      if (spec.max && now < spec.stop && now >= next_refill) {
        // A flow whose packets were lost (UDP) gets its window back after 100 ms of silence.
        for (uint32_t i = 0; i < n; i++)
          if (now - flows_[i].last_reply > 100'000'000) {
            flows_[i].in_flight = 0;
            flows_[i].last_reply = now;
            for (uint32_t w = 0; w < max_window; w++) send_one(i, now);
          }
        next_refill = now + 50'000'000;
      }
      Nanos wait = spec.drain_end - now;
      if (!spec.max && now < spec.stop) {
        const Nanos next_due =
            spec.start + static_cast<Nanos>(static_cast<__int128>(due_sent) * 1'000'000'000 / spec.rate);
        wait = std::min(wait, std::max<Nanos>(tick, next_due - now));
      } else if (spec.max && now < spec.stop) {
        wait = std::min<Nanos>(wait, 10'000'000);
      }
      poll_once(&fn, wait);
    }
  }

 private:
  using ReplyFn = std::function<void(uint32_t, const uint8_t*, size_t)>;

  // `p` has 2 bytes of room in front (the RFC 4571 length goes there for TCP).
  bool send_packet(Flow& f, uint8_t* p, size_t len) {
    if (!tcp_) return send(f.fd, p, len, MSG_DONTWAIT) == static_cast<ssize_t>(len);
    store_be16(p - 2, static_cast<uint16_t>(len));
    size_t done = 0;
    while (done < len + 2) {
      const ssize_t w = send(f.fd, p - 2 + done, len + 2 - done, MSG_NOSIGNAL);
      if (w <= 0) {
        if (w < 0 && errno == EINTR) continue;
        return false;
      }
      done += static_cast<size_t>(w);
    }
    return true;
  }

  void deliver(uint32_t i, const uint8_t* p, size_t len, const ReplyFn* fn) {
    if (len >= 1 && p[0] <= 3) {  // STUN: the echoed Binding request
      if (!flows_[i].ready) {
        flows_[i].ready = true;
        ready_++;
      }
      return;
    }
    if (fn) (*fn)(i, p, len);
  }

  void poll_once(const ReplyFn* fn, Nanos wait_ns) {
    epoll_event evs[64];
    const timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000),
                      static_cast<long>(wait_ns % 1'000'000'000)};
    const int n = epoll_pwait2(ep_, evs, 64, &ts, nullptr);
    for (int e = 0; e < n; e++) {
      const uint32_t i = evs[e].data.u32;
      Flow& f = flows_[i];
      if (!tcp_) {
        uint8_t buf[2048];
        for (;;) {
          const ssize_t got = recv(f.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (got < 0) break;
          deliver(i, buf, static_cast<size_t>(got), fn);
        }
        continue;
      }
      const ssize_t got = recv(f.fd, f.rx.data() + f.rx_len, f.rx.size() - f.rx_len, MSG_DONTWAIT);
      if (got == 0) {
        std::fprintf(stderr, "ice_tcp_cost: the relay closed TCP connection %u\n", i);
        epoll_ctl(ep_, EPOLL_CTL_DEL, f.fd, nullptr);
        continue;
      }
      if (got < 0) continue;
      f.rx_len += static_cast<size_t>(got);
      size_t at = 0;
      while (f.rx_len - at >= 2) {
        const size_t flen = load_be16(f.rx.data() + at);
        if (f.rx_len - at < 2 + flen) break;
        deliver(i, f.rx.data() + at + 2, flen, fn);
        at += 2 + flen;
      }
      std::memmove(f.rx.data(), f.rx.data() + at, f.rx_len - at);
      f.rx_len -= at;
    }
  }

  bool tcp_;
  size_t payload_;
  std::vector<Flow> flows_;
  int ep_ = -1;
  size_t ready_ = 0;
};

struct Row {
  std::string transport, load;
  double pps = 0, fwd_pps = 0, us_ticks = 0, us_ns = 0, recv_per_frame = 0, send_per_frame = 0,
         msgs_per_dgram = 0, wakeups_per_pkt = 0, delivered = 0, tcp_frames = 0, tcp_recv = 0, tcp_send = 0;
};

std::string machine_description() {
  std::string model = "unknown";
  std::istringstream cpuinfo(read_file("/proc/cpuinfo"));
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  utsname u{};
  uname(&u);
  std::string load = read_file("/proc/loadavg");
  if (!load.empty() && load.back() == '\n') load.pop_back();
  char out[512];
  std::snprintf(out, sizeof out, "nproc=%ld, CPU \"%s\", kernel %s %s, loadavg at start %s",
                sysconf(_SC_NPROCESSORS_ONLN), model.c_str(), u.sysname, u.release, load.c_str());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string relay_bin;
  uint32_t flows = 100;
  uint32_t pps_per_flow = 50;
  double duration_s = 5.0;
  double max_duration_s = 3.0;
  double warmup_s = 0.5;
  double drain_s = 0.3;
  size_t payload = 160;
  bool max_phase = true;
  uint32_t max_window = 4;
  int64_t tick_us = 1000;
  bool check = false;
  std::string label = "run";
  std::string relay_args;
  CLI::App app{"ice_tcp_cost: the relay's CPU per packet for ICE-TCP against UDP, on loopback"};
  app.add_option("--relay-bin", relay_bin, "rtcedge-relay binary")->required();
  app.add_option("--flows", flows, "UDP flows, then as many TCP connections")->check(CLI::Range(1, 5000));
  app.add_option("--pps-per-flow", pps_per_flow, "packets/s each flow sends in the paced phases (voice: 50)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--duration", duration_s, "seconds of each paced phase's measurement window");
  app.add_option("--max-duration", max_duration_s, "seconds of each max phase's measurement window");
  app.add_option("--warmup", warmup_s, "seconds sent before each window");
  app.add_option("--drain", drain_s, "seconds the clients keep receiving after sending stops");
  app.add_option("--payload", payload, "payload bytes per packet")
      ->check(CLI::Range(kMinPayload, size_t{1200}));
  app.add_option("--max", max_phase, "add the closed-loop max phases (true/false)");
  app.add_option("--max-window", max_window, "max phases: packets in flight per flow")
      ->check(CLI::Range(1, 64));
  app.add_option("--tick-us", tick_us, "paced phases: the load thread sends what is due at most this often");
  app.add_option("--label", label, "name printed with every RESULT line");
  app.add_option("--relay-args", relay_args, "extra arguments for the relay (space-separated)");
  app.add_flag("--check", check,
               "exit 1 unless every phase delivered > 90 % back and the TCP counters moved (smoke test)");
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);

  // Scratch directory: the key file and the relay's log.
  char tmpl[] = "/tmp/rtce_ice_tcp_cost.XXXXXX";
  if (!mkdtemp(tmpl)) die("mkdtemp");
  const std::string dir = tmpl;
  const std::string key_file = dir + "/hint-keys.yaml";
  const std::string log_file = dir + "/relay.log";
  {
    const pid_t kg = spawn({relay_bin, "hint", "keygen"}, key_file, log_file);
    int status = 0;
    waitpid(kg, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "ice_tcp_cost: `%s hint keygen` failed:\n%s", relay_bin.c_str(),
                   read_file(log_file).c_str());
      return 1;
    }
    chmod(key_file.c_str(), 0600);
  }
  const rtce::HintKeys keys = rtce::HintKeys::load_file(key_file);

  // The echo transceiver's socket.
  const int echo_fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (echo_fd < 0) die("echo socket");
  {
    int zero = 0;
    setsockopt(echo_fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    int big = 8 << 20;
    setsockopt(echo_fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(echo_fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    timeval tv{0, 20'000};
    setsockopt(echo_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &a.sin6_addr);
    if (bind(echo_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) die("bind echo socket");
  }
  sockaddr_in6 echo_addr{};
  socklen_t echo_len = sizeof echo_addr;
  getsockname(echo_fd, reinterpret_cast<sockaddr*>(&echo_addr), &echo_len);
  const uint16_t echo_port = ntohs(echo_addr.sin6_port);
  const uint16_t vip_port = free_port(true);
  uint16_t admin_port = free_port(false);
  while (admin_port == vip_port) admin_port = free_port(false);

  std::vector<std::string> args = {relay_bin,
                                   "--mode",
                                   "userspace",
                                   "--workers",
                                   "1",
                                   "--pin-cpus",
                                   "false",
                                   "--listen",
                                   "127.0.0.1:" + std::to_string(vip_port),
                                   "--ice-tcp-port",
                                   std::to_string(vip_port),
                                   "--ice-tcp-max-per-source-prefix",
                                   "1000000",
                                   "--flows-max-per-source-prefix",
                                   "0",
                                   "--hint-key-file",
                                   key_file,
                                   "--endpoints",
                                   "1=127.0.0.1:" + std::to_string(echo_port),
                                   "--admin-listen",
                                   "127.0.0.1:" + std::to_string(admin_port),
                                   "--log-level",
                                   "warn"};
  {
    std::istringstream extra(relay_args);
    for (std::string a; extra >> a;) args.push_back(a);
  }
  const pid_t relay = spawn(args, dir + "/relay.out", log_file);
  auto stop_relay = [&] {
    kill(relay, SIGTERM);
    int status = 0;
    for (int i = 0; i < 300 && waitpid(relay, &status, WNOHANG) == 0; i++) usleep(10'000);
    if (waitpid(relay, &status, WNOHANG) == 0) {
      kill(relay, SIGKILL);
      waitpid(relay, &status, 0);
    }
  };
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "ice_tcp_cost: %s\n--- relay log (%s) ---\n%s", why.c_str(), log_file.c_str(),
                 read_file(log_file).c_str());
    stop_relay();
    std::exit(1);
  };
  {
    bool ready = false;
    for (int i = 0; i < 500 && !ready; i++) {
      int status = 0;
      if (waitpid(relay, &status, WNOHANG) == relay) fail("the relay exited at start");
      ready = http_get(admin_port, "/readyz").rfind("HTTP/1.1 200", 0) == 0 ||
              http_get(admin_port, "/readyz").rfind("HTTP/1.0 200", 0) == 0;
      if (!ready) usleep(20'000);
    }
    if (!ready) fail("the relay's /readyz did not answer 200 within 10 s");
  }

  std::atomic<bool> quit{false};
  EchoStats echo;
  std::thread echo_thread([&] { echo_main(echo_fd, quit, echo); });

  Clients udp(false, flows, payload, vip_port, keys);
  if (!udp.wait_ready(3'000'000'000, keys)) fail("not every UDP flow's Binding request came back");
  Clients tcp(true, flows, payload, vip_port, keys);
  if (!tcp.wait_ready(3'000'000'000, keys)) fail("not every TCP connection's Binding request came back");

  const std::string machine = machine_description();
  std::vector<PhaseSpec> phases;
  const uint64_t rate = uint64_t{flows} * pps_per_flow;
  for (bool is_tcp : {false, true}) phases.push_back({0, is_tcp, false, rate, 0, 0, 0, 0, 0});
  if (max_phase)
    for (bool is_tcp : {false, true}) phases.push_back({0, is_tcp, true, 0, 0, 0, 0, 0, 0});

  std::vector<Row> rows;
  bool ok = true;
  const long hz = sysconf(_SC_CLK_TCK);
  uint32_t id = 0;
  for (PhaseSpec& spec : phases) {
    spec.id = ++id;
    const double window_s = spec.max ? max_duration_s : duration_s;
    spec.start = now_ns() + 50'000'000;
    spec.window_start = spec.start + static_cast<Nanos>(warmup_s * 1e9);
    spec.window_end = spec.window_start + static_cast<Nanos>(window_s * 1e9);
    spec.stop = spec.window_end;
    spec.drain_end = spec.stop + static_cast<Nanos>(drain_s * 1e9);
    PhaseResult r;
    Clients& clients = spec.tcp ? tcp : udp;
    std::thread load([&] { clients.run(spec, max_window, tick_us * 1000, r); });

    sleep_until(spec.window_start);
    const Metrics m0 = fetch_metrics(admin_port);  // outside the CPU window
    const CpuSample c0 = sample_cpu(relay);
    const Nanos t0 = now_ns();
    sleep_until(spec.window_end);
    const CpuSample c1 = sample_cpu(relay);
    const Nanos t1 = now_ns();
    const Metrics m1 = fetch_metrics(admin_port);
    load.join();

    auto d = [&](const std::string& name, const std::string& lbl = {}) {
      return metric_sum(m1, name, lbl) - metric_sum(m0, name, lbl);
    };
    const double secs = static_cast<double>(t1 - t0) / 1e9;
    const double fwd = d("rtcedge_relay_forwarded_packets_total");
    const double fwd_in = d("rtcedge_relay_forwarded_packets_total", "client_to_transceiver");
    const double tcp_frames = d("rtcedge_relay_tcp_frames_total");
    const double tcp_recv = d("rtcedge_relay_tcp_syscalls_total", "call=\"recv\"");
    const double tcp_send = d("rtcedge_relay_tcp_syscalls_total", "call=\"send\"");
    const double frames_in = d("rtcedge_relay_tcp_frames_total", "client_to_transceiver");
    const double frames_out = tcp_frames - frames_in;
    const double gso_msgs = d("rtcedge_relay_gso_messages_total");
    const double gso_dgrams = d("rtcedge_relay_gso_datagrams_total");
    const double cpu_ticks_us = static_cast<double>(c1.ticks - c0.ticks) * 1e6 / static_cast<double>(hz);
    const double cpu_ns_us = static_cast<double>(c1.run_ns - c0.run_ns) / 1e3;
    const double delivered = r.sent_in_window ? 100.0 * static_cast<double>(r.received_in_window) /
                                                    static_cast<double>(r.sent_in_window)
                                              : 0;
    Row row;
    row.transport = spec.tcp ? "TCP" : "UDP";
    row.load = spec.max ? "max (" + std::to_string(max_window) + " in flight/flow)"
                        : std::to_string(flows) + " x " + std::to_string(pps_per_flow) + " pps";
    row.pps = static_cast<double>(r.sent_in_window) / window_s;
    row.fwd_pps = fwd / secs;
    row.us_ticks = fwd > 0 ? cpu_ticks_us / fwd : 0;
    row.us_ns = fwd > 0 ? cpu_ns_us / fwd : 0;
    row.recv_per_frame = frames_in > 0 ? tcp_recv / frames_in : 0;
    row.send_per_frame = frames_out > 0 ? tcp_send / frames_out : 0;
    // Messages to the endpoint: a GSO message per run of equal-size datagrams, else one each.
    row.msgs_per_dgram = fwd_in > 0 ? (gso_msgs + fwd_in - gso_dgrams) / fwd_in : 0;
    const double wakeups = static_cast<double>(c1.sleeps - c0.sleeps);
    row.wakeups_per_pkt = fwd > 0 ? wakeups / fwd : 0;
    row.delivered = delivered;
    row.tcp_frames = tcp_frames;
    row.tcp_recv = tcp_recv;
    row.tcp_send = tcp_send;
    rows.push_back(row);
    std::printf(
        "RESULT label=%s phase=%u transport=%s load=%s window_s=%.2f flows=%u payload=%zu offered_pps=%.0f "
        "sent=%llu received=%llu delivered_pct=%.2f send_errors=%llu relay_fwd_pkts=%.0f relay_fwd_pps=%.0f "
        "relay_cpu_ms_ticks=%.1f relay_sys_ms_ticks=%.1f relay_cpu_ms_ns=%.2f relay_us_per_pkt_ticks=%.3f "
        "relay_us_per_pkt_ns=%.3f "
        "tcp_frames=%.0f tcp_frames_in=%.0f tcp_frames_out=%.0f tcp_recv_calls=%.0f tcp_send_calls=%.0f "
        "recv_per_frame=%.3f send_per_frame=%.3f gso_msgs=%.0f gso_dgrams=%.0f endpoint_msgs_per_dgram=%.3f "
        "relay_wakeups=%.0f wakeups_per_pkt=%.3f echo_phase_dgrams=%llu\n",
        label.c_str(), spec.id, row.transport.c_str(), spec.max ? "max" : std::to_string(rate).c_str(),
        window_s, flows, payload, row.pps, static_cast<unsigned long long>(r.sent_in_window),
        static_cast<unsigned long long>(r.received_in_window), delivered,
        static_cast<unsigned long long>(r.send_errors), fwd, row.fwd_pps, cpu_ticks_us / 1e3,
        static_cast<double>(c1.stime - c0.stime) * 1e3 / static_cast<double>(hz), cpu_ns_us / 1e3,
        row.us_ticks, row.us_ns, tcp_frames, frames_in, frames_out, tcp_recv, tcp_send, row.recv_per_frame,
        row.send_per_frame, gso_msgs, gso_dgrams, row.msgs_per_dgram, wakeups, row.wakeups_per_pkt,
        static_cast<unsigned long long>(echo.per_phase[std::min<size_t>(spec.id, kMaxPhases)].load()));
    std::fflush(stdout);
    if (delivered <= 90.0) {
      std::fprintf(stderr, "ice_tcp_cost: phase %u (%s %s) delivered %.2f %% back\n", spec.id,
                   row.transport.c_str(), spec.max ? "max" : "paced", delivered);
      ok = false;
    }
    if (spec.tcp && (frames_in <= 0 || frames_out <= 0 || tcp_recv <= 0 || tcp_send <= 0)) {
      std::fprintf(stderr, "ice_tcp_cost: phase %u: the relay's TCP counters did not move\n", spec.id);
      ok = false;
    }
    usleep(100'000);
  }
  const Metrics final_metrics = fetch_metrics(admin_port);
  quit.store(true, std::memory_order_release);
  echo_thread.join();

  // The table: ratios against the UDP row of the same load.
  std::printf("\nmachine: %s\n", machine.c_str());
  std::printf(
      "relay: userspace, 1 worker, not pinned; %u flows, %zu-byte payloads; CPU = relay process "
      "utime+stime (schedstat ns in brackets) / packets it forwarded, both directions\n\n",
      flows, payload);
  std::printf(
      "| transport | load | offered pps | relay fwd pps (both dirs) | relay CPU µs/packet | TCP/UDP | "
      "recv/frame | send/frame | messages to endpoint/datagram | relay wake-ups/packet | delivered %% |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < rows.size(); i++) {
    const Row& w = rows[i];
    std::string ratio = "1.00";
    if (w.transport == "TCP" && i > 0 && rows[i - 1].us_ns > 0) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2f", w.us_ns / rows[i - 1].us_ns);
      ratio = b;
    }
    char recv_s[32] = "–", send_s[32] = "–";
    if (w.transport == "TCP") {
      std::snprintf(recv_s, sizeof recv_s, "%.2f", w.recv_per_frame);
      std::snprintf(send_s, sizeof send_s, "%.2f", w.send_per_frame);
    }
    std::printf("| %s | %s | %.0f | %.0f | %.2f (%.2f) | %s | %s | %s | %.2f | %.2f | %.2f |\n",
                w.transport.c_str(), w.load.c_str(), w.pps, w.fwd_pps, w.us_ticks, w.us_ns, ratio.c_str(),
                recv_s, send_s, w.msgs_per_dgram, w.wakeups_per_pkt, w.delivered);
  }
  std::printf("\necho: %llu datagrams (%llu STREAM, %llu DGRAM, %llu unframed); relay TCP closed: %s\n",
              static_cast<unsigned long long>(echo.datagrams.load()),
              static_cast<unsigned long long>(echo.stream.load()),
              static_cast<unsigned long long>(echo.dgram.load()),
              static_cast<unsigned long long>(echo.unframed.load()),
              [&] {
                std::string s;
                for (const auto& [k, v] : final_metrics)
                  if (k.rfind("rtcedge_relay_tcp_closed_total", 0) == 0 && v > 0)
                    s += k.substr(k.find('{')) + "=" + std::to_string(static_cast<long long>(v)) + " ";
                return s.empty() ? std::string("none") : s;
              }()
                  .c_str());
  if (echo.stream.load() == 0) {
    std::fprintf(stderr, "ice_tcp_cost: the echo saw no PROXY v2 STREAM datagram\n");
    ok = false;
  }
  stop_relay();
  close(echo_fd);
  std::remove(key_file.c_str());
  std::remove(log_file.c_str());
  std::remove((dir + "/relay.out").c_str());
  rmdir(dir.c_str());
  return check && !ok ? 1 : 0;
}
