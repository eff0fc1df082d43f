// xdp_flows.h — the flow side of the XDP data path: the ring buffer of flow-created
// events, the idle sweep of the `flows` map, its mirror into the shared flow store, and
// flows installed from the store. Used from the thread that polls events, except
// install_flow and the counters.
//
// XDP flows expire like the userspace relay's: the sweep deletes those idle for
// flows.idle_timeout, from the last_seen_ns the program keeps (xdp_flow_expiry.h).
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "clock.h"
#include "relaxed_counter.h"
#include "relay_core.h"
#include "rtce_xdp.h"

struct rtce_xdp;
struct ring_buffer;

namespace rtce {

class XdpFlows {
 public:
  // Opens the event ring buffer; throws XdpError. Flows older than watch_start that no
  // packet has touched count as active from watch_start (xdp_flow_last_activity).
  XdpFlows(rtce_xdp* skel, Nanos idle_timeout, Nanos watch_start);
  ~XdpFlows();
  XdpFlows(const XdpFlows&) = delete;
  XdpFlows& operator=(const XdpFlows&) = delete;

  int poll_events(int timeout_ms);
  void attach_flow_store(FlowStoreOutbox* sink, Nanos refresh_interval);
  bool take_flow_store_activity() {
    const bool was = store_activity_;
    store_activity_ = false;
    return was;
  }
  // A flow recovered from the store; `role` local (endpoint_id: the endpoint), ingress
  // (endpoint_id: the cluster, `endpoint` its relay) or owner (`via`: the ingress relay).
  void install_flow(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& endpoint,
                    uint8_t role = RTCE_RELAY_ROLE_LOCAL, const sockaddr_in6* via = nullptr);
  uint32_t expire_idle_flows(Nanos now);
  void use_key_walk() { sweep_.walk = true; }

  uint64_t flows_installed() const { return flows_installed_.get(); }
  uint64_t flows_expired() const { return flows_expired_.get(); }
  uint64_t events_seen() const { return events_seen_; }

 private:
  static constexpr uint32_t kSweepChunk = 4096;
  struct RingDeleter {
    void operator()(ring_buffer* rb) const;
  };

  static int on_event(void* ctx, void* data, size_t size);
  // Hands a flow of the map to the store sink by its role; false if it keeps no such flows.
  bool mirror(const rtce_flow_key& key, uint8_t role, uint16_t endpoint_id);
  // Reads the next chunk of the flows map for the sweep into sweep_.keys/values; returns the
  // count and sets `last` at the end of a pass. Batch lookup where the kernel has it, a
  // get_next_key walk otherwise.
  uint32_t read_sweep_chunk(int fd, bool& last);

  rtce_xdp* skel_;
  std::unique_ptr<ring_buffer, RingDeleter> ring_;
  uint64_t events_seen_ = 0;
  FlowStoreOutbox* store_sink_ = nullptr;
  Nanos store_refresh_interval_ = 0;
  bool store_activity_ = false;
  RelaxedCounter flows_installed_;

  // The idle sweep (touched only by the polling thread, except the counter).
  Nanos idle_timeout_;
  Nanos watch_start_;
  struct Sweep {
    bool in_pass = false;
    bool have_cursor = false;
    uint32_t cursor = 0;  // the kernel's batch position (a hash bucket) to resume from
    Nanos next_pass = 0;
    Nanos pass_start = 0;
    uint64_t visited = 0;
    uint64_t expired = 0;
    bool warned = false;
    bool walk = false;  // the kernel refused batch lookup: walk with get_next_key
    bool have_walk_key = false;
    rtce_flow_key walk_key{};  // the next key to visit, not yet visited
    bool refreshing = false;   // this pass also refreshes active flows in the store
    Nanos refresh_since = 0;   // flows with packets since then are refreshed
    Nanos next_refresh = 0;
    std::vector<rtce_flow_key> keys;
    std::vector<rtce_xdp_flow> values;
  } sweep_;
  RelaxedCounter flows_expired_;
};

}  // namespace rtce
