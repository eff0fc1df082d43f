// echo_backend_core.cpp — see echo_backend_core.h.
#include "echo_backend_core.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace rtce {
namespace {

constexpr Nanos kFrameDuration = 20'000'000;
// Loopback keeps this much beyond the delay so a burst of input is not dropped.
constexpr size_t kLoopbackSlackFrames = 50;

}  // namespace

double frame_level_dbfs(std::span<const int16_t> pcm) {
  if (pcm.empty()) return -120.0;
  double sum = 0;
  for (int16_t s : pcm) sum += static_cast<double>(s) * s;
  const double mean_square = sum / static_cast<double>(pcm.size());
  if (mean_square <= 0) return -120.0;
  return std::max(-120.0, 10.0 * std::log10(mean_square / (32768.0 * 32768.0)));
}

EchoCore::EchoCore(Mode mode, int sample_rate, Nanos loopback_delay, VadConfig vad)
    : mode_(mode),
      samples_per_frame_(sample_rate > 0 ? static_cast<size_t>(sample_rate / 50) : 0),
      loopback_delay_(loopback_delay),
      vad_(vad) {
  if (samples_per_frame_ == 0) throw std::invalid_argument("EchoCore sample rate");
  if (loopback_delay_ < 0) throw std::invalid_argument("EchoCore loopback delay");
  if (vad_.max_utterance < kFrameDuration) throw std::invalid_argument("EchoCore max utterance");
  if (mode_ == Mode::loopback) {
    capacity_frames_ = static_cast<size_t>(loopback_delay_ / kFrameDuration) + kLoopbackSlackFrames;
    release_at_.resize(capacity_frames_);
  } else {
    capacity_frames_ = static_cast<size_t>(vad_.max_utterance / kFrameDuration);
  }
  buffer_.resize(capacity_frames_ * samples_per_frame_);
}

void EchoCore::on_input_frame(std::span<const int16_t> pcm, Nanos now) {
  if (pcm.size() != samples_per_frame_) {
    ++frames_refused_;
    return;
  }
  if (mode_ == Mode::loopback) {
    loopback_input(pcm, now);
  } else {
    parrot_input(pcm, now);
  }
}

void EchoCore::loopback_input(std::span<const int16_t> pcm, Nanos now) {
  if (count_ == capacity_frames_) {  // the player stalled: keep the newest audio
    ++frames_dropped_;
    head_ = (head_ + 1) % capacity_frames_;
    --count_;
  }
  const size_t index = (head_ + count_) % capacity_frames_;
  std::copy(pcm.begin(), pcm.end(), frame_at(index).begin());
  release_at_[index] = now + loopback_delay_;
  ++count_;
}

void EchoCore::parrot_input(std::span<const int16_t> pcm, Nanos now) {
  if (state_ == ParrotState::replaying) {
    // Our own replay would come back through the caller's microphone; not listening
    // until it ends keeps the parrot from repeating itself.
    ++frames_ignored_;
    return;
  }
  const bool speech = frame_level_dbfs(pcm) > vad_.speech_threshold_dbfs;
  if (state_ == ParrotState::idle) {
    if (!speech) return;
    state_ = ParrotState::recording;
    recorded_ = 0;
    ++utterances_;
    emit(EchoEvent::utterance_started, now);
  }
  std::copy(pcm.begin(), pcm.end(), frame_at(recorded_).begin());
  ++recorded_;
  if (speech) {
    last_speech_frame_ = recorded_ - 1;
    last_speech_at_ = now;
  }
  if (now - last_speech_at_ >= vad_.hangover || recorded_ == capacity_frames_) end_utterance(now);
}

void EchoCore::end_utterance(Nanos now) {
  const size_t tail_frames = static_cast<size_t>(vad_.replay_tail / kFrameDuration);
  replay_end_ = std::min(recorded_, last_speech_frame_ + 1 + tail_frames);
  replay_next_ = 0;
  state_ = ParrotState::replaying;
  emit(EchoEvent::utterance_ended, now);
}

bool EchoCore::pop_output(std::span<int16_t> out, Nanos now) {
  if (out.size() < samples_per_frame_) return false;
  if (mode_ == Mode::loopback) {
    if (count_ == 0 || release_at_[head_] > now) return false;
    const std::span<int16_t> frame = frame_at(head_);
    std::copy(frame.begin(), frame.end(), out.begin());
    head_ = (head_ + 1) % capacity_frames_;
    --count_;
    return true;
  }
  if (state_ != ParrotState::replaying) return false;
  const std::span<int16_t> frame = frame_at(replay_next_);
  std::copy(frame.begin(), frame.end(), out.begin());
  if (++replay_next_ == replay_end_) {
    state_ = ParrotState::idle;
    emit(EchoEvent::playback_finished, now);
  }
  return true;
}

}  // namespace rtce
