// echo_backend_core.h — the in-process echo backend, clock-driven and socket-free:
// `loopback` plays every input frame back after a fixed delay; `parrot` listens with an
// energy VAD until the caller stops speaking, then replays the whole utterance once.
// Frames are 20 ms of mono PCM at the configured rate; all memory is reserved up front.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "clock.h"

namespace rtce {

struct VadConfig {
  double speech_threshold_dbfs = -45.0;  // a frame louder than this (RMS) is speech
  Nanos hangover = 700'000'000;          // silence that ends an utterance
  Nanos max_utterance = 10'000'000'000;  // longer speech is cut and replayed as is
  Nanos replay_tail = 100'000'000;       // silence kept after the last speech frame
};

enum class EchoEvent { utterance_started, utterance_ended, playback_finished };

// RMS level of a frame in dBFS (full-scale square wave = 0); -120 for digital silence.
double frame_level_dbfs(std::span<const int16_t> pcm);

class EchoCore {
 public:
  enum class Mode { loopback, parrot };
  using Listener = std::function<void(EchoEvent, Nanos)>;
  static constexpr Nanos kDefaultLoopbackDelay = 500'000'000;

  EchoCore(Mode mode, int sample_rate, Nanos loopback_delay = kDefaultLoopbackDelay, VadConfig vad = {});

  // Called from the session, outside the media path's hot loop; the listener must not
  // call back into this object.
  void set_listener(Listener listener) { listener_ = std::move(listener); }

  // One 20 ms input frame (samples_per_frame() samples; other sizes are refused, counted).
  void on_input_frame(std::span<const int16_t> pcm, Nanos now);
  // Fills `out` (samples_per_frame() long) with the next frame to play at `now`; false
  // when nothing is ready.
  bool pop_output(std::span<int16_t> out, Nanos now);

  Mode mode() const { return mode_; }
  size_t samples_per_frame() const { return samples_per_frame_; }
  bool in_utterance() const { return state_ == ParrotState::recording; }
  bool replaying() const { return state_ == ParrotState::replaying; }
  uint64_t frames_refused() const { return frames_refused_; }
  uint64_t frames_dropped() const { return frames_dropped_; }  // loopback ring overflow
  uint64_t frames_ignored() const { return frames_ignored_; }  // input while replaying
  uint64_t utterances() const { return utterances_; }

 private:
  enum class ParrotState { idle, recording, replaying };

  std::span<int16_t> frame_at(size_t index) {
    return {buffer_.data() + index * samples_per_frame_, samples_per_frame_};
  }
  void emit(EchoEvent event, Nanos now) {
    if (listener_) listener_(event, now);
  }
  void loopback_input(std::span<const int16_t> pcm, Nanos now);
  void parrot_input(std::span<const int16_t> pcm, Nanos now);
  void end_utterance(Nanos now);

  Mode mode_;
  size_t samples_per_frame_;
  Nanos loopback_delay_;
  VadConfig vad_;
  Listener listener_;

  // Frame storage: the loopback ring, or the parrot's utterance.
  std::vector<int16_t> buffer_;
  size_t capacity_frames_;

  // loopback
  std::vector<Nanos> release_at_;
  size_t head_ = 0;
  size_t count_ = 0;

  // parrot
  ParrotState state_ = ParrotState::idle;
  size_t recorded_ = 0;
  size_t last_speech_frame_ = 0;
  Nanos last_speech_at_ = 0;
  size_t replay_end_ = 0;
  size_t replay_next_ = 0;

  uint64_t frames_refused_ = 0;
  uint64_t frames_dropped_ = 0;
  uint64_t frames_ignored_ = 0;
  uint64_t utterances_ = 0;
};

}  // namespace rtce
