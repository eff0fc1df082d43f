// media_worker.cpp — see media_worker.h.
#include "media_worker.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "cpu_affinity.h"
#include "ice/ice_lite.h"
#include "random.h"
#include "rtce_stun.h"
#include "udp_socket_options.h"

namespace rtce {

namespace asio = boost::asio;

namespace {
constexpr size_t kEndedKept = 256;
// 1024 windows of 4 ms: a revolution of 4 s, so only consent, RTCP and connect timeouts
// ever wait more than one (and are passed over once per revolution).
constexpr size_t kWheelSlots = 1024;
// The thread sleeps on timers it sets itself, to the window: the default 50 us of slack is
// harmless, but say what we rely on.
constexpr unsigned long kTimerSlackNanos = 50'000;
// Bounded, so that a flood cannot keep the thread from its deadlines: 4096 datagrams (and
// the rest of the last receive, whose slots may hold coalesced runs).
constexpr size_t kMaxDrainDatagrams = 4096;
constexpr int kSocketBufferBytes = 4 << 20;

SessionSettings session_settings(const TransceiverConfig& c) {
  SessionSettings s;
  s.peer.connect_timeout = c.connect_timeout;
  s.peer.consent_timeout = c.consent_timeout;
  s.peer.stun_error_replies_per_second = c.stun_error_replies_per_second;
  s.call.sample_rate = c.sample_rate;
  s.call.opus_passthrough = c.opus_passthrough;
  s.call.jitter.target_delay = c.jitter_delay;
  s.call.encoder.complexity = c.opus_complexity;
  s.call.encoder.bitrate_bps = c.opus_bitrate;
  s.call.backend_speaks_realtime = !c.backend_url.empty() && c.backend_dialect == "realtime";
  s.call.backend_kind = c.backend_url.empty() ? "echo-" + c.echo_mode : "websocket";
  s.call.max_sidebands = c.sideband_max_per_call;
  s.call.tool_timeout = c.sideband_tool_timeout;
  return s;
}

// A phone stream carries PCM the session codes itself (G.711): no Opus either way.
CallSettings phone_call_settings(CallSettings call) {
  call.transport_audio = TransportAudio::pcm;
  call.opus_passthrough = false;
  return call;
}

std::vector<std::pair<std::string, std::string>> parse_headers(const std::vector<std::string>& lines) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& line : lines) {
    auto colon = line.find(':');
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    out.emplace_back(line.substr(0, colon), value);
  }
  return out;
}

}  // namespace

MediaWorker::MediaWorker(uint32_t index, uint16_t endpoint_id, const TransceiverConfig& config,
                         std::shared_ptr<DtlsContext> dtls, WorkerMetrics& metrics)
    : index_(index),
      endpoint_id_(endpoint_id),
      config_(config),
      dtls_(std::move(dtls)),
      metrics_(metrics),
      session_settings_(session_settings(config)),
      phone_call_settings_(phone_call_settings(session_settings_.call)),
      socket_watch_(io_),
      wake_timer_(io_),
      wheel_(kWakeWindow, kWheelSlots, monotonic_now()) {
  touched_.reserve(256);
}

MediaWorker::~MediaWorker() { stop(SessionEnd::drained); }

void MediaWorker::bind() {
  SocketAddress addr = config_.media_listen;
  addr.set_port(config_.media_base_port ? static_cast<uint16_t>(config_.media_base_port + index_) : 0);
  const std::string what = "media worker " + std::to_string(index_);
  auto fail = [&](const char* step) {
    throw std::runtime_error(what + " on " + addr.to_string() + ": " + step + ": " + std::strerror(errno));
  };
  // A plain descriptor, not an asio socket: io_ must not watch it (asio registers every
  // socket it owns edge-triggered, which would wake the thread for arrivals we mean to batch).
  socket_.reset(::socket(addr.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket_) fail("socket");
  const int off = 0;
  if (!addr.is_v4() && setsockopt(socket_.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0)
    fail("IPV6_V6ONLY");
  if (::bind(socket_.get(), addr.sa(), addr.len()) != 0) fail("bind");
  set_socket_buffers(socket_.get(), kSocketBufferBytes, what);
  // A relay's GSO message arrives as one receive, which rx_ splits (without, the kernel
  // splits it first, one socket-queue entry per datagram).
  if (!enable_udp_gro(socket_.get())) spdlog::debug("{}: no UDP_GRO on this kernel", what);
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (getsockname(socket_.get(), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) fail("getsockname");
  local_ = SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&local), local_len);
  const int watch = epoll_create1(EPOLL_CLOEXEC);
  epoll_event armed{};
  armed.events = EPOLLIN;
  if (watch < 0 || epoll_ctl(watch, EPOLL_CTL_ADD, socket_.get(), &armed) != 0) {
    if (watch >= 0) ::close(watch);
    fail("epoll");
  }
  socket_watch_.assign(watch);  // owns it from here
  socket_armed_ = true;
}

void MediaWorker::start() {
  watch_socket();
  thread_ = std::thread([this] {
    const std::string name = "rtce-media-" + std::to_string(index_);
    pthread_setname_np(pthread_self(), name.c_str());
    if (config_.pin_cpus) pin_current_thread(index_, name);
    prctl(PR_SET_TIMERSLACK, kTimerSlackNanos);
    io_.run();
  });
}

void MediaWorker::stop(SessionEnd reason) {
  if (!thread_.joinable()) return;
  asio::post(io_, [this, reason] {
    std::vector<std::string> ids;
    for (auto& [id, session] : sessions_) ids.push_back(id);
    for (auto& id : ids) end_session(id, reason);
    flush_sends();
    wake_timer_.cancel();
    io_.stop();
  });
  thread_.join();
}

void MediaWorker::post(std::function<void()> fn) {
  asio::post(io_, [this, fn = std::move(fn)] {
    in_wake_ = true;  // its sends and changes are settled below, not posted again
    fn();
    settle(monotonic_now());
    in_wake_ = false;
  });
}

BackendFactory MediaWorker::backend_factory() {
  // Everything the factory needs is resolved here, once per worker, not per call.
  if (config_.backend_url.empty()) {
    EchoBackendConfig echo;
    echo.mode =
        config_.echo_mode == "parrot" ? EchoBackendConfig::Mode::parrot : EchoBackendConfig::Mode::loopback;
    echo.loopback_delay = config_.echo_delay;
    return [this, echo](BackendSessionInfo info, BackendListener& listener) {
      return make_echo_backend(echo, std::move(info), listener, metrics_.backend);
    };
  }
  WebSocketBackendConfig ws;
  ws.url = config_.backend_url;
  ws.headers = parse_headers(config_.backend_headers);
  ws.connect_timeout = config_.backend_connect_timeout;
  ws.dialect = backend_dialect_from_name(config_.backend_dialect).value_or(BackendDialect::rtcedge);
  ws.ca_file = config_.backend_ca_file;
  return [this, ws = std::move(ws)](BackendSessionInfo info, BackendListener& listener) {
    return make_websocket_backend(io_, ws, std::move(info), listener, metrics_.backend);
  };
}

void MediaWorker::add_session(SessionPlan plan) {
  const Nanos now = monotonic_now();
  if (!make_backend_) make_backend_ = backend_factory();
  SessionEnvironment env{*this,
                         *this,
                         metrics_,
                         dtls_,
                         session_settings_,
                         make_backend_,
                         config_.relay_mode() ? "relay" : "direct"};
  auto session = std::make_unique<Session>(std::move(plan), std::move(env), now);
  by_ufrag_[session->peer().local_ufrag()] = session.get();
  metrics_.sessions_created.add();
  touch(*session);  // its first deadline: the connect timeout
  sessions_.emplace(session->id(), std::move(session));
}

void MediaWorker::add_phone_session(PhonePlan plan, std::unique_ptr<MediaStreamCodec> codec,
                                    std::shared_ptr<PhoneStreamLink> link) {
  const Nanos now = monotonic_now();
  if (!make_backend_) make_backend_ = backend_factory();
  PhoneSessionEnvironment env{*this, metrics_, phone_call_settings_, make_backend_};
  auto session =
      std::make_unique<PhoneSession>(std::move(plan), std::move(codec), std::move(link), std::move(env), now);
  metrics_.sessions_created.add();
  metrics_.phone_calls_active.fetch_add(1, std::memory_order_relaxed);
  touch(*session);  // its first deadline: the wait for the provider's start
  sessions_.emplace(session->id(), std::move(session));
}

MediaWorker::EndResult MediaWorker::end_session(const std::string& id, SessionEnd reason) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return EndResult::not_found;
  const bool had_ended = it->second->ended();
  if (!had_ended) it->second->end(reason, monotonic_now());
  retire(*it->second);
  sessions_.erase(it);
  return had_ended ? EndResult::had_ended : EndResult::ended;
}

void MediaWorker::route(const PathKey& key, Session& session) { by_path_.insert_or_assign(key, &session); }

void MediaWorker::unroute(const PathKey& key, const Session& session) { by_path_.erase_if(key, &session); }

void MediaWorker::route_ufrag(const std::string& ufrag, Session& session) { by_ufrag_[ufrag] = &session; }

void MediaWorker::unroute_ufrag(const std::string& ufrag, const Session& session) {
  auto it = by_ufrag_.find(ufrag);
  if (it != by_ufrag_.end() && it->second == &session) by_ufrag_.erase(it);
}

void MediaWorker::session_changed(WorkerSession& session) {
  touch(session);
  request_settle();
}

void MediaWorker::touch(WorkerSession& session) {
  if (session.touched) return;
  session.touched = true;
  touched_.push_back(&session);
}

void MediaWorker::request_settle() {
  if (in_wake_ || settle_posted_) return;
  settle_posted_ = true;
  asio::post(io_, [this] {
    settle_posted_ = false;
    in_wake_ = true;
    settle(monotonic_now());
    in_wake_ = false;
  });
}

std::optional<MediaWorker::IceRestartReply> MediaWorker::restart_ice(const std::string& id,
                                                                     const Peer::IceRestartRequest& request) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  Session* webrtc = it->second->webrtc();
  if (!webrtc) return std::nullopt;
  Peer& peer = webrtc->peer();
  const auto verdict = peer.begin_ice_restart(request, monotonic_now());
  touch(*it->second);
  return IceRestartReply{verdict, peer.etag()};
}

void MediaWorker::retire(WorkerSession& session) {
  wheel_.cancel(session);
  if (session.touched) std::erase(touched_, &session);
  if (Session* webrtc = session.webrtc()) webrtc->peer().release_paths();
  if (session.phone()) metrics_.phone_calls_active.fetch_sub(1, std::memory_order_relaxed);
  ended_.push_back({session.snapshot(monotonic_now()), session.access()});
  if (ended_.size() > kEndedKept) ended_.pop_front();
  metrics_.sessions_ended[static_cast<size_t>(session.end_reason())].add();
  metrics_.sessions_active.fetch_sub(1, std::memory_order_relaxed);
}

std::optional<nlohmann::json> MediaWorker::snapshot(const std::string& id) const {
  if (auto it = sessions_.find(id); it != sessions_.end()) return it->second->snapshot(monotonic_now());
  for (auto it = ended_.rbegin(); it != ended_.rend(); ++it)
    if (it->snapshot["id"] == id) return it->snapshot;
  return std::nullopt;
}

const CallAccess* MediaWorker::access_of(const std::string& id) const {
  if (auto it = sessions_.find(id); it != sessions_.end()) return &it->second->access();
  for (auto it = ended_.rbegin(); it != ended_.rend(); ++it)
    if (it->snapshot["id"] == id) return &it->access;
  return nullptr;
}

bool MediaWorker::with_live_session(const std::string& id,
                                    const std::function<void(WorkerSession&, Nanos)>& fn) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->ended()) return false;
  fn(*it->second, monotonic_now());
  touch(*it->second);  // what it changed is rescheduled at the settle that follows
  return true;
}

void MediaWorker::watch_socket() {
  socket_watch_.async_wait(asio::posix::stream_descriptor::wait_read, [this](boost::system::error_code ec) {
    if (ec) return;
    wake();
    watch_socket();
  });
}

void MediaWorker::on_timer(boost::system::error_code ec) {
  if (ec) return;  // replaced by a wait for another time, or stopped
  timer_at_ = DeadlineWheel::kNever;
  wake();
}

void MediaWorker::wake() {
  const Nanos woke_at = monotonic_now();
  metrics_.wakeups.add();
  in_wake_ = true;
  drain_socket();
  const Nanos now = monotonic_now();
  while (DeadlineWheel::Entry* due = wheel_.pop_due(now)) {
    auto& session = static_cast<WorkerSession&>(*due);
    metrics_.session_visits.add();
    session.tick(now);
    touch(session);
  }
  settle(now);
  in_wake_ = false;
  metrics_.busy_us.add(static_cast<uint64_t>(monotonic_now() - woke_at) / 1000);
}

// Runs inside a wake-up or a posted call (in_wake_ set), so that what it sends is flushed
// here rather than posted again.
void MediaWorker::settle(Nanos now) {
  // Retiring destroys sessions: walk a copy the callbacks cannot grow under us.
  std::vector<WorkerSession*> touched;
  touched.swap(touched_);
  for (WorkerSession* session : touched) {
    session->touched = false;
    if (session->ended()) {
      const std::string id = session->id();
      retire(*session);
      sessions_.erase(id);
      continue;
    }
    // Never due within the window being served: a deadline that a tick did not move (due
    // again at once) waits for the next window instead of spinning the thread.
    wheel_.schedule(*session, std::max(session->next_deadline(now), now + 1));
  }
  touched.clear();
  if (touched_.empty()) touched_.swap(touched);  // keep the reserved buffer
  flush_sends();
  set_wakeups(now);
}

void MediaWorker::set_wakeups(Nanos now) {
  const Nanos next = wheel_.next_wake();
  if (next != timer_at_) {
    timer_at_ = next;
    if (next == DeadlineWheel::kNever) {
      wake_timer_.cancel();
    } else {
      wake_timer_.expires_at(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)));
      wake_timer_.async_wait([this](boost::system::error_code ec) { on_timer(ec); });
    }
  }
  // Arrivals wake the thread only when nothing else will soon: with a deadline within the
  // window, they are drained at that wake-up instead.
  const bool arm = next == DeadlineWheel::kNever || next - now > kWakeWindow;
  if (arm == socket_armed_) return;
  epoll_event event{};
  event.events = arm ? EPOLLIN : 0;
  if (epoll_ctl(socket_watch_.native_handle(), EPOLL_CTL_MOD, socket_.get(), &event) == 0)
    socket_armed_ = arm;
}

void MediaWorker::drain_socket() {
  const int fd = socket_.get();
  for (size_t drained = 0; drained < kMaxDrainDatagrams;) {
    const size_t n = rx_.receive(fd);
    if (n == 0) break;
    drained += n;
    const Nanos now = monotonic_now();
    for (size_t i = 0; i < n; ++i) {
      const size_t len = rx_.length(i);
      metrics_.datagrams_in.add();
      metrics_.bytes_in.add(len);
      if (rx_.truncated(i)) {
        metrics_.drops[static_cast<size_t>(DatagramDrop::truncated)].add();
        continue;
      }
      handle_datagram(rx_.data(i), len, rx_.source_address(i).unmapped(), now);
    }
    if (!rx_.filled()) break;
  }
}

void MediaWorker::handle_datagram(uint8_t* data, size_t len, const SocketAddress& sender, Nanos now) {
  auto drop = [this](DatagramDrop reason) { metrics_.drops[static_cast<size_t>(reason)].add(); };
  if (len == 0) return drop(DatagramDrop::not_webrtc);
  MediaPath path;
  uint8_t* payload = data;
  size_t payload_len = len;
  if (data[0] == RTCE_PP2_FIRST_BYTE) {
    bool trusted = false;
    for (const auto& prefix : config_.relay_sources) trusted = trusted || prefix.contains(sender);
    if (!trusted) return drop(DatagramDrop::untrusted_relay);
    uint32_t offset = 0;
    if (rtce_pp2_parse_key(data, static_cast<uint32_t>(len), &path.key, &offset) != RTCE_PP2_OK)
      return drop(DatagramDrop::bad_framing);
    path.send_to = sender;
    path.client = flow_client(path.key);
    path.vip = flow_vip(path.key);
    // A reply names the same flow: the relay's header as it came, or without its TLVs (the
    // relay's GSO padding, a NOOP TLV), written from the key.
    if (offset == rtce_pp2_header_len(path.key.family)) {
      std::memcpy(path.framing, data, offset);
      path.framing_len = static_cast<uint8_t>(offset);
    } else {
      path.framing_len =
          static_cast<uint8_t>(rtce_pp2_write_key(path.framing, sizeof path.framing, &path.key));
    }
    payload = data + offset;
    payload_len = len - offset;
  } else {
    if (!config_.direct_enabled) return drop(DatagramDrop::direct_disabled);
    path.send_to = sender;
    path.client = sender;
    set_flow_client(path.key, sender.sa());  // no VIP: the client talks to this socket
  }
  if (payload_len == 0) return drop(DatagramDrop::not_webrtc);
  std::span<uint8_t> bytes(payload, payload_len);
  if (rtce_classify_first_byte(payload[0]) == RTCE_FIRST_BYTE_STUN) {
    if (auto ufrag = stun_request_server_ufrag(bytes)) {
      auto it = by_ufrag_.find(*ufrag);
      if (it == by_ufrag_.end()) return drop(DatagramDrop::unknown_ufrag);
      it->second->peer().handle(bytes, path, now);
      return touch(*it->second);
    }
    // Not a request: a response to a triggered check comes from a routed pair.
    Session* routed = by_path_.find(path.key);
    if (routed == nullptr) return drop(DatagramDrop::stun_rejected);
    routed->peer().handle(bytes, path, now);
    return touch(*routed);
  }
  Session* session = by_path_.find(path.key);
  if (session == nullptr) {
    // ZRTP, TURN and unassigned first bytes are not WebRTC, whoever sent them.
    const auto kind = rtce_classify_first_byte(payload[0]);
    return drop(kind == RTCE_FIRST_BYTE_DTLS || kind == RTCE_FIRST_BYTE_RTP ? DatagramDrop::unknown_tuple
                                                                            : DatagramDrop::not_webrtc);
  }
  session->peer().handle(bytes, path, now);
  touch(*session);
}

void MediaWorker::send(const MediaPath& path, std::span<const uint8_t> payload) {
  const size_t total = path.framing_len + payload.size();
  if (total > kMaxDatagram) {
    metrics_.drops[static_cast<size_t>(DatagramDrop::send_failed)].add();
    return;
  }
  if (tx_.full()) flush_sends();
  uint8_t* buf = tx_.next_buffer().data();
  std::memcpy(buf, path.framing, path.framing_len);
  std::memcpy(buf + path.framing_len, payload.data(), payload.size());
  // The socket may be dual-stack IPv6: address IPv4 peers as ::ffff:a.b.c.d then.
  if (local_.is_v4() || !path.send_to.is_v4()) {
    tx_.add(buf, total, path.send_to);
  } else {
    const sockaddr_in6 mapped = path.send_to.to_v6_mapped();
    tx_.add(buf, total, reinterpret_cast<const sockaddr*>(&mapped), sizeof mapped);
  }
  metrics_.datagrams_out.add();
  metrics_.bytes_out.add(total);
  request_settle();  // from outside a wake-up (a backend's handler): flushed once, soon
}

void MediaWorker::flush_sends() {
  // A refused datagram (socket buffer full, destination unreachable) is lost; the rest go.
  const size_t refused = tx_.flush(socket_.get());
  if (refused) metrics_.drops[static_cast<size_t>(DatagramDrop::send_failed)].add(refused);
}

}  // namespace rtce
