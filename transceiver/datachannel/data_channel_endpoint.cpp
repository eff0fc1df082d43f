// data_channel_endpoint.cpp — see data_channel_endpoint.h. The usrsctp socket options follow
// what libwebrtc and mediasoup settled on for browser interop; the queues between usrsctp's
// callbacks and the owning thread are the part that is ours (docs/data-channels.md).
#include "data_channel_endpoint.h"

#include <arpa/inet.h>
#include <usrsctp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "dcep.h"
#include "sctp_stack.h"

namespace rtce {
namespace {

// Bounds of the queues usrsctp's callbacks fill. A worker pumps every loop iteration, so
// these only fill when it stalls; SCTP retransmits a dropped packet, a dropped message is
// counted (inbox_full).
constexpr size_t kOutboxMaxPackets = 512;
constexpr size_t kOutboxMaxBytes = 1 << 20;
constexpr size_t kInboxMaxMessages = 1024;
constexpr size_t kInboxMaxEvents = 2048;  // messages plus notifications

// One byte arena plus record sizes: swapping it with the owner's drained copy moves a batch
// across the lock with no allocation once the capacities have grown.
struct PacketQueue {
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> sizes;
  void clear() {
    bytes.clear();
    sizes.clear();
  }
};

enum class EventKind : uint8_t {
  message,
  comm_up,
  comm_lost,
  cant_start,
  shutdown,
  stream_reset_incoming,
  send_failed,
  socket_closed
};

struct InEvent {
  EventKind kind;
  uint16_t stream = 0;
  uint32_t ppid = 0;
  uint32_t offset = 0, length = 0;  // into Inbox::bytes, for messages
};

struct Inbox {
  std::vector<uint8_t> bytes;
  std::vector<InEvent> events;
  size_t messages = 0;
  void clear() {
    bytes.clear();
    events.clear();
    messages = 0;
  }
};

// A message arriving in pieces (usrsctp's partial delivery): reassembled up to the limit.
struct Partial {
  uint16_t stream = 0;
  uint32_t ppid = 0;
  bool discarding = false;  // grew past max_message_size: dropped at its MSG_EOR
  std::vector<uint8_t> bytes;
};

struct Channel {
  uint16_t stream = 0;
  std::string label, protocol;
  DcepChannelType type = DcepChannelType::reliable;
  uint32_t reliability = 0;
  bool acked = true;       // false while our own OPEN waits for the peer's ACK
  bool resetting = false;  // we reset our outgoing stream; waiting for the peer's
};

sockaddr_conn conn_address(uint16_t port, void* handle) {
  sockaddr_conn a{};
  a.sconn_family = AF_CONN;
  a.sconn_port = htons(port);
  a.sconn_addr = handle;
  return a;
}

}  // namespace

std::string_view data_channel_drop_name(DataChannelDrop drop) {
  return vocab_name(kDataChannelDropLabels, drop);
}
std::string_view data_channel_send_refusal_name(DataChannelSendRefusal refusal) {
  return vocab_name(kDataChannelSendRefusalLabels, refusal);
}

const char* data_channel_state_name(DataChannelEndpoint::State state) {
  using S = DataChannelEndpoint::State;
  switch (state) {
    case S::idle: return "idle";
    case S::connecting: return "connecting";
    case S::open: return "open";
    case S::closed: return "closed";
    case S::failed: return "failed";
  }
  return "unknown";
}

struct DataChannelEndpoint::Impl final : SctpSink {
  using Refusal = DataChannelSendRefusal;

  Impl(Config c, Callbacks cb) : config(std::move(c)), callbacks(std::move(cb)) {
    config.streams = std::max<uint16_t>(config.streams, 2);
    config.mtu = std::max<size_t>(config.mtu, 576);
    inbox_max_bytes = 2 * config.max_message_size + 65536;
    SctpStack& stack = SctpStack::instance();
    std::lock_guard lock(stack.mutex());
    id = stack.add(this);
    usrsctp_register_address(handle());
  }

  ~Impl() {
    SctpStack& stack = SctpStack::instance();
    std::lock_guard lock(stack.mutex());
    // Still registered while closing, so the ABORT lands in our outbox (and is discarded)
    // instead of counting as an orphan; after remove() a late timer finds nothing.
    if (sock != nullptr) usrsctp_close(sock);
    usrsctp_deregister_address(handle());
    stack.remove(id);
  }

  void* handle() const { return sctp_handle(id); }
  // Each count goes to stats and, when the owner gave one, to config.counters.
  void drop(DataChannelDrop d, uint64_t n = 1) {
    stats.drops[static_cast<size_t>(d)] += n;
    if (config.counters != nullptr) config.counters->drops[static_cast<size_t>(d)].add(n);
  }
  bool refuse(Refusal r) {
    stats.send_refused[static_cast<size_t>(r)]++;
    if (config.counters != nullptr) config.counters->send_refused[static_cast<size_t>(r)].add();
    return false;
  }

  // ---- usrsctp callbacks: stack mutex held, any thread; only the guarded members below.

  void on_sctp_output(const uint8_t* packet, size_t length) override {
    if (outbox.sizes.size() >= kOutboxMaxPackets || outbox.bytes.size() + length > kOutboxMaxBytes) {
      locked_drop(DataChannelDrop::outbox_full);
      return;
    }
    outbox.bytes.insert(outbox.bytes.end(), packet, packet + length);
    outbox.sizes.push_back(static_cast<uint32_t>(length));
    queued.store(true, std::memory_order_release);
  }

  void on_sctp_receive(const uint8_t* data, size_t length, const sctp_rcvinfo& info, int flags) override {
    if (flags & MSG_NOTIFICATION) {
      on_notification(data, length);
      return;
    }
    const uint16_t stream = info.rcv_sid;
    const uint32_t ppid = ntohl(info.rcv_ppid);
    const bool eor = (flags & MSG_EOR) != 0;
    auto it =
        std::find_if(partials.begin(), partials.end(), [&](const Partial& p) { return p.stream == stream; });
    if (it == partials.end() && eor) {
      push_message(stream, ppid, data, length);
      return;
    }
    if (it == partials.end()) {
      // usrsctp's own stream limit keeps this from happening; stay bounded regardless.
      if (partials.size() >= config.streams) {
        locked_drop(DataChannelDrop::inbox_full);
        return;
      }
      partials.push_back(Partial{stream, ppid, false, {}});
      it = partials.end() - 1;
    }
    if (!it->discarding) {
      if (it->bytes.size() + length > config.max_message_size) {
        it->discarding = true;
        std::vector<uint8_t>().swap(it->bytes);
      } else {
        it->bytes.insert(it->bytes.end(), data, data + length);
      }
    }
    if (!eor) return;
    if (it->discarding) {
      locked_drop(DataChannelDrop::message_too_large);
    } else {
      push_message(stream, it->ppid, it->bytes.data(), it->bytes.size());
    }
    partials.erase(it);
  }

  void locked_drop(DataChannelDrop d) {
    locked_drops[static_cast<size_t>(d)]++;
    queued.store(true, std::memory_order_release);  // so the owner's next pump folds it in
  }

  void on_sctp_socket_closed() override { push_event(EventKind::socket_closed); }

  void push_message(uint16_t stream, uint32_t ppid, const uint8_t* data, size_t length) {
    if (length > config.max_message_size) {
      locked_drop(DataChannelDrop::message_too_large);
      return;
    }
    if (inbox.messages >= kInboxMaxMessages || inbox.events.size() >= kInboxMaxEvents ||
        inbox.bytes.size() + length > inbox_max_bytes) {
      locked_drop(DataChannelDrop::inbox_full);
      return;
    }
    InEvent e{EventKind::message, stream, ppid, static_cast<uint32_t>(inbox.bytes.size()),
              static_cast<uint32_t>(length)};
    inbox.bytes.insert(inbox.bytes.end(), data, data + length);
    inbox.events.push_back(e);
    inbox.messages++;
    queued.store(true, std::memory_order_release);
  }

  void push_event(EventKind kind, uint16_t stream = 0) {
    if (inbox.events.size() >= kInboxMaxEvents) {
      locked_drop(DataChannelDrop::inbox_full);
      return;
    }
    inbox.events.push_back(InEvent{kind, stream, 0, 0, 0});
    queued.store(true, std::memory_order_release);
  }

  void on_notification(const uint8_t* data, size_t length) {
    if (length < sizeof(sctp_notification::sn_header)) return;
    const auto* n = reinterpret_cast<const sctp_notification*>(data);
    if (n->sn_header.sn_length != length) return;
    switch (n->sn_header.sn_type) {
      case SCTP_ASSOC_CHANGE:
        if (length < sizeof(sctp_assoc_change)) return;
        switch (n->sn_assoc_change.sac_state) {
          case SCTP_COMM_UP:
          case SCTP_RESTART: push_event(EventKind::comm_up); break;
          case SCTP_COMM_LOST: push_event(EventKind::comm_lost); break;
          case SCTP_CANT_STR_ASSOC: push_event(EventKind::cant_start); break;
          case SCTP_SHUTDOWN_COMP: push_event(EventKind::shutdown); break;
          default: break;
        }
        break;
      case SCTP_SHUTDOWN_EVENT: push_event(EventKind::shutdown); break;
      case SCTP_SEND_FAILED_EVENT: push_event(EventKind::send_failed); break;
      case SCTP_STREAM_RESET_EVENT: {
        if (length < sizeof(sctp_stream_reset_event)) return;
        const auto& r = n->sn_strreset_event;
        if ((r.strreset_flags & SCTP_STREAM_RESET_INCOMING_SSN) == 0 ||
            (r.strreset_flags & (SCTP_STREAM_RESET_DENIED | SCTP_STREAM_RESET_FAILED)) != 0) {
          return;
        }
        const size_t count = (length - sizeof(sctp_stream_reset_event)) / sizeof(uint16_t);
        for (size_t i = 0; i < count; ++i) {
          uint16_t s;
          std::memcpy(&s, data + sizeof(sctp_stream_reset_event) + i * sizeof(uint16_t), sizeof s);
          push_event(EventKind::stream_reset_incoming, s);
        }
        break;
      }
      default: break;
    }
  }

  // ---- owner thread.

  void fail(std::string_view reason) {
    if (state == State::failed || state == State::closed) return;
    state = State::failed;
    const bool notify = !quiet;
    quiet = true;
    if (notify && callbacks.on_failed) callbacks.on_failed(reason);
  }

  template <typename T>
  bool set_option(int level, int name, const T& value) {
    return usrsctp_setsockopt(sock, level, name, &value, sizeof(value)) == 0;
  }

  // With the stack mutex held. Returns the failing step, or nullptr.
  const char* open_socket() {
    sock = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, rtce_sctp_receive, nullptr, 0, handle());
    if (sock == nullptr) return "usrsctp_socket";
    if (usrsctp_set_non_blocking(sock, 1) != 0) return "usrsctp_set_non_blocking";
    // close() without linger sends ABORT: the session is gone, so is the association.
    if (!set_option(SOL_SOCKET, SO_LINGER, linger{1, 0})) return "SO_LINGER";
    const int sndbuf = static_cast<int>(std::max<size_t>(262144, 2 * config.remote_max_message_size));
    const int rcvbuf = static_cast<int>(std::max<size_t>(262144, 2 * config.max_message_size));
    if (!set_option(SOL_SOCKET, SO_SNDBUF, sndbuf) || !set_option(SOL_SOCKET, SO_RCVBUF, rcvbuf))
      return "SO_SNDBUF";
    sctp_assoc_value reset{};
    reset.assoc_id = SCTP_ALL_ASSOC;
    reset.assoc_value = SCTP_ENABLE_RESET_STREAM_REQ;
    if (!set_option(IPPROTO_SCTP, SCTP_ENABLE_STREAM_RESET, reset)) return "SCTP_ENABLE_STREAM_RESET";
    if (!set_option(IPPROTO_SCTP, SCTP_NODELAY, int{1})) return "SCTP_NODELAY";
    if (!set_option(IPPROTO_SCTP, SCTP_RECVRCVINFO, int{1})) return "SCTP_RECVRCVINFO";
    for (uint16_t type :
         {SCTP_ASSOC_CHANGE, SCTP_SHUTDOWN_EVENT, SCTP_SEND_FAILED_EVENT, SCTP_STREAM_RESET_EVENT,
          SCTP_REMOTE_ERROR, SCTP_STREAM_CHANGE_EVENT, SCTP_ADAPTATION_INDICATION}) {
      sctp_event event{};
      event.se_assoc_id = SCTP_ALL_ASSOC;
      event.se_on = 1;
      event.se_type = type;
      if (!set_option(IPPROTO_SCTP, SCTP_EVENT, event)) return "SCTP_EVENT";
    }
    sctp_initmsg init{};
    init.sinit_num_ostreams = config.streams;
    init.sinit_max_instreams = config.streams;
    if (!set_option(IPPROTO_SCTP, SCTP_INITMSG, init)) return "SCTP_INITMSG";
    sockaddr_conn local = conn_address(config.local_port, handle());
    if (usrsctp_bind(sock, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) return "usrsctp_bind";
    sockaddr_conn remote = conn_address(config.remote_port, handle());
    if (usrsctp_connect(sock, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0 &&
        errno != EINPROGRESS) {
      return "usrsctp_connect";
    }
    // Only effective once connect created the association: a fixed path MTU (what fits a
    // DTLS record in one datagram) instead of discovery, which AF_CONN cannot do.
    sctp_paddrparams params{};
    std::memcpy(&params.spp_address, &remote, sizeof remote);
    params.spp_flags = SPP_PMTUD_DISABLE;
    // usrsctp adds the 12-byte common header on top of what it takes as the path MTU.
    params.spp_pathmtu = static_cast<uint32_t>(config.mtu - kSctpCommonHeaderBytes);
    if (!set_option(IPPROTO_SCTP, SCTP_PEER_ADDR_PARAMS, params)) return "SCTP_PEER_ADDR_PARAMS";
    return nullptr;
  }

  void start(Nanos now) {
    if (state != State::idle) return;
    state = State::connecting;
    const char* failed_step;
    {
      std::lock_guard lock(SctpStack::instance().mutex());
      failed_step = open_socket();
    }
    if (failed_step != nullptr) {
      failure = std::string("usrsctp setup failed at ") + failed_step + ": " + std::strerror(errno);
      fail(failure);
      return;
    }
    pump(now);
  }

  void handle_packet(std::span<const uint8_t> packet, Nanos now) {
    if (state == State::idle) start(now);
    if (sock == nullptr || state == State::failed) {
      drop(DataChannelDrop::after_close);
      return;
    }
    const SctpPacketCheck check = check_sctp_packet(packet);
    if (check.error) {
      drop(DataChannelDrop::malformed_packet);
      stats.packet_errors[static_cast<size_t>(*check.error)]++;
      if (config.counters != nullptr) config.counters->packet_errors[static_cast<size_t>(*check.error)].add();
      return;
    }
    stats.packets_in++;
    stats.bytes_in += packet.size();
    {
      std::lock_guard lock(SctpStack::instance().mutex());
      usrsctp_conninput(handle(), packet.data(), packet.size(), 0);
    }
    pump(now);
  }

  void pump(Nanos now) {
    SctpStack::instance().tick(now);
    drain();
  }

  // Moves what usrsctp's callbacks queued to this thread and acts on it, until nothing is
  // left (acting may queue more: an ACK, a stream reset). Reentrant calls (a callback that
  // sends) return at once; the outer loop picks up what they queued.
  void drain() {
    if (draining) return;
    draining = true;
    for (int round = 0; round < 64; ++round) {
      // Nothing queued: a pump on an idle association takes no lock (workers pump every
      // loop iteration). The flag is only a hint; the queues themselves are read locked.
      // A refused stream reset is retried once per drain.
      if (!queued.load(std::memory_order_acquire) && (pending_resets.empty() || round > 0)) break;
      {
        std::lock_guard lock(SctpStack::instance().mutex());
        queued.store(false, std::memory_order_relaxed);
        std::swap(outbox, out_local);
        std::swap(inbox, in_local);
        for (size_t i = 0; i < kDataChannelDropCount; ++i) {
          if (locked_drops[i] != 0) drop(static_cast<DataChannelDrop>(i), locked_drops[i]);
          locked_drops[i] = 0;
        }
      }
      if (out_local.sizes.empty() && in_local.events.empty()) break;
      size_t offset = 0;
      for (uint32_t size : out_local.sizes) {
        stats.packets_out++;
        stats.bytes_out += size;
        if (callbacks.send) callbacks.send(std::span<const uint8_t>(out_local.bytes.data() + offset, size));
        offset += size;
      }
      for (const InEvent& e : in_local.events) process(e);
      out_local.clear();
      in_local.clear();
      retry_resets();
    }
    draining = false;
  }

  Channel* find_channel(uint16_t stream) {
    auto it =
        std::find_if(channels.begin(), channels.end(), [&](const Channel& c) { return c.stream == stream; });
    return it == channels.end() ? nullptr : &*it;
  }

  void remove_channel(uint16_t stream) {
    std::erase_if(channels, [&](const Channel& c) { return c.stream == stream; });
  }

  void process(const InEvent& e) {
    switch (e.kind) {
      case EventKind::message:
        on_message(e.stream, e.ppid, std::span<const uint8_t>(in_local.bytes.data() + e.offset, e.length));
        break;
      case EventKind::comm_up:
        if (state == State::connecting) state = State::open;
        break;
      case EventKind::comm_lost:
        fail("the SCTP association was lost (peer ABORT or retransmission limit)");
        break;
      case EventKind::cant_start: fail("the SCTP association could not be established"); break;
      case EventKind::shutdown:
      case EventKind::socket_closed:
        if (state == State::open || state == State::connecting) {
          state = State::closed;
          close_all_channels();
          quiet = true;
        }
        break;
      case EventKind::stream_reset_incoming: {
        Channel* ch = find_channel(e.stream);
        if (ch == nullptr) break;
        // RFC 8831 §6.7: the peer reset its outgoing stream; reset ours so the id is free.
        if (!ch->resetting) request_reset(e.stream);
        remove_channel(e.stream);
        stats.channels_closed++;
        if (!quiet && callbacks.on_closed) callbacks.on_closed(e.stream);
        break;
      }
      case EventKind::send_failed: stats.send_failed_events++; break;
    }
  }

  void close_all_channels() {
    std::vector<Channel> gone;
    gone.swap(channels);
    for (const Channel& ch : gone) {
      stats.channels_closed++;
      if (!quiet && callbacks.on_closed) callbacks.on_closed(ch.stream);
    }
  }

  bool peer_parity(uint16_t stream) const {
    // The DTLS client opens even ids, the server odd (RFC 8832 §6).
    return (stream % 2 == 1) == config.dtls_client;
  }

  void on_message(uint16_t stream, uint32_t ppid, std::span<const uint8_t> bytes) {
    if (quiet) return;
    switch (ppid) {
      case kPpidDcep: on_dcep(stream, bytes); return;
      case kPpidString:
      case kPpidBinary:
      case kPpidStringEmpty:
      case kPpidBinaryEmpty: break;
      default: drop(DataChannelDrop::unknown_ppid); return;
    }
    Channel* ch = find_channel(stream);
    if (ch == nullptr) {
      drop(DataChannelDrop::unknown_stream);
      return;
    }
    if (!ch->acked) {
      // RFC 8832 §6: any message on the stream also acknowledges our OPEN.
      ch->acked = true;
      if (callbacks.on_open) callbacks.on_open(stream, ch->label, ch->protocol);
    }
    const bool binary = ppid == kPpidBinary || ppid == kPpidBinaryEmpty;
    const bool empty = ppid == kPpidStringEmpty || ppid == kPpidBinaryEmpty;
    if (empty) bytes = {};
    stats.messages_in++;
    stats.message_bytes_in += bytes.size();
    if (callbacks.on_message) callbacks.on_message(stream, bytes, binary);
  }

  void on_dcep(uint16_t stream, std::span<const uint8_t> bytes) {
    const DcepMessage m = parse_dcep(bytes);
    if (m.error) {
      drop(DataChannelDrop::bad_dcep);
      return;
    }
    if (m.type == kDcepAck) {
      Channel* ch = find_channel(stream);
      if (ch == nullptr || ch->acked) {
        drop(DataChannelDrop::bad_dcep);
        return;
      }
      ch->acked = true;
      if (callbacks.on_open) callbacks.on_open(stream, ch->label, ch->protocol);
      return;
    }
    if (!peer_parity(stream)) {
      drop(DataChannelDrop::wrong_stream_parity);
      return;
    }
    if (find_channel(stream) != nullptr) {
      drop(DataChannelDrop::bad_dcep);
      return;
    }
    if (channels.size() >= config.max_channels) {
      drop(DataChannelDrop::too_many_channels);
      request_reset(stream);  // the peer's channel closes instead of hanging unacknowledged
      return;
    }
    channels.push_back(Channel{stream, std::string(m.open.label), std::string(m.open.protocol),
                               m.open.channel_type, m.open.reliability, true, false});
    static constexpr uint8_t kAck[] = {kDcepAck};
    send_message(stream, kPpidDcep, kAck, true, SCTP_PR_SCTP_NONE, 0);
    stats.channels_opened++;
    const Channel& ch = channels.back();
    if (callbacks.on_open) callbacks.on_open(stream, ch.label, ch.protocol);
  }

  // With SCTP_EOR on every send, usrsctp takes a message whole or not at all.
  std::optional<Refusal> send_message(uint16_t stream, uint32_t ppid, std::span<const uint8_t> payload,
                                      bool ordered, uint16_t pr_policy, uint32_t pr_value) {
    if (sock == nullptr) return Refusal::not_open;
    sctp_sendv_spa spa{};
    spa.sendv_flags = SCTP_SEND_SNDINFO_VALID;
    spa.sendv_sndinfo.snd_sid = stream;
    spa.sendv_sndinfo.snd_flags = static_cast<uint16_t>(SCTP_EOR | (ordered ? 0 : SCTP_UNORDERED));
    spa.sendv_sndinfo.snd_ppid = htonl(ppid);
    if (pr_policy != SCTP_PR_SCTP_NONE) {
      spa.sendv_flags |= SCTP_SEND_PRINFO_VALID;
      spa.sendv_prinfo.pr_policy = pr_policy;
      spa.sendv_prinfo.pr_value = pr_value;
    }
    ssize_t sent;
    int error = 0;
    {
      std::lock_guard lock(SctpStack::instance().mutex());
      sent = usrsctp_sendv(sock, payload.data(), payload.size(), nullptr, 0, &spa, sizeof spa, SCTP_SENDV_SPA,
                           0);
      if (sent < 0) error = errno;
    }
    drain();
    if (sent >= 0) return std::nullopt;
    if (error == EWOULDBLOCK || error == EAGAIN || error == ENOBUFS) return Refusal::buffer_full;
    if (error == EMSGSIZE) return Refusal::too_large;
    return Refusal::send_error;
  }

  bool send_user(uint16_t stream, std::span<const uint8_t> payload, bool binary) {
    if (state != State::open) return refuse(Refusal::not_open);
    Channel* ch = find_channel(stream);
    if (ch == nullptr || ch->resetting) return refuse(Refusal::no_channel);
    if (payload.size() > config.remote_max_message_size) return refuse(Refusal::too_large);
    uint32_t ppid = binary ? kPpidBinary : kPpidString;
    static constexpr uint8_t kEmpty[] = {0};
    if (payload.empty()) {  // RFC 8831 §6.6: SCTP has no empty message; one zero byte instead
      ppid = binary ? kPpidBinaryEmpty : kPpidStringEmpty;
      payload = kEmpty;
    }
    const uint8_t type = static_cast<uint8_t>(ch->type);
    const bool ordered = (type & 0x80) == 0;
    uint16_t policy = SCTP_PR_SCTP_NONE;
    if ((type & 0x7f) == static_cast<uint8_t>(DcepChannelType::partial_reliable_rexmit))
      policy = SCTP_PR_SCTP_RTX;
    if ((type & 0x7f) == static_cast<uint8_t>(DcepChannelType::partial_reliable_timed))
      policy = SCTP_PR_SCTP_TTL;
    const size_t user_bytes = ppid == kPpidStringEmpty || ppid == kPpidBinaryEmpty ? 0 : payload.size();
    if (auto refusal = send_message(stream, ppid, payload, ordered, policy, ch->reliability))
      return refuse(*refusal);
    stats.messages_out++;
    stats.message_bytes_out += user_bytes;
    return true;
  }

  std::optional<uint16_t> open_channel(std::string_view label, std::string_view protocol,
                                       DcepChannelType type, uint32_t reliability) {
    if (state != State::open) {
      refuse(Refusal::not_open);
      return std::nullopt;
    }
    std::optional<uint16_t> stream;
    if (channels.size() < config.max_channels) {
      for (uint32_t s = config.dtls_client ? 0 : 1; s < config.streams; s += 2) {
        if (find_channel(static_cast<uint16_t>(s)) == nullptr) {
          stream = static_cast<uint16_t>(s);
          break;
        }
      }
    }
    if (!stream) {
      refuse(Refusal::no_free_stream);
      return std::nullopt;
    }
    DcepOpen open;
    open.channel_type = type;
    open.reliability = reliability;
    open.label = label;
    open.protocol = protocol;
    std::vector<uint8_t> bytes(kDcepOpenHeaderBytes + label.size() + protocol.size());
    if (write_dcep_open(open, bytes) == 0) {
      refuse(Refusal::too_large);
      return std::nullopt;
    }
    channels.push_back(
        Channel{*stream, std::string(label), std::string(protocol), type, reliability, false, false});
    if (auto refusal = send_message(*stream, kPpidDcep, bytes, true, SCTP_PR_SCTP_NONE, 0)) {
      remove_channel(*stream);
      refuse(*refusal);
      return std::nullopt;
    }
    stats.channels_opened++;
    return stream;
  }

  void request_reset(uint16_t stream) {
    if (std::find(pending_resets.begin(), pending_resets.end(), stream) == pending_resets.end()) {
      pending_resets.push_back(stream);
    }
    retry_resets();
  }

  // usrsctp allows one outstanding reset request: a refused one waits for the next pump.
  void retry_resets() {
    if (pending_resets.empty() || sock == nullptr || state != State::open) return;
    std::vector<uint8_t> buffer(sizeof(sctp_reset_streams) + pending_resets.size() * sizeof(uint16_t));
    auto* srs = reinterpret_cast<sctp_reset_streams*>(buffer.data());
    srs->srs_assoc_id = SCTP_ALL_ASSOC;
    srs->srs_flags = SCTP_STREAM_RESET_OUTGOING;
    srs->srs_number_streams = static_cast<uint16_t>(pending_resets.size());
    std::memcpy(buffer.data() + sizeof(sctp_reset_streams), pending_resets.data(),
                pending_resets.size() * sizeof(uint16_t));
    int rc;
    {
      std::lock_guard lock(SctpStack::instance().mutex());
      rc = usrsctp_setsockopt(sock, IPPROTO_SCTP, SCTP_RESET_STREAMS, buffer.data(),
                              static_cast<socklen_t>(buffer.size()));
    }
    if (rc == 0) pending_resets.clear();
    drain();
  }

  void close_channel(uint16_t stream) {
    Channel* ch = find_channel(stream);
    if (ch == nullptr || ch->resetting) return;
    ch->resetting = true;
    request_reset(stream);
  }

  void close() {
    if (state == State::open || state == State::connecting) {
      std::lock_guard lock(SctpStack::instance().mutex());
      usrsctp_shutdown(sock, SHUT_WR);
    }
    if (state != State::failed) state = State::closed;
    quiet = true;
    drain();
  }

  void abort() {
    if (sock != nullptr) {
      std::lock_guard lock(SctpStack::instance().mutex());
      usrsctp_close(sock);  // SO_LINGER 0: an ABORT, queued in our outbox
      sock = nullptr;
    }
    if (state != State::failed) state = State::closed;
    quiet = true;
    drain();
  }

  // Owner thread.
  Config config;
  Callbacks callbacks;
  Stats stats;
  State state = State::idle;
  std::string failure;
  bool quiet = false;  // after close(), abort() or a failure: no more user callbacks
  bool draining = false;
  struct socket* sock = nullptr;
  uint64_t id = 0;
  size_t inbox_max_bytes = 0;
  std::vector<Channel> channels;
  std::vector<uint16_t> pending_resets;
  PacketQueue out_local;
  Inbox in_local;

  // Guarded by the SctpStack mutex: what usrsctp's callbacks fill.
  PacketQueue outbox;
  Inbox inbox;
  std::vector<Partial> partials;
  uint64_t locked_drops[kDataChannelDropCount] = {};
  std::atomic<bool> queued{false};  // set with the mutex held when any of the above changed
};

DataChannelEndpoint::DataChannelEndpoint(Config config, Callbacks callbacks)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(callbacks))) {}
DataChannelEndpoint::~DataChannelEndpoint() = default;

void DataChannelEndpoint::start(Nanos now) { impl_->start(now); }
void DataChannelEndpoint::handle_packet(std::span<const uint8_t> sctp_packet, Nanos now) {
  impl_->handle_packet(sctp_packet, now);
}
void DataChannelEndpoint::pump(Nanos now) { impl_->pump(now); }
bool DataChannelEndpoint::send_text(uint16_t stream, std::string_view text) {
  return impl_->send_user(stream, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
                          false);
}
bool DataChannelEndpoint::send_binary(uint16_t stream, std::span<const uint8_t> data) {
  return impl_->send_user(stream, data, true);
}
std::optional<uint16_t> DataChannelEndpoint::open_channel(std::string_view label, std::string_view protocol,
                                                          DcepChannelType type, uint32_t reliability) {
  return impl_->open_channel(label, protocol, type, reliability);
}
void DataChannelEndpoint::close_channel(uint16_t stream) { impl_->close_channel(stream); }
void DataChannelEndpoint::close() { impl_->close(); }
void DataChannelEndpoint::abort() { impl_->abort(); }
DataChannelEndpoint::State DataChannelEndpoint::state() const { return impl_->state; }
const DataChannelEndpoint::Stats& DataChannelEndpoint::stats() const { return impl_->stats; }
bool DataChannelEndpoint::send_raw_for_testing(uint16_t stream, uint32_t ppid,
                                               std::span<const uint8_t> payload) {
  return !impl_->send_message(stream, ppid, payload, true, SCTP_PR_SCTP_NONE, 0).has_value();
}

}  // namespace rtce
