// echo_backend.cpp — the in-process echo backend for demos and tests. loopback: a delay
// line of frames, each played back once after loopback_delay. parrot: an energy VAD records
// one utterance and replays it once at 20 ms pace. Output comes only from a timer on the
// io_context, never from inside send_audio, so the session sees the same re-entrancy rules
// as with the WebSocket backend.
#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cmath>

#include "backend.h"
#include "backend_protocol.h"

namespace rtce {

namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kFrame = 20ms;
constexpr double kSpeechRms = 500.0;      // about -36 dBFS: speech, not room noise
constexpr int kHangoverFrames = 35;       // 700 ms of silence ends an utterance
constexpr int kMaxUtteranceFrames = 500;  // 10 s
constexpr size_t kExtraDelayFrames = 50;  // the delay line holds the delay plus 1 s of burst
constexpr size_t kMaxOpusPacketBytes = 4000;

struct DelayedFrame {
  Clock::time_point due;
  bool is_opus = false;
  std::vector<int16_t> pcm;
  std::vector<uint8_t> opus;
};

class EchoImpl : public std::enable_shared_from_this<EchoImpl> {
 public:
  EchoImpl(asio::io_context& io, const EchoBackendConfig& config, const BackendSessionInfo& info,
           BackendListener& listener, BackendCounters& counters)
      : config_(config),
        opus_passthrough_(info.opus_passthrough),
        frame_samples_(pcm_frame_bytes(info.sample_rate) / 2),
        listener_(&listener),
        counters_(&counters),
        timer_(io),
        delay_line_(static_cast<size_t>(std::max<Nanos>(config.loopback_delay, 0) / 20'000'000) +
                    kExtraDelayFrames) {
    for (auto& slot : delay_line_) slot.pcm.reserve(frame_samples_);
    out_pcm_.reserve(frame_samples_);
    if (config_.mode == EchoBackendConfig::Mode::parrot && !opus_passthrough_) {
      utterance_.reserve(frame_samples_ * kMaxUtteranceFrames);
    }
  }

  void start() {
    if (frame_samples_ == 0) {
      invalid_ = true;
      arm(Clock::now());
    }
  }

  void send_audio(std::span<const int16_t> pcm) {
    if (!listener_) return;
    if (pcm.size() != frame_samples_ || opus_passthrough_) {
      counters_->frames_dropped_outbound.add();
      return;
    }
    counters_->frames_sent.add();
    if (parrot()) return listen(pcm);
    DelayedFrame* slot = push_delayed();
    slot->is_opus = false;
    slot->pcm.assign(pcm.begin(), pcm.end());
  }

  void send_opus(std::span<const uint8_t> packet) {
    if (!listener_) return;
    if (!opus_passthrough_ || packet.empty() || packet.size() > kMaxOpusPacketBytes) {
      counters_->frames_dropped_outbound.add();
      return;
    }
    counters_->frames_sent.add();
    DelayedFrame* slot = push_delayed();
    slot->is_opus = true;
    slot->opus.assign(packet.begin(), packet.end());
  }

  void send_event(const nlohmann::json& event) {
    if (!listener_ || !event.is_object() || event.value("type", "") != "demo.clear") return;
    delayed_count_ = 0;
    utterance_.clear();
    recording_ = replaying_ = false;
    clear_pending_ = true;
    arm(Clock::now());
  }

  void close() {
    listener_ = nullptr;
    counters_ = nullptr;
    timer_.cancel();
  }

 private:
  bool parrot() const { return config_.mode == EchoBackendConfig::Mode::parrot && !opus_passthrough_; }

  // Appends to the delay line (dropping the oldest when full) and arms the timer.
  DelayedFrame* push_delayed() {
    if (delayed_count_ == delay_line_.size()) {
      delayed_head_ = (delayed_head_ + 1) % delay_line_.size();
      --delayed_count_;
      counters_->frames_dropped_outbound.add();
    }
    DelayedFrame& slot = delay_line_[(delayed_head_ + delayed_count_) % delay_line_.size()];
    ++delayed_count_;
    slot.due = Clock::now() + std::chrono::nanoseconds(config_.loopback_delay);
    arm(slot.due);
    return &slot;
  }

  void listen(std::span<const int16_t> pcm) {
    if (replaying_) return;  // half duplex: the parrot does not record itself
    double energy = 0;
    for (int16_t sample : pcm) energy += static_cast<double>(sample) * sample;
    bool speech = std::sqrt(energy / static_cast<double>(pcm.size())) > kSpeechRms;
    if (!recording_) {
      if (!speech) return;
      recording_ = true;
      silent_frames_ = 0;
      utterance_.clear();
    }
    utterance_.insert(utterance_.end(), pcm.begin(), pcm.end());
    silent_frames_ = speech ? 0 : silent_frames_ + 1;
    size_t frames = utterance_.size() / frame_samples_;
    if (silent_frames_ < kHangoverFrames && frames < kMaxUtteranceFrames) return;
    // Drop the trailing silence that ended the utterance; replay the rest once.
    utterance_.resize((frames - static_cast<size_t>(silent_frames_)) * frame_samples_);
    recording_ = false;
    replaying_ = true;
    replay_announced_ = false;
    replay_frame_ = 0;
    replay_due_ = Clock::now();
    arm(replay_due_);
  }

  void arm(Clock::time_point due) {
    if (waiting_ && due >= armed_due_) return;
    waiting_ = true;
    armed_due_ = due;
    timer_.expires_at(due);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;  // cancelled: a newer wait or close() owns the timer now
      self->waiting_ = false;
      self->on_timer();
    });
  }

  // Every listener call may close or destroy the connection: listener_ is re-checked each time.
  void on_timer() {
    Clock::time_point now = Clock::now();
    if (invalid_ && listener_) {
      std::exchange(listener_, nullptr)
          ->on_backend_closed("invalid_session: sample rate not 8..48 kHz in 50 Hz steps");
      return;
    }
    if (clear_pending_ && listener_) {
      clear_pending_ = false;
      listener_->on_backend_clear();
    }
    while (listener_ && delayed_count_ > 0 && delay_line_[delayed_head_].due <= now) {
      DelayedFrame& slot = delay_line_[delayed_head_];
      delayed_head_ = (delayed_head_ + 1) % delay_line_.size();
      --delayed_count_;
      counters_->frames_received.add();
      // Deliver from scratch buffers: a send from inside the callback may refill this slot.
      if (slot.is_opus) {
        out_opus_.swap(slot.opus);
        listener_->on_backend_opus(out_opus_);
      } else {
        out_pcm_.swap(slot.pcm);
        listener_->on_backend_audio(out_pcm_);
      }
    }
    if (listener_ && replaying_) {
      if (!replay_announced_) {
        replay_announced_ = true;
        listener_->on_backend_event(
            {{"type", "event"}, {"name", "parrot.replay"}, {"ms", utterance_.size() / frame_samples_ * 20}});
      }
      while (listener_ && replaying_ && replay_due_ <= now) {
        std::span<const int16_t> frame(utterance_.data() + replay_frame_ * frame_samples_, frame_samples_);
        ++replay_frame_;
        replay_due_ += kFrame;
        if (replay_frame_ * frame_samples_ >= utterance_.size()) replaying_ = false;
        counters_->frames_received.add();
        listener_->on_backend_audio(frame);
      }
    }
    if (!listener_) return;
    if (delayed_count_ > 0) arm(delay_line_[delayed_head_].due);
    if (replaying_) arm(replay_due_);
  }

  const EchoBackendConfig config_;
  const bool opus_passthrough_;
  const size_t frame_samples_;
  BackendListener* listener_;
  BackendCounters* counters_;
  asio::steady_timer timer_;
  bool waiting_ = false;
  Clock::time_point armed_due_{};
  bool invalid_ = false;
  bool clear_pending_ = false;
  std::vector<DelayedFrame> delay_line_;
  size_t delayed_head_ = 0;
  size_t delayed_count_ = 0;
  std::vector<int16_t> out_pcm_;
  std::vector<uint8_t> out_opus_;
  std::vector<int16_t> utterance_;
  bool recording_ = false;
  bool replaying_ = false;
  bool replay_announced_ = false;
  int silent_frames_ = 0;
  size_t replay_frame_ = 0;
  Clock::time_point replay_due_{};
};

class EchoBackend final : public BackendConnection {
 public:
  explicit EchoBackend(std::shared_ptr<EchoImpl> impl) : impl_(std::move(impl)) {}
  ~EchoBackend() override { impl_->close(); }

  void send_audio(std::span<const int16_t> pcm_20ms) override { impl_->send_audio(pcm_20ms); }
  void send_opus(std::span<const uint8_t> packet) override { impl_->send_opus(packet); }
  void send_event(const nlohmann::json& event) override { impl_->send_event(event); }
  void close(std::string_view) override { impl_->close(); }

 private:
  std::shared_ptr<EchoImpl> impl_;
};

}  // namespace

std::unique_ptr<BackendConnection> make_echo_backend(asio::io_context& io, const EchoBackendConfig& config,
                                                     BackendSessionInfo info, BackendListener& listener,
                                                     BackendCounters& counters) {
  auto impl = std::make_shared<EchoImpl>(io, config, info, listener, counters);
  impl->start();
  return std::make_unique<EchoBackend>(std::move(impl));
}

}  // namespace rtce
