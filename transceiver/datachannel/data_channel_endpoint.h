// data_channel_endpoint.h — one session's WebRTC data channels: an SCTP association
// (usrsctp over AF_CONN, carried in DTLS application data) and the channels on it (DCEP,
// RFC 8832; message framing, RFC 8831). Socket-free: SCTP packets come in through
// handle_packet and leave through Callbacks::send; time only advances through `now`.
//
// Threading: an endpoint belongs to the worker thread that created it; every method and
// every callback runs on that thread. usrsctp's own callbacks (which may run on another
// worker when that one fires the shared timers) only fill this endpoint's bounded outbox and
// inbox under the SctpStack mutex; pump() moves them out and calls the callbacks, outside
// the lock. The owning loop calls pump() every iteration while the endpoint exists (it
// also drives usrsctp's timers). See docs/data-channels.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "clock.h"
#include "dcep.h"
#include "relaxed_counter.h"
#include "sctp_packet.h"
#include "vocab.h"

namespace rtce {

// Why an inbound packet, message or event was dropped.
#define RTCE_DATA_CHANNEL_DROPS(X)                                                                \
  X(malformed_packet, "the SCTP packet failed the pre-check (see the packet error counters)")     \
  X(message_too_large, "an inbound message is longer than our max-message-size")                  \
  X(unknown_stream, "a message arrived on a stream with no open channel")                         \
  X(unknown_ppid, "a message carries a PPID that is not DCEP, string or binary")                  \
  X(bad_dcep, "a PPID 50 message is not a well-formed DCEP OPEN or ACK, or opens an open stream") \
  X(wrong_stream_parity, "the peer opened a channel on a stream id of our parity (RFC 8832 §6)")  \
  X(too_many_channels, "the peer opened more channels than max_channels; the stream was reset")   \
  X(outbox_full, "usrsctp produced a packet while the outbox was full (SCTP retransmits it)")     \
  X(inbox_full, "a message arrived while the inbox was full (the owner did not pump)")            \
  X(after_close, "a packet arrived after close() or a failure")

// Why send_text/send_binary/open_channel returned false.
#define RTCE_DATA_CHANNEL_SEND_REFUSALS(X)                                \
  X(not_open, "the association is not open")                              \
  X(no_channel, "no open channel on that stream")                         \
  X(too_large, "the message is longer than the peer's max-message-size")  \
  X(buffer_full, "usrsctp's send buffer is full (no queue beyond it)")    \
  X(no_free_stream, "open_channel found no free stream id of our parity") \
  X(send_error, "usrsctp refused the message for another reason")

enum class DataChannelDrop { RTCE_DATA_CHANNEL_DROPS(RTCE_VOCAB_MESSAGE_ENUMERATOR) };
enum class DataChannelSendRefusal { RTCE_DATA_CHANNEL_SEND_REFUSALS(RTCE_VOCAB_MESSAGE_ENUMERATOR) };
inline constexpr const char* kDataChannelDropLabels[] = {RTCE_DATA_CHANNEL_DROPS(RTCE_VOCAB_MESSAGE_LABEL)};
inline constexpr const char* kDataChannelSendRefusalLabels[] = {
    RTCE_DATA_CHANNEL_SEND_REFUSALS(RTCE_VOCAB_MESSAGE_LABEL)};
inline constexpr size_t kDataChannelDropCount = std::size(kDataChannelDropLabels);
inline constexpr size_t kDataChannelSendRefusalCount = std::size(kDataChannelSendRefusalLabels);
std::string_view data_channel_drop_name(DataChannelDrop drop);
std::string_view data_channel_send_refusal_name(DataChannelSendRefusal refusal);

// What every endpoint of one owner (a media worker's sessions) has dropped and refused, for
// the owner's metrics: written on the endpoints' owning thread only, read by anyone.
struct DataChannelCounters {
  std::array<RelaxedCounter, kDataChannelDropCount> drops;
  std::array<RelaxedCounter, kDataChannelSendRefusalCount> send_refused;
  std::array<RelaxedCounter, kSctpPacketErrorCount>
      packet_errors;  // malformed_packet drops by SctpPacketError
};

class DataChannelEndpoint {
 public:
  // Called only from pump()/handle_packet()/start()/send_*()/open_channel()/close_channel()
  // on the owning thread. They must not destroy the endpoint.
  struct Callbacks {
    // -> DtlsTransport::send_application_data
    std::function<void(std::span<const uint8_t> sctp_packet)> send;
    std::function<void(uint16_t stream, std::string_view label, std::string_view protocol)> on_open;
    std::function<void(uint16_t stream, std::span<const uint8_t> message, bool binary)> on_message;
    std::function<void(uint16_t stream)> on_closed;
    std::function<void(std::string_view reason)> on_failed;  // association aborted/failed; audio continues
  };
  struct Config {
    uint16_t local_port = 5000, remote_port = 5000;  // a=sctp-port
    // What we announce (a=max-message-size); larger inbound -> dropped+counted.
    size_t max_message_size = 262144;
    size_t remote_max_message_size = 65536;  // the peer's; larger sends refused (return false)
    bool dtls_client = true;                 // RFC 8832: the DTLS client uses even stream ids, the server odd
    size_t max_channels = 16;
    // SCTP INIT in/out streams: stream ids are below this. usrsctp keeps per-stream state for
    // each (256 streams cost ~37 KiB per association, 64 ~17 KiB); channels open in-band only
    // (DCEP), at most max_channels of them, and browsers give each the lowest free id of their
    // parity, so 16 channels use ids below 32.
    uint16_t streams = 64;
    size_t mtu = 1100;  // largest SCTP packet: a DTLS record of it fits a 1200-byte datagram
    // Where drops, refusals and packet errors are counted besides stats() (nullptr: nowhere);
    // it must outlive the endpoint.
    DataChannelCounters* counters = nullptr;
  };
  struct Stats {
    uint64_t packets_in = 0, packets_out = 0, bytes_in = 0, bytes_out = 0;
    uint64_t messages_in = 0, messages_out = 0, message_bytes_in = 0, message_bytes_out = 0;
    uint64_t channels_opened = 0, channels_closed = 0;
    uint64_t send_failed_events = 0;  // usrsctp gave up on a (partially reliable) message
    uint64_t drops[kDataChannelDropCount] = {};
    uint64_t send_refused[kDataChannelSendRefusalCount] = {};
    uint64_t packet_errors[kSctpPacketErrorCount] = {};  // malformed_packet drops by SctpPacketError
    uint64_t drop(DataChannelDrop d) const { return drops[static_cast<size_t>(d)]; }
    uint64_t refused(DataChannelSendRefusal r) const { return send_refused[static_cast<size_t>(r)]; }
  };
  enum class State { idle, connecting, open, closed, failed };

  DataChannelEndpoint(Config config, Callbacks callbacks);
  ~DataChannelEndpoint();  // aborts the association silently (no callback, no packet)
  DataChannelEndpoint(const DataChannelEndpoint&) = delete;
  DataChannelEndpoint& operator=(const DataChannelEndpoint&) = delete;

  void start(Nanos now);  // DTLS connected: connect the association
  void handle_packet(std::span<const uint8_t> sctp_packet, Nanos now);  // DTLS application data in
  void pump(Nanos now);  // deliver queued output/inbound events; also runs SctpStack::tick
  bool send_text(uint16_t stream, std::string_view text);
  bool send_binary(uint16_t stream, std::span<const uint8_t> data);
  // The opener's side of DCEP: sends the OPEN on the lowest free stream id of our parity and
  // returns it; on_open fires when the peer's ACK (or a first message) arrives. `reliability`
  // is the retransmission count or lifetime in ms of the partially reliable types.
  std::optional<uint16_t> open_channel(std::string_view label, std::string_view protocol,
                                       DcepChannelType type = DcepChannelType::reliable,
                                       uint32_t reliability = 0);
  void close_channel(uint16_t stream);  // RFC 8831 §6.7: stream reset
  void close();                         // SHUTDOWN, then no more callbacks (packets still flow)
  void abort();                         // ABORT sent now, then no more callbacks
  State state() const;
  const Stats& stats() const;

  // Any PPID on any stream, bypassing the channel table: tests craft hostile DCEP with it.
  bool send_raw_for_testing(uint16_t stream, uint32_t ppid, std::span<const uint8_t> payload);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

const char* data_channel_state_name(DataChannelEndpoint::State state);

}  // namespace rtce
