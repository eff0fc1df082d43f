// sctp_stack.h — the process's one usrsctp instance, shared by every worker thread.
//
// usrsctp keeps process-global state, so this owns it: initialised once with
// usrsctp_init_nothreads (usrsctp starts no thread of its own), AF_CONN only, checksums
// computed. ONE mutex serialises every usrsctp call; it is taken only when SCTP packets or
// data-channel messages flow, never on the audio path. usrsctp's output and receive
// callbacks run inside those calls (with the mutex held, possibly on another worker's
// thread when that worker fired the timers), so they only reach an association through the
// registry here (id -> SctpSink) and only append to its own queues. See docs/data-channels.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "common/clock.h"

struct sctp_rcvinfo;
struct socket;
union sctp_sockstore;

namespace rtce {

// What usrsctp's callbacks may touch of an association: called with the stack mutex held,
// on whichever thread is inside usrsctp; implementations only append to bounded queues.
class SctpSink {
 public:
  virtual void on_sctp_output(const uint8_t* packet, size_t length) = 0;
  // A data chunk piece (flags without MSG_NOTIFICATION) or a notification.
  virtual void on_sctp_receive(const uint8_t* data, size_t length, const sctp_rcvinfo& info, int flags) = 0;
  // usrsctp signalled the socket is gone (a receive callback without data).
  virtual void on_sctp_socket_closed() = 0;

 protected:
  ~SctpSink() = default;
};

class SctpStack {
 public:
  // Initialises usrsctp on first use (thread-safe: a function-local static).
  static SctpStack& instance();

  // Advances usrsctp's timers by the milliseconds elapsed since the last run by ANY thread:
  // a compare-exchange on the last run's time lets exactly one caller per millisecond step
  // through, so more workers never make SCTP time run faster. Skips without locking when
  // no association exists.
  void tick(Nanos now);

  size_t associations() const { return associations_.load(std::memory_order_relaxed); }
  // Callbacks usrsctp made for an association already destroyed (a pending timer, say).
  uint64_t orphan_callbacks() const { return orphan_callbacks_.load(std::memory_order_relaxed); }
  uint64_t timer_runs() const { return timer_runs_.load(std::memory_order_relaxed); }

  // Held around every usrsctp call. Callbacks run with it held and must not take it.
  std::mutex& mutex() { return mutex_; }

  // Registry, with mutex() held. Ids are never reused, so a stale id finds nothing.
  uint64_t add(SctpSink* sink);
  void remove(uint64_t id);
  SctpSink* find(uint64_t id) const;
  void count_orphan() { orphan_callbacks_.fetch_add(1, std::memory_order_relaxed); }

 private:
  SctpStack();
  SctpStack(const SctpStack&) = delete;
  SctpStack& operator=(const SctpStack&) = delete;

  std::mutex mutex_;
  std::unordered_map<uint64_t, SctpSink*> sinks_;  // guarded by mutex_
  uint64_t next_id_ = 1;                           // guarded by mutex_
  std::atomic<size_t> associations_{0};
  std::atomic<int64_t> last_timer_ms_{0};  // 0: the next tick only sets the base
  std::atomic<uint64_t> orphan_callbacks_{0};
  std::atomic<uint64_t> timer_runs_{0};
};

// The receive callback every association socket is created with (usrsctp_socket).
int rtce_sctp_receive(struct socket* socket, union sctp_sockstore address, void* data, size_t length,
                      struct sctp_rcvinfo info, int flags, void* ulp_info);

// The ulp_info/address handle usrsctp carries for an association id, and back.
inline void* sctp_handle(uint64_t id) { return reinterpret_cast<void*>(static_cast<uintptr_t>(id)); }
inline uint64_t sctp_handle_id(const void* handle) { return reinterpret_cast<uintptr_t>(handle); }

}  // namespace rtce
