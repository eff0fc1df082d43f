// session_loadgen.cpp — rtce_session_loadgen: opens N real WebRTC audio sessions against
// rtcedge-transceiver (directly or through a relay VIP: whatever candidate the answer
// names) and measures what a caller would hear: setup rate, time to connected, and the
// spacing of the transceiver's echoed frames (bench/run_session_bench.sh,
// docs/benchmarks.md).
//
// Threads: a few setup threads POST offers over blocking keep-alive HTTP (setup path only)
// and hand each answer to ONE event-loop thread, which owns every client (one connected
// UDP socket each, so each session has its own source port): epoll + recvmmsg with kernel
// receive timestamps, a min-heap of 20 ms send deadlines, and a timer scan every few ms for
// ICE checks, consent and DTLS retransmission. Each client resends one pre-encoded Opus
// frame, so the generator stays cheap next to the transceiver it measures.
//
// Phases: setup (until every session connected or failed) -> warm-up -> measurement window
// (only frames arriving inside it count) -> DELETE every session. Everything is bounded by
// --connect-timeout, --warmup and --seconds. Output: a table on stdout and, with
// --json-out, the same figures as JSON (with each session's setup phases). Exit status 0,
// or 1 with --expect-all-connected when a session failed to connect or received no
// authenticated echo, or with --expect-alive-at-end when a connected session stopped
// echoing before the end of the window.
//
// --client-profile browser|pion picks how the clients run ICE (session_loadgen/
// client_ice_agent.h): Chrome-like (every check nominates, consent every 2.5 s) or Pion-like
// (regular nomination on a 200 ms tick, DTLS only after ICE is connected, and with
// --consent-checks none no STUN at all once connected).
//
// --floor ADDR drives bench/floor_echo.cpp instead: no HTTP, ICE or DTLS; each session is
// one UDP socket sending the same SRTP (AEAD_AES_128_GCM, keys from --floor-key) at the same
// rate, so one client measures the transceiver, the Pion echo server and the floor alike
// (bench/run_peers_bench.sh). --server-pid (alias of --transceiver-pid) names the process
// measured: CPU, VmRSS idle and in the window, and each thread's context switches over the
// window (the JSON's "server"); --window-command runs a command (a perf record) for the
// window.
//
// --data-channel makes every session a Realtime call with its event channel: the offer adds
// m=application, goes to POST /v1/realtime/calls, and once DTLS connects the client runs an
// SCTP association and opens `oai-events` (the transceiver's event layer answers with
// session.created); audio flows as without it. The JSON counts the channels opened and the
// events received; --expect-all-connected then also wants every channel open.
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <thread>
#include <vector>

#include "audio/opus_codec.h"
#include "bench_util.h"
#include "clock.h"
#include "dtls/dtls_certificate.h"
#include "session_loadgen/http_client.h"
#include "session_loadgen/webrtc_client.h"

namespace rtce::loadgen {
namespace {

constexpr Nanos kMs = 1'000'000, kSecond = 1'000'000'000;
constexpr Nanos kFramePeriod = 20 * kMs;
constexpr Nanos kTimerScanPeriod = 5 * kMs;
constexpr size_t kRecvBatch = 8;
constexpr size_t kMaxDatagram = 2048;
constexpr size_t kCmsgSpace = 64;

struct Options {
  std::string url = "http://127.0.0.1:8080";
  uint32_t sessions = 10;
  double seconds = 10;
  double warmup = 2;
  double setup_rate = 0;  // 0 = as fast as the setup threads go
  uint32_t setup_concurrency = 2;
  double connect_timeout = 10;
  std::string local_ip = "127.0.0.1";
  int transceiver_pid = 0;
  int relay_pid = 0;
  std::string json_out;
  std::string label;
  std::string srtp_profile = "any";
  bool expect_all_connected = false;
  bool expect_alive_at_end = false;
  std::string client_profile = "browser";
  std::string consent_checks;  // empty: the profile's own (browser periodic, pion on-silence)
  bool send_audio = true;
  bool delete_sessions = true;
  double interval_target_ms = 20, interval_tolerance_ms = 5;
  std::string floor;      // ip:port of a floor echo: no signaling, ICE or DTLS
  std::string floor_key;  // hex: client master key || salt, then the server's (GCM)
  std::string window_command;
  std::string write_opus_frame;
  bool data_channel = false;  // Realtime calls with the oai-events channel (see above)
};

using rtce::bench::sleep_until;

Nanos realtime_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

// "http://host:port[/...]" -> host:port.
SocketAddress parse_base_url(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (auto slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  if (rest.find(':') == std::string::npos) rest += ":80";
  if (rest.rfind("localhost:", 0) == 0) rest = "127.0.0.1" + rest.substr(9);
  auto addr = SocketAddress::parse(rest);
  if (!addr) throw std::runtime_error("--url " + url + ": want http://<ip>:<port>");
  return *addr;
}

// One 20 ms Opus frame of a 440 Hz tone, encoded after a few frames of warm-up so it is a
// steady-state packet rather than the encoder's first.
std::vector<uint8_t> encode_tone_frame() {
  constexpr int kRate = 48000;
  OpusEncoderConfig config;
  OpusEncoderHandle encoder(kRate, config);
  std::vector<int16_t> pcm(samples_per_20ms(kRate));
  std::vector<uint8_t> out(1275);
  int len = 0;
  size_t t = 0;
  for (int frame = 0; frame < 6; ++frame) {
    for (auto& s : pcm)
      s = static_cast<int16_t>(8000 * std::sin(2 * M_PI * 440.0 * static_cast<double>(t++) / kRate));
    len = encoder.encode(pcm, out);
    if (len <= 0) throw std::runtime_error("opus encode failed: " + std::to_string(len));
  }
  out.resize(static_cast<size_t>(len));
  return out;
}

// utime + stime of a process in seconds; -1 when it cannot be read.
double process_cpu_seconds(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string tok;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> tok; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stod(tok);
    if (i == 15) stime = std::stod(tok);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double self_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// VmRSS in KiB; -1 when unknown.
long rss_kib(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// Nearest-rank percentile of an unsorted sample (sorted in place).
double percentile(std::vector<float>& v, double q) {
  if (v.empty()) return NAN;
  const size_t k =
      std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - (q > 0));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

double percentile_d(std::vector<double> v, double q) {
  std::vector<float> f(v.begin(), v.end());
  return percentile(f, q);
}

// What a setup thread hands to the event loop.
struct SetupResult {
  uint32_t index = 0;
  Nanos post_started = 0;
  Nanos answered_at = 0;
  ClientOffer offer;
  std::optional<ParsedAnswer> answer;
  std::string location;
  std::string error;  // set when the setup failed before any packet
  uint32_t http_retries = 0;
};

class SetupQueue {
 public:
  SetupQueue() : wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~SetupQueue() { ::close(wake_fd_); }
  int wake_fd() const { return wake_fd_; }
  void push(SetupResult r) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(std::move(r));
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  std::vector<SetupResult> take() {
    uint64_t drained;
    (void)!::read(wake_fd_, &drained, sizeof drained);
    std::lock_guard lock(mutex_);
    return std::exchange(items_, {});
  }

 private:
  int wake_fd_;
  std::mutex mutex_;
  std::vector<SetupResult> items_;
};

void run_setup_thread(const Options& opt, const SocketAddress& server, const std::string& fingerprint,
                      std::atomic<uint32_t>& next_index, Nanos t0, SetupQueue& queue) {
  HttpClient http(server, static_cast<Nanos>(opt.connect_timeout * kSecond));
  const Nanos connect_timeout = static_cast<Nanos>(opt.connect_timeout * kSecond);
  for (uint32_t i; (i = next_index.fetch_add(1)) < opt.sessions;) {
    if (opt.setup_rate > 0)
      sleep_until(t0 + static_cast<Nanos>(static_cast<double>(i) * kSecond / opt.setup_rate));
    SetupResult r;
    r.index = i;
    r.offer = make_client_offer();
    if (!opt.floor.empty()) {  // the floor echo: the "answer" is its address, nothing is posted
      r.post_started = r.answered_at = monotonic_now();
      r.answer.emplace();
      r.answer->candidate = server;
      queue.push(std::move(r));
      continue;
    }
    const std::string sdp = build_offer_sdp(r.offer, fingerprint, opt.data_channel);
    const char* path = opt.data_channel ? "/v1/realtime/calls" : "/v1/sessions";
    r.post_started = monotonic_now();
    for (;;) {
      HttpResult res = http.request("POST", path, "application/sdp", sdp);
      if (res.status == 201) {
        r.answered_at = monotonic_now();
        r.location = res.location;
        std::string error;
        r.answer = parse_answer_sdp(res.body, error);
        if (!r.answer) r.error = "bad answer: " + error;
        break;
      }
      // Rate limited or full: retry within the connect budget (counted; the report shows it).
      if ((res.status == 429 || res.status == 503) && monotonic_now() - r.post_started < connect_timeout) {
        ++r.http_retries;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      r.error = res.status ? "http " + std::to_string(res.status) + ": " + res.body.substr(0, 200)
                           : "http: " + res.error;
      break;
    }
    queue.push(std::move(r));
  }
}

// UDP receive-buffer overflows, host-wide (/proc/net/snmp): on a loopback-only bench they
// are this run's datagrams dropped by a socket whose reader fell behind.
long udp_rcvbuf_errors() {
  std::ifstream f("/proc/net/snmp");
  std::string header, values;
  while (std::getline(f, header) && std::getline(f, values)) {
    if (header.rfind("Udp:", 0) != 0) continue;
    std::istringstream names(header), nums(values);
    std::string name, num;
    while (names >> name && nums >> num)
      if (name == "RcvbufErrors") return std::stol(num);
  }
  return -1;
}

// One thread of the measured server: its name and context switches so far. Voluntary ones
// are the thread blocking (each followed by a wake-up); nonvoluntary ones are preemptions.
struct ThreadSample {
  std::string name;
  long voluntary = 0, nonvoluntary = 0;
};

std::map<int, ThreadSample> thread_samples(int pid) {
  std::map<int, ThreadSample> out;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const std::string tid = entry.path().filename();
    std::ifstream f(entry.path() / "status");
    ThreadSample t;
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("Name:", 0) == 0) t.name = line.substr(line.find_first_not_of(" \t", 5));
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) t.voluntary = std::stol(line.substr(24));
      if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) t.nonvoluntary = std::stol(line.substr(27));
    }
    if (!t.name.empty()) out[std::stoi(tid)] = std::move(t);
  }
  return out;
}

struct CpuMark {
  Nanos at = 0;
  double transceiver = 0, relay = 0, self = 0;
  long rcvbuf_errors = 0;
  std::map<int, ThreadSample> threads;  // of the transceiver (server) pid
};

CpuMark cpu_mark(const Options& opt) {
  CpuMark m;
  m.at = monotonic_now();
  if (opt.transceiver_pid) m.threads = thread_samples(opt.transceiver_pid);
  if (opt.transceiver_pid) m.transceiver = process_cpu_seconds(opt.transceiver_pid);
  if (opt.relay_pid) m.relay = process_cpu_seconds(opt.relay_pid);
  m.self = self_cpu_seconds();
  m.rcvbuf_errors = udp_rcvbuf_errors();
  return m;
}

nlohmann::json cpu_between(const Options& opt, const CpuMark& a, const CpuMark& b) {
  const double wall = static_cast<double>(b.at - a.at) * 1e-9;
  nlohmann::json j;
  j["wall_s"] = wall;
  if (wall <= 0) return j;
  if (opt.transceiver_pid) j["transceiver_cores"] = (b.transceiver - a.transceiver) / wall;
  if (opt.relay_pid) j["relay_cores"] = (b.relay - a.relay) / wall;
  j["loadgen_cores"] = (b.self - a.self) / wall;
  j["udp_rcvbuf_errors"] = b.rcvbuf_errors - a.rcvbuf_errors;
  return j;
}

// The measured server over the window, in the shape bench/pion/client writes too: CPU
// seconds, VmRSS idle (before the first session) and at the window's end, and the context
// switches of each thread alive at the end (a thread born in the window counts from 0).
nlohmann::json server_between(const Options& opt, const CpuMark& a, const CpuMark& b, long rss_idle,
                              long rss_end) {
  nlohmann::json j;
  j["pid"] = opt.transceiver_pid;
  j["window_s"] = static_cast<double>(b.at - a.at) * 1e-9;
  j["cpu_s"] = b.transceiver - a.transceiver;
  j["rss_kib_idle"] = rss_idle;
  j["rss_kib_window_end"] = rss_end;
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& [tid, t] : b.threads) {
    const auto before = a.threads.find(tid);
    const ThreadSample zero;
    const ThreadSample& s = before == a.threads.end() ? zero : before->second;
    threads.push_back({{"tid", tid},
                       {"name", t.name},
                       {"voluntary", t.voluntary - s.voluntary},
                       {"nonvoluntary", t.nonvoluntary - s.nonvoluntary}});
  }
  j["threads"] = std::move(threads);
  return j;
}

// --window-command: /bin/sh -c CMD, started when the window opens; its pid, or -1.
pid_t spawn_shell(const std::string& cmd) {
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) return -1;
  return pid;
}

// Waits for it up to `budget`, then kills it: a hung profiler must not hang the run.
void reap(pid_t pid, Nanos budget) {
  if (pid <= 0) return;
  const Nanos until = monotonic_now() + budget;
  while (waitpid(pid, nullptr, WNOHANG) == 0) {
    if (monotonic_now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

nlohmann::json selected_metrics(HttpClient& http) {
  nlohmann::json out = nlohmann::json::object();
  const HttpResult res = http.request("GET", "/metrics");
  if (res.status != 200) return out;
  std::istringstream in(res.body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.find("_bucket") != std::string::npos) continue;
    if (line.rfind("rtcedge_transceiver_", 0) != 0) continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const double value = std::atof(line.c_str() + space + 1);
    if (value != 0) out[line.substr(20, space - 20)] = value;
  }
  return out;
}

struct LoopResult {
  std::vector<std::unique_ptr<WebRtcClient>> clients;  // by session index; null = setup failed
  std::vector<SetupResult> setup_failures;
  uint64_t http_retries = 0;
  Nanos first_post = INT64_MAX, last_connected = 0, all_resolved_at = 0;
  Nanos window_start = 0, window_end = 0;
  CpuMark cpu_window_start, cpu_window_end, cpu_setup_start, cpu_setup_end;
  long rss_before = -1, rss_after = -1;
  pid_t window_command = -1;
  uint64_t sends_late_5ms = 0;  // window only
  Nanos max_send_lateness = 0;  // window only
  uint64_t failed_after_connect = 0;
};

class EventLoop {
 public:
  EventLoop(const Options& opt, const ClientConfig& config, SetupQueue& queue, LoopResult& out)
      : opt_(opt), config_(config), queue_(queue), out_(out), epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {
    out_.clients.resize(opt.sessions);
    known_state_.assign(opt.sessions, WebRtcClient::State::connecting);
    next_timer_.assign(opt.sessions, INT64_MAX);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = UINT32_MAX;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, queue_.wake_fd(), &ev);
    auto local = SocketAddress::parse(opt.local_ip.find(':') != std::string::npos ? "[" + opt.local_ip + "]:0"
                                                                                  : opt.local_ip + ":0");
    if (!local) throw std::runtime_error("--local-ip " + opt.local_ip + " is not an IP address");
    local_ip_ = *local;
    for (size_t i = 0; i < kRecvBatch; ++i) {
      iov_[i] = {buffers_[i], kMaxDatagram};
      msgs_[i].msg_hdr.msg_iov = &iov_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
    }
  }
  ~EventLoop() { ::close(epoll_fd_); }

  void run() {
    const Nanos warmup = static_cast<Nanos>(opt_.warmup * kSecond);
    const Nanos measure = static_cast<Nanos>(opt_.seconds * kSecond);
    Nanos next_scan = 0;
    Nanos clock_offset = realtime_now() - monotonic_now();
    epoll_event events[256];
    for (;;) {
      Nanos now = monotonic_now();
      if (now >= next_scan) {
        clock_offset = realtime_now() - monotonic_now();
        scan_timers(now);
        next_scan = now + kTimerScanPeriod;
      }
      run_sends(now);
      if (!out_.all_resolved_at && resolved_ == opt_.sessions) {
        out_.all_resolved_at = now;
        out_.cpu_setup_end = cpu_mark(opt_);
        out_.window_start = now + warmup;
        out_.window_end = out_.window_start + measure;
        for (auto& c : out_.clients)
          if (c) c->set_window(out_.window_start, out_.window_end);
      }
      if (out_.all_resolved_at) {
        if (!window_started_ && now >= out_.window_start) {
          window_started_ = true;
          out_.cpu_window_start = cpu_mark(opt_);
          if (!opt_.window_command.empty()) out_.window_command = spawn_shell(opt_.window_command);
        }
        if (now >= out_.window_end) {
          out_.cpu_window_end = cpu_mark(opt_);
          if (opt_.transceiver_pid) out_.rss_after = rss_kib(opt_.transceiver_pid);
          return;
        }
      }
      Nanos wake = next_scan;
      if (!sends_.empty()) wake = std::min(wake, sends_.top().first);
      if (out_.all_resolved_at) wake = std::min(wake, window_started_ ? out_.window_end : out_.window_start);
      now = monotonic_now();
      const int timeout_ms = wake <= now ? 0 : static_cast<int>((wake - now + kMs - 1) / kMs);
      const int n = epoll_wait(epoll_fd_, events, 256, timeout_ms);
      now = monotonic_now();
      for (int e = 0; e < n; ++e) {
        const uint32_t index = events[e].data.u32;
        if (index == UINT32_MAX) {
          accept_setups(now);
          continue;
        }
        drain(index, clock_offset, now);
      }
    }
  }

 private:
  void accept_setups(Nanos now) {
    for (SetupResult& r : queue_.take()) {
      out_.first_post = std::min(out_.first_post, r.post_started);
      out_.http_retries += r.http_retries;
      if (r.error.empty()) {
        try {
          auto client =
              std::make_unique<WebRtcClient>(r.index, config_, std::move(r.offer), std::move(*r.answer),
                                             std::move(r.location), r.post_started, r.answered_at, local_ip_);
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u32 = r.index;
          epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, client->fd(), &ev);
          client->start(now);
          next_timer_[r.index] = client->next_wakeup(now);
          out_.clients[r.index] = std::move(client);
          observe(r.index, now);  // a floor-mode client is connected from start()
          continue;
        } catch (const std::exception& e) {
          r.error = e.what();
        }
      }
      ++resolved_;
      out_.setup_failures.push_back(std::move(r));
    }
  }

  // A client changed state: count it, start its frames once connected.
  void observe(uint32_t index, Nanos now) {
    WebRtcClient& c = *out_.clients[index];
    if (c.state() == known_state_[index]) return;
    const auto before = known_state_[index];
    known_state_[index] = c.state();
    if (c.state() == WebRtcClient::State::connected) {
      ++resolved_;
      out_.last_connected = std::max(out_.last_connected, c.connected_at());
      sends_.emplace(now, index);
    } else if (c.state() == WebRtcClient::State::failed) {
      if (before == WebRtcClient::State::connected)
        ++out_.failed_after_connect;
      else
        ++resolved_;
    }
  }

  void scan_timers(Nanos now) {
    for (uint32_t i = 0; i < out_.clients.size(); ++i) {
      if (!out_.clients[i] || next_timer_[i] > now) continue;
      next_timer_[i] = out_.clients[i]->on_timer(now);
      observe(i, now);
    }
  }

  void run_sends(Nanos now) {
    while (!sends_.empty() && sends_.top().first <= now) {
      auto [due, index] = sends_.top();
      sends_.pop();
      WebRtcClient& c = *out_.clients[index];
      if (c.state() != WebRtcClient::State::connected) continue;
      const Nanos late = now - due;
      if (window_started_ && now < out_.window_end) {
        out_.max_send_lateness = std::max(out_.max_send_lateness, late);
        if (late > 5 * kMs) ++out_.sends_late_5ms;
      }
      c.send_frame(now);
      // A generator that fell more than a frame behind skips ahead rather than bursting.
      sends_.emplace(late > kFramePeriod ? now + kFramePeriod : due + kFramePeriod, index);
    }
  }

  void drain(uint32_t index, Nanos clock_offset, Nanos now) {
    WebRtcClient& c = *out_.clients[index];
    for (int round = 0; round < 4; ++round) {
      for (size_t i = 0; i < kRecvBatch; ++i) {
        msgs_[i].msg_hdr.msg_control = cmsg_[i];
        msgs_[i].msg_hdr.msg_controllen = kCmsgSpace;
        msgs_[i].msg_hdr.msg_flags = 0;
      }
      const int n = recvmmsg(c.fd(), msgs_, kRecvBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i) {
        Nanos arrival = now;
        for (cmsghdr* cm = CMSG_FIRSTHDR(&msgs_[i].msg_hdr); cm; cm = CMSG_NXTHDR(&msgs_[i].msg_hdr, cm)) {
          if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
            timespec ts;
            std::memcpy(&ts, CMSG_DATA(cm), sizeof ts);
            arrival = static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec - clock_offset;
          }
        }
        c.handle_datagram({buffers_[i], msgs_[i].msg_len}, arrival, now);
      }
      if (static_cast<size_t>(n) < kRecvBatch) break;
    }
    // A datagram may have moved a deadline earlier (a DTLS flight sent, ICE connected).
    next_timer_[index] = std::min(next_timer_[index], c.next_wakeup(now));
    observe(index, now);
  }

  const Options& opt_;
  const ClientConfig& config_;
  SetupQueue& queue_;
  LoopResult& out_;
  int epoll_fd_;
  SocketAddress local_ip_;
  uint32_t resolved_ = 0;  // connected or failed
  bool window_started_ = false;
  std::vector<WebRtcClient::State> known_state_;
  std::vector<Nanos> next_timer_;
  std::priority_queue<std::pair<Nanos, uint32_t>, std::vector<std::pair<Nanos, uint32_t>>, std::greater<>>
      sends_;

  uint8_t buffers_[kRecvBatch][kMaxDatagram];
  alignas(cmsghdr) uint8_t cmsg_[kRecvBatch][kCmsgSpace];
  iovec iov_[kRecvBatch];
  mmsghdr msgs_[kRecvBatch]{};
};

void delete_sessions(const Options& opt, const SocketAddress& server, const LoopResult& r) {
  std::vector<std::string> paths;
  for (const auto& c : r.clients)
    if (c && !c->location().empty()) paths.push_back(c->location());
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < std::max(1u, opt.setup_concurrency); ++t)
    threads.emplace_back([&] {
      HttpClient http(server, 2 * kSecond);
      for (size_t i; (i = next.fetch_add(1)) < paths.size();) http.request("DELETE", paths[i]);
    });
  for (auto& t : threads) t.join();
}

nlohmann::json summarize(const Options& opt, const ClientConfig& config, LoopResult& r,
                         nlohmann::json metrics, long rss_after_delete, int& exit_code) {
  using nlohmann::json;
  json j;
  j["label"] = opt.label;
  j["sessions_requested"] = opt.sessions;
  uint32_t connected = 0, failed = 0;
  std::vector<double> ttc_ms, answer_ms, ice_ms, ice_connected_ms, first_echo_ms;
  json per_session = json::array();
  uint32_t alive_at_end = 0;
  uint64_t stun_after_connected = 0, stun_requests_answered = 0, stun_requests_refused = 0,
           role_conflicts = 0, dtls_dropped_before_ice = 0;
  // Alive at the end: an authenticated echo within the last second of the window.
  const Nanos alive_since = r.window_end - kSecond;
  auto ms_since_post = [](const WebRtcClient& c, Nanos t) -> json {
    return t ? json(static_cast<double>(t - c.post_started()) * 1e-6) : json();
  };
  std::map<std::string, uint32_t> failures;
  for (const auto& f : r.setup_failures) ++failures[f.error.substr(0, 80)];
  std::vector<float> pooled;
  uint64_t window_frames = 0, seq_gaps = 0, auth_failed = 0, rtp_received = 0, rtcp_received = 0,
           identical = 0;
  uint64_t stun_failed = 0, rtp_sent = 0, send_errors = 0;
  uint64_t channels_open = 0, channel_messages = 0;
  std::map<std::string, uint32_t> channel_failures;
  uint32_t within = 0, no_echo = 0;
  std::vector<double> session_p99;
  std::map<std::string, uint32_t> profiles;
  const double lo = opt.interval_target_ms - opt.interval_tolerance_ms;
  const double hi = opt.interval_target_ms + opt.interval_tolerance_ms;
  for (auto& c : r.clients) {
    if (!c) continue;
    const ClientStats& st = c->stats();
    per_session.push_back(
        {{"index", c->index()},
         {"state", to_string(c->state())},
         {"failure", c->failure()},
         {"answer_ms", ms_since_post(*c, c->answered_at())},
         {"ice_success_ms", ms_since_post(*c, c->ice_ok_at())},
         {"ice_connected_ms", ms_since_post(*c, c->ice_connected_at())},
         {"dtls_connected_ms", ms_since_post(*c, c->connected_at())},
         {"first_echo_ms", ms_since_post(*c, c->first_echo_at())},
         {"alive_at_end", c->last_echo_at() >= alive_since && c->state() == WebRtcClient::State::connected},
         {"stun_sent", st.stun_sent},
         {"stun_sent_after_ice_connected", st.stun_sent_after_ice_connected},
         {"stun_requests_answered", st.stun_requests_answered},
         {"dtls_dropped_before_ice", st.dtls_dropped_before_ice}});
    stun_after_connected += st.stun_sent_after_ice_connected;
    stun_requests_answered += st.stun_requests_answered;
    stun_requests_refused += st.stun_requests_refused;
    role_conflicts += st.role_conflicts;
    dtls_dropped_before_ice += st.dtls_dropped_before_ice;
    if (c->connected_at() == 0) {
      ++failed;
      ++failures[c->failure().substr(0, 80)];
      continue;
    }
    if (c->last_echo_at() >= alive_since && c->state() == WebRtcClient::State::connected) ++alive_at_end;
    if (c->ice_connected_at())
      ice_connected_ms.push_back(static_cast<double>(c->ice_connected_at() - c->post_started()) * 1e-6);
    if (c->first_echo_at())
      first_echo_ms.push_back(static_cast<double>(c->first_echo_at() - c->post_started()) * 1e-6);
    ++connected;
    ++profiles[c->srtp_profile()];
    ttc_ms.push_back(static_cast<double>(c->connected_at() - c->post_started()) * 1e-6);
    answer_ms.push_back(static_cast<double>(c->answered_at() - c->post_started()) * 1e-6);
    if (c->ice_ok_at()) ice_ms.push_back(static_cast<double>(c->ice_ok_at() - c->post_started()) * 1e-6);
    const ClientStats& s = c->stats();
    window_frames += s.window_frames;
    seq_gaps += s.window_seq_gaps;
    auth_failed += s.rtp_auth_failed;
    rtp_received += s.rtp_received;
    rtcp_received += s.rtcp_received;
    identical += s.payload_identical;
    stun_failed += s.stun_failed;
    rtp_sent += s.rtp_sent;
    send_errors += s.send_errors;
    channels_open += s.channel_open;
    channel_messages += s.channel_messages_in;
    if (!s.channel_failure.empty()) ++channel_failures[s.channel_failure.substr(0, 80)];
    if (s.rtp_received == 0) ++no_echo;
    pooled.insert(pooled.end(), s.intervals_ms.begin(), s.intervals_ms.end());
    if (s.intervals_ms.size() >= 2) {
      std::vector<float> mine = s.intervals_ms;
      const double p99 = percentile(mine, 0.99);
      session_p99.push_back(p99);
      if (p99 >= lo && p99 <= hi) ++within;
    }
  }
  failed += static_cast<uint32_t>(r.setup_failures.size());
  j["sessions_connected"] = connected;
  j["sessions_failed"] = failed;
  j["sessions_failed_after_connect"] = r.failed_after_connect;
  j["failure_reasons"] = failures;
  j["srtp_profiles"] = profiles;
  j["http_retries"] = r.http_retries;
  const double setup_span =
      r.last_connected > r.first_post ? static_cast<double>(r.last_connected - r.first_post) * 1e-9 : 0;
  j["setup_span_s"] = setup_span;
  j["setup_rate_per_s"] = setup_span > 0 ? connected / setup_span : 0.0;
  j["time_to_connected_ms"] = {
      {"p50", percentile_d(ttc_ms, 0.5)},
      {"p99", percentile_d(ttc_ms, 0.99)},
      {"max", ttc_ms.empty() ? NAN : *std::max_element(ttc_ms.begin(), ttc_ms.end())}};
  // The phases of time to connected, each from POST start: answer received, first STUN success.
  j["time_to_answer_ms"] = {{"p50", percentile_d(answer_ms, 0.5)}, {"p99", percentile_d(answer_ms, 0.99)}};
  j["time_to_ice_ms"] = {{"p50", percentile_d(ice_ms, 0.5)}, {"p99", percentile_d(ice_ms, 0.99)}};
  j["time_to_ice_connected_ms"] = {{"p50", percentile_d(ice_connected_ms, 0.5)},
                                   {"p99", percentile_d(ice_connected_ms, 0.99)}};
  // POST start -> DTLS connected and the first authenticated echoed RTP: what a caller waits.
  j["time_to_first_echo_ms"] = {
      {"p50", percentile_d(first_echo_ms, 0.5)},
      {"p99", percentile_d(first_echo_ms, 0.99)},
      {"max", first_echo_ms.empty() ? NAN : *std::max_element(first_echo_ms.begin(), first_echo_ms.end())}};
  j["client_profile"] = to_string(config.profile);
  j["consent_checks"] = to_string(config.consent);
  j["sessions_alive_at_end"] = alive_at_end;
  j["stun_sent_after_ice_connected"] = stun_after_connected;
  j["stun_requests_answered"] = stun_requests_answered;
  j["stun_requests_refused"] = stun_requests_refused;
  j["role_conflicts"] = role_conflicts;
  j["dtls_dropped_before_ice"] = dtls_dropped_before_ice;
  j["sessions"] = std::move(per_session);
  j["cpu_setup"] = cpu_between(opt, r.cpu_setup_start, r.cpu_setup_end);
  const double window_s = static_cast<double>(r.window_end - r.window_start) * 1e-9;
  j["window_s"] = window_s;
  j["frame_interval_ms"] = {{"p50", percentile(pooled, 0.5)},
                            {"p99", percentile(pooled, 0.99)},
                            {"p999", percentile(pooled, 0.999)},
                            {"max", pooled.empty() ? NAN : *std::max_element(pooled.begin(), pooled.end())},
                            {"samples", pooled.size()}};
  j["session_p99_interval_ms"] = {
      {"p50", percentile_d(session_p99, 0.5)},
      {"max", session_p99.empty() ? NAN : *std::max_element(session_p99.begin(), session_p99.end())}};
  j["interval_band_ms"] = {lo, hi};
  j["sessions_p99_within_band"] = within;
  j["fraction_p99_within_band"] = opt.sessions ? static_cast<double>(within) / opt.sessions : 0.0;
  const double expected = static_cast<double>(connected) * window_s * 1e9 / static_cast<double>(kFramePeriod);
  j["frames_received_in_window"] = window_frames;
  j["frames_expected_in_window"] = std::llround(expected);
  j["frames_received_ratio"] = expected > 0 ? static_cast<double>(window_frames) / expected : 0.0;
  j["frames_missing_by_seq"] = seq_gaps;
  j["rtp_sent"] = rtp_sent;
  j["rtp_received_authenticated"] = rtp_received;
  j["rtp_auth_failed"] = auth_failed;
  j["rtcp_received_authenticated"] = rtcp_received;
  j["echo_payload_identical"] = identical;
  j["sessions_without_echo"] = no_echo;
  j["stun_checks_unanswered"] = stun_failed;
  j["send_errors"] = send_errors;
  j["opus_frame_bytes"] = config.opus_frame.size();
  if (opt.data_channel) {
    j["data_channels_open"] = channels_open;
    j["data_channel_messages_received"] = channel_messages;
    j["data_channel_failures"] = channel_failures;
  }
  j["cpu_window"] = cpu_between(opt, r.cpu_window_start, r.cpu_window_end);
  j["loadgen_sends_late_5ms"] = r.sends_late_5ms;
  j["loadgen_max_send_lateness_ms"] = static_cast<double>(r.max_send_lateness) * 1e-6;
  if (opt.transceiver_pid) {
    j["transceiver_rss_kib"] = {
        {"before", r.rss_before}, {"after", r.rss_after}, {"after_delete", rss_after_delete}};
    j["transceiver_kib_per_session"] = connected && r.rss_before > 0 && r.rss_after > 0
                                           ? static_cast<double>(r.rss_after - r.rss_before) / connected
                                           : NAN;
  }
  if (opt.transceiver_pid)
    j["server"] = server_between(opt, r.cpu_window_start, r.cpu_window_end, r.rss_before, r.rss_after);
  j["client"] = "rtce_session_loadgen";
  j["target_kind"] = opt.floor.empty() ? "webrtc" : "floor";
  j["transceiver_metrics"] = std::move(metrics);
  exit_code = 0;
  if (opt.expect_all_connected && (failed > 0 || no_echo > 0 || r.failed_after_connect > 0)) exit_code = 1;
  if (opt.expect_all_connected && opt.data_channel && channels_open < connected) exit_code = 1;
  if (opt.expect_alive_at_end && (failed > 0 || alive_at_end < connected)) exit_code = 1;
  return j;
}

std::string fmt(double v, int decimals = 1) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void print_table(const nlohmann::json& j) {
  auto num = [&j](const char* a, const char* b = nullptr) -> double {
    const auto& v =
        b ? j.value(a, nlohmann::json::object()).value(b, nlohmann::json()) : j.value(a, nlohmann::json());
    return v.is_number() ? v.get<double>() : NAN;
  };
  std::printf("| %-44s | %s |\n|---|---|\n", "session load", j.value("label", "").c_str());
  auto row = [](const std::string& k, const std::string& v) {
    std::printf("| %-44s | %s |\n", k.c_str(), v.c_str());
  };
  row("sessions requested / connected / failed", fmt(num("sessions_requested"), 0) + " / " +
                                                     fmt(num("sessions_connected"), 0) + " / " +
                                                     fmt(num("sessions_failed"), 0));
  row("setup rate (sessions/s)", fmt(num("setup_rate_per_s")));
  row("client profile / consent checks",
      j.value("client_profile", "") + " / " + j.value("consent_checks", ""));
  row("time to ICE connected p50 / p99 (ms)",
      fmt(num("time_to_ice_connected_ms", "p50")) + " / " + fmt(num("time_to_ice_connected_ms", "p99")));
  row("time to connected p50 / p99 (ms)",
      fmt(num("time_to_connected_ms", "p50")) + " / " + fmt(num("time_to_connected_ms", "p99")));
  row("time to first echo p50 / p99 (ms)",
      fmt(num("time_to_first_echo_ms", "p50")) + " / " + fmt(num("time_to_first_echo_ms", "p99")));
  row("sessions echoing at the end / failed after connect",
      fmt(num("sessions_alive_at_end"), 0) + " / " + fmt(num("sessions_failed_after_connect"), 0));
  row("STUN sent after ICE connected / server checks answered",
      fmt(num("stun_sent_after_ice_connected"), 0) + " / " + fmt(num("stun_requests_answered"), 0));
  row("frame interval p50 / p99 / max (ms)", fmt(num("frame_interval_ms", "p50"), 2) + " / " +
                                                 fmt(num("frame_interval_ms", "p99"), 2) + " / " +
                                                 fmt(num("frame_interval_ms", "max"), 2));
  row("sessions with p99 interval in band",
      fmt(num("sessions_p99_within_band"), 0) + " (" + fmt(100 * num("fraction_p99_within_band"), 2) + " %)");
  row("frames received / expected", fmt(num("frames_received_in_window"), 0) + " / " +
                                        fmt(num("frames_expected_in_window"), 0) + " (" +
                                        fmt(100 * num("frames_received_ratio"), 2) + " %)");
  row("authenticated RTP / auth failures",
      fmt(num("rtp_received_authenticated"), 0) + " / " + fmt(num("rtp_auth_failed"), 0));
  row("CPU in window: transceiver / relay / loadgen (cores)",
      fmt(num("cpu_window", "transceiver_cores"), 3) + " / " + fmt(num("cpu_window", "relay_cores"), 3) +
          " / " + fmt(num("cpu_window", "loadgen_cores"), 3));
  row("transceiver RSS before / after (KiB)",
      fmt(num("transceiver_rss_kib", "before"), 0) + " / " + fmt(num("transceiver_rss_kib", "after"), 0));
  if (j.contains("data_channels_open"))
    row("oai-events channels open / events received",
        fmt(num("data_channels_open"), 0) + " / " + fmt(num("data_channel_messages_received"), 0));
  row("transceiver KiB per session", fmt(num("transceiver_kib_per_session")));
  std::fflush(stdout);
}

// --floor-key: 112 hex digits, the client's master key (16) || salt (12), then the server's.
// The client sends with the first half and opens the echo with the second, as after a
// DTLS-SRTP handshake in which it is the DTLS server.
SrtpKeys floor_keys(const std::string& hex) {
  constexpr size_t kHalf = 28;
  if (hex.size() != 4 * kHalf) throw std::runtime_error("--floor-key: want 112 hex digits");
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < hex.size(); i += 2)
    bytes.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  SrtpKeys keys{SrtpProfile::aead_aes_128_gcm, {}, {}};
  keys.local_key_salt.assign(bytes.begin(), bytes.begin() + kHalf);
  keys.remote_key_salt.assign(bytes.begin() + kHalf, bytes.end());
  return keys;
}

int run(const Options& opt) {
  // One socket per session: lift the descriptor limit to what the hard limit allows.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < opt.sessions + 64)
    throw std::runtime_error("RLIMIT_NOFILE " + std::to_string(lim.rlim_cur) + " is too small for " +
                             std::to_string(opt.sessions) + " sessions");
  ClientConfig config;
  config.opus_frame = encode_tone_frame();
  if (!opt.write_opus_frame.empty()) {  // for bench/pion/client: the same payload bytes
    std::ofstream(opt.write_opus_frame, std::ios::binary)
        .write(reinterpret_cast<const char*>(config.opus_frame.data()),
               static_cast<std::streamsize>(config.opus_frame.size()));
    return 0;
  }
  SocketAddress server;
  if (opt.floor.empty()) {
    server = parse_base_url(opt.url);
  } else {
    server = SocketAddress::parse_or_throw(opt.floor, "--floor");
    config.preshared = floor_keys(opt.floor_key);
  }
  config.dtls = DtlsContext::generate();
  config.send_audio = opt.send_audio;
  config.data_channel = opt.data_channel;
  if (opt.data_channel && !opt.floor.empty())
    throw std::runtime_error("--data-channel needs --url, not --floor");
  config.connect_timeout = static_cast<Nanos>(opt.connect_timeout * kSecond);
  const auto profile = parse_client_profile(opt.client_profile);
  if (!profile) throw std::runtime_error("--client-profile: browser | pion");
  config.profile = *profile;
  if (opt.consent_checks.empty()) {
    config.consent =
        config.profile == ClientProfile::pion ? ConsentChecks::on_silence : ConsentChecks::periodic;
  } else {
    const auto consent = parse_consent_checks(opt.consent_checks);
    if (!consent) throw std::runtime_error("--consent-checks: periodic | none | on-silence");
    config.consent = *consent;
  }
  if (opt.srtp_profile == "gcm")
    config.srtp_profiles = {SrtpProfile::aead_aes_128_gcm};
  else if (opt.srtp_profile == "cm")
    config.srtp_profiles = {SrtpProfile::aes128_cm_sha1_80};
  else if (opt.srtp_profile != "any")
    throw std::runtime_error("--srtp-profile: any | gcm | cm");

  // libsrtp's first context pays a one-time crypto-backend start-up (~20 ms with Debian's
  // NSS build): pay it here, not inside the first session's time to connected.
  for (SrtpProfile p : {SrtpProfile::aead_aes_128_gcm, SrtpProfile::aes128_cm_sha1_80}) {
    std::vector<uint8_t> key(srtp_master_key_length(p) + srtp_master_salt_length(p), 1);
    SrtpSession warm(p, SrtpSession::Direction::inbound, key);
  }

  LoopResult result;
  if (opt.transceiver_pid) result.rss_before = rss_kib(opt.transceiver_pid);
  result.cpu_setup_start = cpu_mark(opt);
  SetupQueue queue;
  EventLoop loop(opt, config, queue, result);
  std::atomic<uint32_t> next_index{0};
  const Nanos t0 = monotonic_now();
  std::vector<std::thread> setup_threads;
  const std::string fingerprint = config.dtls->fingerprint_sha256();
  for (uint32_t t = 0; t < std::max(1u, opt.setup_concurrency); ++t)
    setup_threads.emplace_back(run_setup_thread, std::cref(opt), std::cref(server), std::cref(fingerprint),
                               std::ref(next_index), t0, std::ref(queue));
  loop.run();
  for (auto& t : setup_threads) t.join();

  reap(result.window_command, 15 * kSecond);
  nlohmann::json metrics = nlohmann::json::object();
  if (opt.floor.empty()) {
    HttpClient http(server, 2 * kSecond);
    metrics = selected_metrics(http);
  }
  long rss_after_delete = -1;
  if (opt.delete_sessions && opt.floor.empty()) {
    delete_sessions(opt, server, result);
    if (opt.transceiver_pid) rss_after_delete = rss_kib(opt.transceiver_pid);
  }
  int exit_code = 0;
  const nlohmann::json summary =
      summarize(opt, config, result, std::move(metrics), rss_after_delete, exit_code);
  print_table(summary);
  if (!opt.json_out.empty()) {
    if (opt.json_out == "-") {
      std::cout << summary.dump(2) << "\n";
    } else {
      std::ofstream(opt.json_out) << summary.dump(2) << "\n";
    }
  }
  if (exit_code != 0)
    std::fprintf(stderr, "rtce_session_loadgen: %s sessions failed, %s without an authenticated echo\n",
                 summary["sessions_failed"].dump().c_str(), summary["sessions_without_echo"].dump().c_str());
  return exit_code;
}

}  // namespace
}  // namespace rtce::loadgen

int main(int argc, char** argv) {
  rtce::loadgen::Options opt;
  CLI::App app{"rtce_session_loadgen: N real WebRTC audio sessions against rtcedge-transceiver"};
  app.add_option("--url", opt.url, "signaling base URL (http://ip:port)");
  app.add_option("--sessions", opt.sessions, "sessions to open")->check(CLI::Range(1u, 60000u));
  app.add_option("--seconds", opt.seconds, "measurement window (s)")->check(CLI::Range(0.5, 120.0));
  app.add_option("--warmup", opt.warmup, "after the last setup, before the window (s)")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--setup-rate", opt.setup_rate, "POSTs per second (0 = unpaced)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--setup-concurrency", opt.setup_concurrency, "setup threads (HTTP connections)")
      ->check(CLI::Range(1u, 64u));
  app.add_option("--connect-timeout", opt.connect_timeout, "POST start -> DTLS connected budget (s)")
      ->check(CLI::Range(0.5, 120.0));
  app.add_option("--local-ip", opt.local_ip, "address the client sockets bind");
  app.add_option("--transceiver-pid,--server-pid", opt.transceiver_pid,
                 "the measured server: its VmRSS, CPU time and threads' context switches");
  app.add_option("--relay-pid", opt.relay_pid, "read its CPU time");
  app.add_option("--json-out", opt.json_out, "write the summary as JSON here ('-' = stdout)");
  app.add_option("--label", opt.label, "a name for this run, copied into the output");
  app.add_option("--srtp-profile", opt.srtp_profile,
                 "any | gcm | cm (the load generator is the DTLS server)");
  app.add_option("--interval-tolerance-ms", opt.interval_tolerance_ms,
                 "band around 20 ms for the p99 criterion");
  app.add_flag("--expect-all-connected", opt.expect_all_connected,
               "exit 1 unless every session connected and received authenticated echo");
  app.add_flag("--expect-alive-at-end", opt.expect_alive_at_end,
               "exit 1 unless every session connected and still echoed in the window's last second");
  app.add_option("--client-profile", opt.client_profile,
                 "browser (every check nominates, consent every 2.5 s) | pion (regular nomination on a "
                 "200 ms tick, DTLS after ICE connected)");
  app.add_option("--consent-checks", opt.consent_checks,
                 "after ICE connected: periodic (2.5 s) | none | on-silence (after 2 s without traffic); "
                 "default browser periodic, pion on-silence");
  app.add_flag("!--no-audio", opt.send_audio, "connect only; send no RTP (setup-rate runs)");
  app.add_flag("!--no-delete", opt.delete_sessions, "leave the sessions on the transceiver at the end");
  app.add_flag("--data-channel", opt.data_channel,
               "Realtime calls (POST /v1/realtime/calls) with m=application; open oai-events on each");
  app.add_option("--floor", opt.floor,
                 "ip:port of bench/floor_echo: no HTTP, ICE or DTLS, SRTP (GCM) keyed with --floor-key");
  app.add_option("--floor-key", opt.floor_key, "112 hex digits: client master key||salt, then the server's");
  app.add_option("--window-command", opt.window_command,
                 "run with /bin/sh -c when the measurement window opens (e.g. a perf record -- sleep S)");
  app.add_option("--write-opus-frame", opt.write_opus_frame,
                 "write the one Opus frame every packet carries to this file and exit");
  CLI11_PARSE(app, argc, argv);
  try {
    return rtce::loadgen::run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rtce_session_loadgen: %s\n", e.what());
    return 2;
  }
}
