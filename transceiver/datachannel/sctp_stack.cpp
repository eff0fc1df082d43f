// sctp_stack.cpp — see sctp_stack.h.
#include "sctp_stack.h"

#include <usrsctp.h>

#include <cstdlib>

namespace rtce {
namespace {

// usrsctp -> DTLS. `addr` is the sconn_addr the association registered: its id.
int conn_output(void* addr, void* buffer, size_t length, uint8_t /*tos*/, uint8_t /*set_df*/) {
  SctpStack& stack = SctpStack::instance();
  SctpSink* sink = stack.find(sctp_handle_id(addr));
  if (sink == nullptr) {
    stack.count_orphan();
    return 0;
  }
  sink->on_sctp_output(static_cast<const uint8_t*>(buffer), length);
  return 0;
}

}  // namespace

int rtce_sctp_receive(struct socket*, union sctp_sockstore, void* data, size_t length,
                      struct sctp_rcvinfo info, int flags, void* ulp_info) {
  SctpStack& stack = SctpStack::instance();
  SctpSink* sink = stack.find(sctp_handle_id(ulp_info));
  if (sink == nullptr) {
    stack.count_orphan();
  } else if (data == nullptr) {
    sink->on_sctp_socket_closed();
  } else {
    sink->on_sctp_receive(static_cast<const uint8_t*>(data), length, info, flags);
  }
  free(data);  // usrsctp hands the buffer over (malloc'd)
  return 1;
}

SctpStack& SctpStack::instance() {
  static SctpStack stack;
  return stack;
}

SctpStack::SctpStack() {
  // Port 0: no UDP encapsulation socket, hence no receive thread; nothreads: no timer thread.
  usrsctp_init_nothreads(0, conn_output, nullptr);
  // As libwebrtc and mediasoup do: browsers' SCTP does not do ECN, ASCONF or AUTH.
  usrsctp_sysctl_set_sctp_ecn_enable(0);
  usrsctp_sysctl_set_sctp_asconf_enable(0);
  usrsctp_sysctl_set_sctp_auth_enable(0);
  // Answer out-of-the-blue packets with nothing rather than ABORTs: a stale or forged packet
  // must not make usrsctp talk.
  usrsctp_sysctl_set_sctp_blackhole(2);
  // A dead peer is detected in seconds, not the default minutes; DTLS/ICE consent usually
  // notices first, but an association must not outlive a vanished browser by long.
  usrsctp_sysctl_set_sctp_rto_max_default(10'000);
  usrsctp_sysctl_set_sctp_init_rto_max_default(10'000);
  usrsctp_disable_crc32c_offload();
}

void SctpStack::tick(Nanos now) {
  if (associations() == 0) return;
  const int64_t now_ms = now / 1'000'000;
  int64_t last = last_timer_ms_.load(std::memory_order_acquire);
  if (last == 0) {
    last_timer_ms_.compare_exchange_strong(last, now_ms, std::memory_order_acq_rel);
    return;
  }
  if (now_ms <= last) return;
  if (!last_timer_ms_.compare_exchange_strong(last, now_ms, std::memory_order_acq_rel)) return;
  const int64_t elapsed = now_ms - last;
  std::lock_guard lock(mutex_);
  usrsctp_handle_timers(static_cast<uint32_t>(elapsed > 60'000 ? 60'000 : elapsed));
  timer_runs_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t SctpStack::add(SctpSink* sink) {
  const uint64_t id = next_id_++;
  sinks_.emplace(id, sink);
  // From no association to one: usrsctp's clock was idle, so the next tick sets a new base
  // rather than replaying the idle time into the new association's timers.
  if (associations_.fetch_add(1, std::memory_order_relaxed) == 0) last_timer_ms_.store(0);
  return id;
}

void SctpStack::remove(uint64_t id) {
  if (sinks_.erase(id) != 0) associations_.fetch_sub(1, std::memory_order_relaxed);
}

SctpSink* SctpStack::find(uint64_t id) const {
  auto it = sinks_.find(id);
  return it == sinks_.end() ? nullptr : it->second;
}

}  // namespace rtce
