// tcp_streams.h — a relay worker's ICE-TCP side (RFC 6544 passive candidates at the VIPs):
// its listening sockets, its connections, RFC 4571 framing both ways, and the limits that
// keep an unverified connection cheap and short-lived.
//
// A connection is a flow whose key says TCP (client address:port, VIP address:port). Its
// first frame must be a STUN Binding request whose ufrag carries a valid hint: the sink
// (the worker's RelayCore) checks it exactly as it checks a UDP flow's first packet. Each
// frame then goes to the transceiver as one PROXY v2 STREAM datagram, and each reply
// datagram comes back as one frame, so the transceiver's Peer sees an ordinary path.
// Reads and writes are batched: one read loop per readable connection per wake-up, one
// send() per connection per flush, with the replies of the wake-up coalesced.
//
// Per connection: the receive buffer (2 x (2 + ice_tcp.max_frame) bytes, 4 KiB by default)
// and a send queue that grows to at most ice_tcp.send_queue_bytes while the client does not
// read. Both are allocated at accept, never per frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.h"
#include "net_address.h"
#include "relaxed_counter.h"
#include "relay_config.h"
#include "rfc4571.h"
#include "rtce_flow.h"
#include "unique_fd.h"
#include "vocab.h"

namespace rtce {

// Why a connection closed (rtcedge_relay_tcp_closed_total{reason}).
#define RTCE_TCP_CLOSE_REASONS(X)                                                                          \
  X(max_connections)     /* over ice_tcp.max_connections at accept */                                      \
  X(source_prefix)       /* over ice_tcp.max_per_source_prefix at accept */                                \
  X(first_frame_timeout) /* no valid first Binding request within ice_tcp.first_frame_timeout */           \
  X(first_frame_refused) /* first frame not a Binding request with a valid hint (dropped_packets says why) \
                          */                                                                               \
  X(frame_too_large)     /* a length over ice_tcp.max_frame */                                             \
  X(idle)                /* no frame from the client for ice_tcp.idle_timeout */                           \
  X(flow_gone)           /* its flow ended (its endpoint left the routing table, a flow limit) */          \
  X(client_closed)       /* the client closed or reset it */                                               \
  X(socket_error)        /* the kernel reported an error on it */                                          \
  X(shutdown)            /* the relay stopped */
enum class TcpCloseReason : uint8_t { RTCE_TCP_CLOSE_REASONS(RTCE_VOCAB_ENUMERATOR) count };
inline constexpr const char* kTcpCloseReasonNames[] = {RTCE_TCP_CLOSE_REASONS(RTCE_VOCAB_LABEL)};
inline const char* tcp_close_reason_name(TcpCloseReason r) { return vocab_name(kTcpCloseReasonNames, r); }

struct TcpCounters {
  RelaxedCounter accepted;
  RelaxedCounter active;
  RelaxedCounter frames_from_clients;
  RelaxedCounter frames_to_clients;
  RelaxedCounter reply_overflow;       // replies dropped: the client's send queue was full
  RelaxedCounter reply_no_connection;  // replies of a TCP flow whose connection is gone
  RelaxedCounter reads;                // recv() calls that returned data
  RelaxedCounter sends;                // send() calls
  RelaxedCounter closed[static_cast<size_t>(TcpCloseReason::count)];
};

// What the worker does with a connection's frames.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // A whole frame of `key`'s connection, accepted on VIP `vip` (an index into the VIP list).
  // `frame` may be written (it has no headroom: the sink copies). False = the frame made no
  // flow, or its flow is gone: the connection closes.
  virtual bool on_stream_frame(const rtce_flow_key& key, uint16_t vip, std::span<uint8_t> frame,
                               Nanos now) = 0;
  // The connection of `key` closed (its flow should go too).
  virtual void on_stream_closed(const rtce_flow_key& key) = 0;
  // Whether a verified connection's flow still exists.
  virtual bool stream_flow_alive(const rtce_flow_key& key) = 0;
};

class TcpStreams {
 public:
  // Listens on every VIP address at options.port (SO_REUSEPORT: each worker accepts its own
  // connections) and registers its descriptors with `epoll_fd` under tags at or above
  // kTagBase. Throws std::runtime_error naming the address on failure.
  TcpStreams(const IceTcpOptions& options, const FlowLimits& prefix_lengths,
             const std::vector<SocketAddress>& vips, unsigned workers, int epoll_fd, StreamSink& sink);
  ~TcpStreams();
  TcpStreams(const TcpStreams&) = delete;
  TcpStreams& operator=(const TcpStreams&) = delete;

  static constexpr uint64_t kTagBase = uint64_t{1} << 62;
  static bool owns_tag(uint64_t tag) { return tag >= kTagBase; }
  // An epoll event for one of this object's tags.
  void on_event(uint64_t tag, uint32_t events, Nanos now);
  // A reply datagram's payload for the connection of `key`: queued as one frame.
  void queue_reply(const rtce_flow_key& key, const uint8_t* data, size_t len);
  // Sends every connection's queued replies (one send() each).
  void flush();
  // Closes connections past their deadlines and verified ones whose flow is gone.
  void expire(Nanos now);

  const TcpCounters& counters() const { return counters_; }
  size_t open_connections() const { return by_key_.size(); }

 private:
  struct Connection;
  void accept_all(size_t listener, Nanos now);
  void read(uint32_t slot, Nanos now);
  void write(Connection& c);
  void close(uint32_t slot, TcpCloseReason why);
  void set_writable_interest(Connection& c, bool want);
  std::string prefix_of(const rtce_flow_key& key) const;
  Connection* find(uint64_t tag);

  IceTcpOptions options_;
  FlowLimits prefix_lengths_;
  uint32_t max_connections_;  // this worker's share
  int epoll_fd_;
  StreamSink& sink_;
  struct Listener {
    UniqueFd fd;
    SocketAddress bound;
  };
  std::vector<Listener> listeners_;
  std::vector<std::unique_ptr<Connection>> slots_;
  std::vector<uint32_t> free_slots_;
  std::unordered_map<rtce_flow_key, uint32_t> by_key_;
  std::unordered_map<std::string, uint32_t> per_prefix_;
  std::vector<uint32_t> dirty_;  // connections with replies queued since the last flush
  uint32_t next_generation_ = 1;
  TcpCounters counters_;
};

}  // namespace rtce
