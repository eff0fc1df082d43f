// floor_echo.cpp — rtce_floor_echo: the floor of bench/run_peers_bench.sh, the least work a
// media server does per packet of a voice session, so that the transceiver's cost can be
// read as a ratio to it (docs/benchmarks.md, "Floor and peers").
//
// Per datagram: UDP receive and send (recvmmsg/sendmmsg batches on one socket, like one
// transceiver media worker), one hash lookup of the client's address:port, and SRTP as
// RFC 7714 (AEAD_AES_128_GCM) does it: AES-128-GCM open under the client's key, seal under
// the server's key, sent back to where it came from with the same RTP header. No ICE, DTLS,
// RTCP or codec: the session is created by its first datagram that authenticates under the
// pre-shared master keys (--key, the same one rtce_session_loadgen --floor sends with).
// Session keys are derived once per session (RFC 3711 §4.3 KDF, as DTLS-SRTP would after
// the handshake) and each session keeps its two keyed EVP contexts: per packet only the IV,
// the AAD/data updates and the final call run.
//
// Loop: sleep until the next tick deadline (clock_nanosleep, absolute), then drain the
// socket until it is empty and flush the echoes. It never wakes per datagram; a datagram
// waits at most one tick (--tick-us, default 2 ms = the transceiver's tick). It exits by
// itself after --max-seconds, on SIGTERM or SIGINT, and prints its counters as JSON.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.h"
#include "net_address.h"
#include "udp_batch.h"
#include "udp_socket_options.h"

namespace {

using rtce::Nanos;

constexpr size_t kKeyLength = 16, kSaltLength = 12, kTagLength = 16;
constexpr size_t kMasterLength = kKeyLength + kSaltLength;  // one direction's key || salt
constexpr size_t kRtpHeader = 12;
constexpr size_t kMaxDatagram = 1500;
constexpr int kSocketBufferBytes = 4 << 20;  // what a transceiver media worker asks for
constexpr Nanos kSecond = 1'000'000'000;

volatile std::sig_atomic_t g_stop = 0;

struct CtxDeleter {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CtxDeleter>;

CipherCtx keyed(const EVP_CIPHER* cipher, const uint8_t* key, bool encrypt) {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx || EVP_CipherInit_ex(ctx.get(), cipher, nullptr, key, nullptr, encrypt ? 1 : 0) != 1)
    throw std::runtime_error("EVP_CipherInit_ex failed");
  return ctx;
}

// Fetched once: naming EVP_aes_128_gcm() in every init would look the cipher up again.
const EVP_CIPHER* aes_128_gcm() {
  static const EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, "AES-128-GCM", nullptr);
  return c;
}

// RFC 3711 §4.3.1 (key_derivation_rate 0) as RFC 7714 §11 uses it: AES-CM keystream under the
// master key, IV = (master salt, zero-padded, XOR label << 48) || 0x0000.
void derive(const uint8_t* master, uint8_t label, uint8_t* out, size_t length) {
  static const EVP_CIPHER* ctr = EVP_CIPHER_fetch(nullptr, "AES-128-CTR", nullptr);
  uint8_t iv[16] = {};
  std::memcpy(iv, master + kKeyLength, kSaltLength);
  iv[7] ^= label;
  const uint8_t zeros[16] = {};
  CipherCtx ctx = keyed(ctr, master, true);
  int written = 0;
  if (EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, nullptr, iv) != 1 ||
      EVP_EncryptUpdate(ctx.get(), out, &written, zeros, static_cast<int>(length)) != 1)
    throw std::runtime_error("SRTP key derivation failed");
}

// One direction of SRTP for RTP: the keyed GCM context and the session salt.
struct Aead {
  CipherCtx ctx;
  uint8_t salt[kSaltLength];

  Aead(const uint8_t* master, bool encrypt) {
    uint8_t key[kKeyLength];
    derive(master, 0, key, sizeof key);    // label 0: RTP encryption key
    derive(master, 2, salt, sizeof salt);  // label 2: RTP salt
    ctx = keyed(aes_128_gcm(), key, encrypt);
  }
  // RFC 7714 §8.1: IV = (0x0000 || SSRC || ROC || SEQ) XOR salt.
  void iv(const uint8_t* header, uint32_t roc, uint8_t out[kSaltLength]) const {
    std::memcpy(out, salt, kSaltLength);
    for (int i = 0; i < 4; ++i) out[2 + i] ^= header[8 + i];  // SSRC, as on the wire
    for (int i = 0; i < 4; ++i) out[6 + i] ^= static_cast<uint8_t>(roc >> (24 - 8 * i));
    out[10] ^= header[2];
    out[11] ^= header[3];
  }
};

struct Session {
  Aead open;  // the client's direction
  Aead seal;  // ours
  uint32_t ssrc = 0;
  uint32_t roc = 0;
  uint16_t s_l = 0;     // highest sequence number seen
  uint64_t replay = 0;  // bit i: index (highest - i) was received
  bool started = false;

  Session(const uint8_t* client_master, const uint8_t* server_master)
      : open(client_master, false), seal(server_master, true) {}

  // RFC 3711 Appendix A: the ROC this sequence number belongs to.
  uint32_t guess_roc(uint16_t seq) const {
    if (!started) return 0;
    if (s_l < 32768) return (seq - s_l > 32768) && roc > 0 ? roc - 1 : roc;
    return (s_l - 32768 > seq) ? roc + 1 : roc;
  }
  // 64-packet replay window over the 48-bit index; true when `index` is new.
  bool fresh(uint64_t index) const {
    if (!started) return true;
    const uint64_t highest = (static_cast<uint64_t>(roc) << 16) | s_l;
    if (index > highest) return true;
    const uint64_t delta = highest - index;
    return delta < 64 && !(replay & (1ull << delta));
  }
  void accept(uint64_t index) {
    const uint64_t highest = (static_cast<uint64_t>(roc) << 16) | s_l;
    if (!started || index > highest) {
      const uint64_t shift = started ? index - highest : 64;
      replay = (shift >= 64 ? 0 : replay << shift) | 1;
      roc = static_cast<uint32_t>(index >> 16);
      s_l = static_cast<uint16_t>(index);
      started = true;
    } else {
      replay |= 1ull << (highest - index);
    }
  }
};

struct Counters {
  uint64_t datagrams = 0, echoed = 0, auth_failed = 0, replayed = 0, not_rtp = 0, refused = 0;
  uint64_t sessions = 0, wakeups = 0;
};

struct Options {
  std::string listen = "127.0.0.1:0";
  std::string key_hex;
  uint32_t tick_us = 2000;
  uint32_t max_sessions = 100000;
  double max_seconds = 900;
  uint32_t batch = 64;
};

std::vector<uint8_t> parse_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  if (hex.size() % 2) throw std::runtime_error("--key: odd number of hex digits");
  for (size_t i = 0; i < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// RTP header length (fixed part, CSRCs, extension) or 0 when this is not SRTP we echo.
size_t rtp_header_length(const uint8_t* p, size_t len) {
  if (len < kRtpHeader + kTagLength || (p[0] >> 6) != 2) return 0;
  const uint8_t pt = p[1] & 0x7f;
  if (pt >= 64 && pt <= 95) return 0;  // RTCP under rtcp-mux (RFC 5761 §4)
  size_t h = kRtpHeader + 4u * (p[0] & 0x0f);
  if (p[0] & 0x10) {
    if (len < h + 4) return 0;
    h += 4 + 4u * ((p[h + 2] << 8) | p[h + 3]);
  }
  return len >= h + kTagLength ? h : 0;
}

class FloorEcho {
 public:
  FloorEcho(const Options& opt, std::vector<uint8_t> keys)
      : opt_(opt), keys_(std::move(keys)), rx_(opt.batch, kMaxDatagram), tx_(opt.batch) {
    auto addr = rtce::SocketAddress::parse(opt.listen);
    if (!addr || addr->family() != AF_INET) throw std::runtime_error("--listen: want an IPv4 ip:port");
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || ::bind(fd_, addr->sa(), addr->len()) != 0)
      throw std::runtime_error("bind " + opt.listen + ": " + std::strerror(errno));
    rtce::set_socket_buffers(fd_, kSocketBufferBytes, "floor echo");
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    local_ = rtce::SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&bound), len);
    sessions_.reserve(opt.max_sessions < 65536 ? opt.max_sessions : 65536);
  }
  ~FloorEcho() { ::close(fd_); }

  const rtce::SocketAddress& local() const { return local_; }
  const Counters& counters() const { return c_; }

  void run() {
    const Nanos tick = static_cast<Nanos>(opt_.tick_us) * 1000;
    const Nanos end = rtce::monotonic_now() + static_cast<Nanos>(opt_.max_seconds * kSecond);
    Nanos deadline = rtce::monotonic_now();
    while (!g_stop) {
      const Nanos now = rtce::monotonic_now();
      if (now >= end) break;
      deadline += tick;
      if (deadline <= now) deadline = now + tick;  // fell behind: skip ticks, don't spin
      timespec ts{static_cast<time_t>(deadline / kSecond), static_cast<long>(deadline % kSecond)};
      if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) continue;
      ++c_.wakeups;
      // Until the socket is empty: everything that arrived during the sleep, in batches.
      rtce::drain_udp(
          fd_, rx_, 1 << 30, [this](size_t i, Nanos) { on_datagram(i); },
          [this] { c_.refused += tx_.flush(fd_); });
    }
  }

 private:
  void on_datagram(size_t i) {
    ++c_.datagrams;
    uint8_t* p = rx_.data(i);
    const size_t len = rx_.length(i);
    const size_t h = rx_.truncated(i) ? 0 : rtp_header_length(p, len);
    const auto& from = reinterpret_cast<const sockaddr_in&>(rx_.source(i));
    if (h == 0 || from.sin_family != AF_INET) {
      ++c_.not_rtp;
      return;
    }
    const uint64_t key = (static_cast<uint64_t>(from.sin_addr.s_addr) << 16) | from.sin_port;
    auto it = sessions_.find(key);
    bool created = false;
    if (it == sessions_.end()) {
      if (sessions_.size() >= opt_.max_sessions) {
        ++c_.refused;
        return;
      }
      it = sessions_.try_emplace(key, keys_.data(), keys_.data() + kMasterLength).first;
      created = true;
    }
    Session& s = it->second;
    const uint16_t seq = static_cast<uint16_t>((p[2] << 8) | p[3]);
    const uint32_t roc = s.guess_roc(seq);
    const uint64_t index = (static_cast<uint64_t>(roc) << 16) | seq;
    if (!s.fresh(index)) {
      ++c_.replayed;
      return;
    }
    uint8_t* data = p + h;
    const int data_len = static_cast<int>(len - h - kTagLength);
    uint8_t* tag = p + len - kTagLength;
    uint8_t iv[kSaltLength];
    int n = 0;
    s.open.iv(p, roc, iv);
    EVP_CIPHER_CTX* o = s.open.ctx.get();
    const bool ok = EVP_DecryptInit_ex(o, nullptr, nullptr, nullptr, iv) == 1 &&
                    EVP_CIPHER_CTX_ctrl(o, EVP_CTRL_AEAD_SET_TAG, static_cast<int>(kTagLength), tag) == 1 &&
                    EVP_DecryptUpdate(o, nullptr, &n, p, static_cast<int>(h)) == 1 &&
                    EVP_DecryptUpdate(o, data, &n, data, data_len) == 1 &&
                    EVP_DecryptFinal_ex(o, data + data_len, &n) == 1;
    if (!ok) {
      ++c_.auth_failed;
      if (created) sessions_.erase(it);  // only authenticated datagrams make a session
      return;
    }
    if (created) ++c_.sessions;
    s.accept(index);
    // Echo: the same header (and so the same SSRC and index) sealed under our key.
    s.seal.iv(p, roc, iv);
    EVP_CIPHER_CTX* e = s.seal.ctx.get();
    if (EVP_EncryptInit_ex(e, nullptr, nullptr, nullptr, iv) != 1 ||
        EVP_EncryptUpdate(e, nullptr, &n, p, static_cast<int>(h)) != 1 ||
        EVP_EncryptUpdate(e, data, &n, data, data_len) != 1 ||
        EVP_EncryptFinal_ex(e, data + data_len, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(e, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(kTagLength), tag) != 1) {
      ++c_.auth_failed;
      return;
    }
    if (tx_.full()) c_.refused += tx_.flush(fd_);  // cannot happen: tx has rx's capacity
    tx_.add(p, len, reinterpret_cast<const sockaddr*>(&from), sizeof from);
    ++c_.echoed;
  }

  const Options& opt_;
  std::vector<uint8_t> keys_;  // client master key || salt, then the server's
  int fd_ = -1;
  rtce::SocketAddress local_;
  rtce::UdpReceiveBatch rx_;
  rtce::UdpSendBatch tx_;
  std::unordered_map<uint64_t, Session> sessions_;
  Counters c_;
};

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"rtce_floor_echo: UDP + SRTP (AES-128-GCM) echo, the per-packet floor of a media server"};
  app.add_option("--listen", opt.listen, "IPv4 address:port to bind (port 0 = any)");
  app.add_option("--key", opt.key_hex,
                 "112 hex digits: client master key (16) || salt (12), then the server's (same layout)")
      ->required();
  app.add_option("--tick-us", opt.tick_us, "sleep between drains (µs)")->check(CLI::Range(50u, 100000u));
  app.add_option("--max-sessions", opt.max_sessions, "sessions kept at most")
      ->check(CLI::Range(1u, 1000000u));
  app.add_option("--max-seconds", opt.max_seconds, "exit after this long")->check(CLI::Range(0.1, 86400.0));
  app.add_option("--batch", opt.batch, "datagrams per recvmmsg/sendmmsg")->check(CLI::Range(1u, 1024u));
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<uint8_t> keys = parse_hex(opt.key_hex);
    if (keys.size() != 2 * kMasterLength) throw std::runtime_error("--key: want 56 bytes (112 hex digits)");
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_stop = 1; };  // no SA_RESTART: the sleep returns EINTR
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    // The worker-thread name the bench reads wake-ups of (like the transceiver's rtce-media-N).
    pthread_setname_np(pthread_self(), "rtce-floor-0");
    FloorEcho echo(opt, std::move(keys));
    std::printf("ready %s\n", echo.local().to_string().c_str());
    std::fflush(stdout);
    echo.run();
    const Counters& c = echo.counters();
    std::printf(
        "{\"datagrams\":%lu,\"echoed\":%lu,\"auth_failed\":%lu,\"replayed\":%lu,\"not_rtp\":%lu,"
        "\"refused\":%lu,\"sessions\":%lu,\"wakeups\":%lu}\n",
        c.datagrams, c.echoed, c.auth_failed, c.replayed, c.not_rtp, c.refused, c.sessions, c.wakeups);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rtce_floor_echo: %s\n", e.what());
    return 2;
  }
}
