// phone_session.h — one phone call as a media worker owns it: the provider's media stream
// (Twilio Media Streams and its likes: JSON messages carrying 20 ms of 8 kHz G.711 μ-law) as
// the transport of a Call. It reads the provider's messages in order through the provider's
// codec (media_stream.h), codes μ-law and
// resamples between 8 kHz and the Call's rate, paces the Call's output back as `media`
// messages, marks each output segment so that the backend learns what the caller heard, and
// tells the provider to drop what it buffered on barge-in (`clear`). The socket itself lives
// on the HTTP thread (the service's PhoneStreamSocket); this class sees a PhoneStreamLink.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/realtime_dialect.h"
#include "call/call.h"
#include "session.h"
#include "telephony/media_stream.h"
#include "telephony/phone_provider.h"

namespace rtce {

// The provider's WebSocket as the phone session sees it; the service's implementation
// carries the text to the socket's own thread.
class PhoneStreamLink {
 public:
  virtual ~PhoneStreamLink() = default;
  virtual void send_text(std::string text) = 0;
  // The call is over: the socket closes after what was sent.
  virtual void close(uint16_t code, std::string reason) = 0;
};

// What the webhook learned of the call; handed to the worker with the stream.
struct PhonePlan {
  std::string id;
  CallAccess access;
  std::string call_sid;  // the provider's call id the webhook was answered for
  std::string account_sid;
  std::string from, to;
  std::string client_address;  // the provider's end of the stream
  std::string user_agent;
  PhoneProvider provider = PhoneProvider::twilio;  // names the transport in snapshots and metadata keys
  // The provider's start message names the call the webhook answered (Twilio's callSid): one
  // that names another is refused.
  bool start_names_call_sid = true;
};

struct PhoneSessionEnvironment {
  SessionOwner& owner;
  WorkerMetrics& metrics;
  const CallSettings& settings;  // TransportAudio::pcm
  BackendFactory make_backend;
};

class PhoneSession final : public WorkerSession, CallTransport {
 public:
  // The provider must send `start` within this of the stream's opening.
  static constexpr Nanos kStartTimeout = 10'000'000'000;
  // Marks sent and not yet played back that are remembered (a provider echoes them in order).
  static constexpr size_t kMaxPendingMarks = 64;
  static constexpr std::string_view kMarkPrefix = "rtcedge-";

  PhoneSession(PhonePlan plan, std::unique_ptr<MediaStreamCodec> codec, std::shared_ptr<PhoneStreamLink> link,
               PhoneSessionEnvironment env, Nanos now);
  ~PhoneSession() override;

  // The provider's messages, in order; and the socket's end (no stop came first).
  void on_stream_message(std::string_view text, Nanos now);
  void on_stream_closed(Nanos now);

  void tick(Nanos now) override;
  Nanos next_deadline(Nanos now) const override;
  void end(SessionEnd reason, Nanos now) override;
  Call& call() override { return call_; }
  nlohmann::json snapshot(Nanos now) const override;
  PhoneSession* phone() override { return this; }

  struct Counts {
    uint64_t media_in = 0, media_out = 0, marks_sent = 0, marks_played = 0, clears = 0, dtmf = 0, refused = 0,
             provider_errors = 0;
  };
  const Counts& counts() const { return counts_; }

 private:
  // CallTransport: the conversation's output, to the provider.
  void send_audio(std::span<const uint8_t>, Nanos) override {}  // a PCM transport gets send_pcm
  void send_pcm(std::span<const int16_t> pcm_20ms, Nanos now) override;
  // Nothing to play this frame: the provider plays silence; what the resampler still holds of
  // the last sound goes out now, not at the start of the next.
  void skip_audio_frame() override;
  bool send_channel_text(uint16_t, std::string_view) override { return false; }
  void hang_up(SessionEnd reason, Nanos now) override;
  void output_segment_ended(Nanos now) override;
  void output_cleared(Nanos now) override;

  void on_start(const MediaStreamStart& start, Nanos now);
  void on_media(std::span<const uint8_t> ulaw, Nanos now);
  void on_mark(const std::string& name, Nanos now);
  void close_stream(uint16_t code, std::string reason);
  // The whole 20 ms frames of outbound_pending_, as media messages.
  void send_provider_frames();

  const PhonePlan plan_;
  std::shared_ptr<PhoneStreamLink> link_;  // null once closed
  WorkerMetrics& metrics_;
  const Nanos start_deadline_;
  std::unique_ptr<MediaStreamCodec> codec_;
  Counts counts_;
  bool started_ = false;
  std::string stream_sid_;

  // 8 kHz <-> the Call's rate, with the partial frames between them.
  Resampler inbound_resampler_;
  Resampler outbound_resampler_;
  std::vector<int16_t> pcm8k_;             // one decoded media payload
  std::vector<int16_t> inbound_pending_;   // at the Call's rate, less than a frame left over
  std::vector<int16_t> outbound_pending_;  // at 8 kHz, less than a media frame left over
  bool outbound_resampler_holds_sound_ = false;  // sent through it since its last flush
  std::vector<uint8_t> ulaw_out_;
  std::string media_text_;

  uint64_t next_mark_ = 1;
  std::deque<std::string> pending_marks_;

  Call call_;  // last: it may call back into the members above while it is built and ended
};

}  // namespace rtce
