// call.h — the application of one conversation: the jitter buffer and the Opus codecs, the
// one playout queue on the one frame clock, talkspurts, the backend connection, and the
// Realtime event layer on the `oai-events` channel. It consumes a transport's events
// (connected, audio packets, channel open/message/closed) and hands back 20 ms frames and
// channel text through CallTransport, so anything that carries a conversation can drive it:
// a WebRTC Peer (Opus frames) or a phone provider's media stream (PCM frames, which the
// stream codes itself). Sans-IO like the Peer: `now` comes in with every input, and the
// backend is built by the factory the environment provides.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "audio/jitter_buffer.h"
#include "audio/opus_codec.h"
#include "audio/pacer.h"
#include "backend/backend.h"
#include "event_log.h"
#include "playout_queue.h"
#include "realtime/realtime_events.h"
#include "vocab.h"
#include "worker_metrics.h"

namespace rtce {

// What signaling decided for the conversation.
struct CallPlan {
  std::string id;
  std::string user_agent;
  bool has_audio = true;
  // A /v1/realtime call: run the oai-events layer on the channel of that label, starting
  // from this session config (the multipart `session` part over the ephemeral key's claims).
  bool realtime = false;
  nlohmann::json realtime_session;
  size_t channel_max_message_size = 0;  // what the answer announced (0: no data channel limit)
};

// What the transport carries: Opus packets (WebRTC), or PCM frames at the Call's rate that the
// transport codes itself (a phone stream's G.711).
enum class TransportAudio : uint8_t { opus, pcm };

// Resolved once from the configuration, typed: nothing here is compared as a string per call.
struct CallSettings {
  int sample_rate = 16000;  // the rate the backend hears and speaks (Opus runs at it natively)
  TransportAudio transport_audio = TransportAudio::opus;
  bool opus_passthrough = false;  // Opus transports only
  JitterBufferConfig jitter;
  OpusEncoderConfig encoder;
  // A Realtime-protocol backend transcribes, reduces noise and runs semantic VAD itself.
  bool backend_speaks_realtime = false;
  std::string backend_kind = "echo-loopback";  // for the snapshot: echo-<mode> | websocket
  // 80 ms: a backend that paces itself (the echo, the rtcedge dialect) keeps one or two frames
  // queued; a Realtime burst doubles the queue as it comes.
  size_t playout_initial_frames = 4;
  size_t playout_max_frames = 1500;     // 30 s: what a backend may send ahead
  size_t max_sidebands = 4;             // realtime.sideband.max_per_call
  Nanos tool_timeout = 15'000'000'000;  // realtime.sideband.tool_timeout
};

// An app server's WebSocket on a Realtime call (the sideband), as the Call sees it; the
// service's implementation carries the text to the socket's own thread.
class SidebandLink {
 public:
  virtual ~SidebandLink() = default;
  virtual void send_text(std::string_view json_text) = 0;
  // The call is over: the socket closes after what was sent. The Call forgets the link.
  virtual void close(std::string_view reason) = 0;
};

// Builds the backend connection of a call (the worker's, from typed config; a test's fake).
using BackendFactory =
    std::function<std::unique_ptr<BackendConnection>(BackendSessionInfo, BackendListener&)>;

// What a Call drives: the transport of the conversation.
class CallTransport {
 public:
  virtual ~CallTransport() = default;
  // One 20 ms Opus frame to the caller, now (TransportAudio::opus).
  virtual void send_audio(std::span<const uint8_t> opus, Nanos now) = 0;
  // One 20 ms PCM frame at the Call's rate to the caller, now (TransportAudio::pcm).
  virtual void send_pcm(std::span<const int16_t> /*pcm_20ms*/, Nanos /*now*/) {}
  // A frame's time passes with nothing sent (DTX-like); the next frame starts a talkspurt.
  virtual void skip_audio_frame() = 0;
  // The backend's output paused (a talkspurt ended: nothing to play for a moment), or was
  // cleared (barge-in). A phone stream marks the one and tells its provider of the other,
  // whose own buffer holds what was sent ahead.
  virtual void output_segment_ended(Nanos /*now*/) {}
  virtual void output_cleared(Nanos /*now*/) {}
  virtual bool send_channel_text(uint16_t stream, std::string_view text) = 0;
  // The conversation is over on the application's side (the backend ended or failed, or a
  // text-only call lost its channels): the transport ends too. The Call has ended already.
  virtual void hang_up(SessionEnd reason, Nanos now) = 0;
};

struct CallEnvironment {
  CallTransport& transport;
  BackendFactory make_backend;
  WorkerMetrics& metrics;
  EventLog& log;
  CallSettings settings;
};

// The link the transport runs on, for the backend's session info.
struct CallConnection {
  std::string client_address;
  std::string path_kind;  // "relay" | "direct" | "telephony"
  // What the backend's session.started carries as metadata (a phone call's ids and custom
  // parameters).
  std::map<std::string, std::string> metadata;
};

class Call final : public BackendListener {
 public:
#define RTCE_CALL_BACKEND_STATES(X) X(idle) X(open) X(closed)
  enum class BackendState : uint8_t { RTCE_CALL_BACKEND_STATES(RTCE_VOCAB_ENUMERATOR) };

  Call(CallPlan plan, CallEnvironment env, Nanos now);
  ~Call() override;
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // The transport's events.
  void on_connected(const CallConnection& connection, Nanos now);  // starts the backend and the clock
  void on_audio(uint16_t seq, uint32_t rtp_timestamp, std::span<const uint8_t> opus, Nanos now);
  // One 20 ms frame at the Call's rate from a PCM transport (a phone stream), in order.
  void on_pcm_audio(std::span<const int16_t> pcm_20ms, Nanos now);
  void on_transport_report(const nlohmann::json& event, Nanos now);  // to the backend as is
  // Something the caller did on the transport (a phone caller's DTMF digit, a mark played
  // back): to the backend as is; on a Realtime call, whose backend has no such event, to the
  // call's clients (its sidebands) as `rtcedge.<type>` instead.
  void on_transport_event(nlohmann::json event, Nanos now);
  void on_channel_open(uint16_t stream, std::string_view label, std::string_view protocol, Nanos now);
  void on_channel_message(uint16_t stream, std::span<const uint8_t> message, bool binary, Nanos now);
  void on_channel_closed(uint16_t stream, Nanos now);
  void on_channels_failed(Nanos now);
  // The app server's sidebands (Realtime calls only). attach: nullopt when the call is not a
  // Realtime one, has ended, or has its most sidebands; the link hears session.created first.
  std::optional<EventSource> attach_sideband(std::shared_ptr<SidebandLink> link, Nanos now);
  void on_sideband_message(EventSource sideband, std::string_view message, Nanos now);
  void detach_sideband(EventSource sideband, Nanos now);
  // What a closing sideband's socket could not deliver (RealtimeEventChannel::on_sideband_undelivered).
  void on_sideband_undelivered(EventSource sideband, std::string json_text, Nanos now);
  // Decoding, playout and talkspurts: the frame clock.
  void tick(Nanos now);
  // When tick next has something to do; the frame clock's deadline while connected.
  Nanos next_deadline() const;
  // Ends the conversation (the backend is closed with the reason); the transport is not told.
  void end(SessionEnd reason, Nanos now);
  // Barge-in: the one place the output is cleared. The client's output_audio_buffer.clear
  // and response.cancel come through the event layer (which acknowledges them itself); the
  // backend's clear (rtcedge dialect) and speech_started (realtime dialect) come from it.
  enum class ClearOrigin : uint8_t { event_layer, backend };
  void clear_output(Nanos now, ClearOrigin origin);

  bool ended() const { return ended_; }
  bool realtime() const { return realtime_ != nullptr; }
  BackendState backend_state() const { return backend_state_; }
  const PlayoutQueue& playout() const { return playout_; }
  // The application's part of a session's JSON snapshot.
  void snapshot_into(nlohmann::json& j) const;

  // BackendListener: called on the worker thread between inputs; `now` is the last input's.
  void on_backend_audio(std::span<const int16_t> pcm_20ms) override;
  void on_backend_opus(std::span<const uint8_t> opus_packet) override;
  void on_backend_clear() override;
  void on_backend_event(const nlohmann::json& event) override;
  void on_backend_closed(std::string_view reason) override;

 private:
  void start_backend(const CallConnection& connection);
  void send_to_backend(const nlohmann::json& event);
  void pump_inbound_audio(Nanos now);
  void pump_outbound_audio(Nanos now);
  void queue_output(std::span<const uint8_t> frame);
  void note_output_playing(bool playing, Nanos now);
  void mirror_realtime_stats();  // the event layer's counts into the worker's
  void close_sidebands(std::string_view reason);
  void start_event_layer();
  void finish(SessionEnd reason);  // ends the call and hangs the transport up

  CallPlan plan_;
  CallEnvironment env_;
  bool ended_ = false;
  bool connected_ = false;
  Nanos now_;

  // Audio. Transcoding: jitter buffer -> decoder -> backend; backend -> queue -> encoder.
  // Passthrough: Opus packets both ways, the queue holds them as they came.
  std::optional<JitterBuffer> jitter_;
  std::optional<OpusDecoderHandle> decoder_;
  std::optional<OpusEncoderHandle> encoder_;
  FramePacer pacer_;
  PlayoutQueue playout_;
  size_t frame_samples_;
  size_t decode_samples_ = 0;  // 120 ms at the Call's rate (the decode scratch is per thread)
  uint64_t seen_lost_ = 0, seen_late_ = 0, seen_reordered_ = 0;
  // Output playout as the event layer reports it: started on the first frame played,
  // stopped after a short run of nothing to play (backends deliver in bursts).
  bool output_playing_ = false;
  int trailing_silence_ = 0;  // Opus silence frames still to send after the last played frame
  Nanos output_idle_since_ = 0;

  // The Realtime event layer of a /v1/realtime call (its browser side is the oai-events
  // channel, when open), its sidebands, and the other channels the client opened, whose JSON
  // goes to the backend.
  std::unique_ptr<RealtimeEventChannel> realtime_;
  std::optional<uint16_t> events_stream_;
  std::vector<std::pair<EventSource, std::shared_ptr<SidebandLink>>> sidebands_;
  EventSource next_sideband_ = kFromBrowser + 1;
  RealtimeEventChannel::Stats seen_realtime_{};
  std::vector<std::pair<uint16_t, std::string>> channel_labels_;

  std::unique_ptr<BackendConnection> backend_;
  BackendState backend_state_ = BackendState::idle;
};

inline const char* backend_state_name(Call::BackendState state) {
  static constexpr const char* kNames[] = {RTCE_CALL_BACKEND_STATES(RTCE_VOCAB_LABEL)};
  return vocab_name(kNames, state);
}

}  // namespace rtce
