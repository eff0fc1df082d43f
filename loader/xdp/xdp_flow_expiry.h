// xdp_flow_expiry.h — when the loader's sweep deletes an XDP flow: flows.idle_timeout, the
// userspace relay's rule, applied to the BPF `flows` map from the last_seen_ns the program
// keeps (coarsely) per flow. Pure functions of their inputs, so they are tested without BPF.
#pragma once

#include <cstdint>

#include "clock.h"
#include "rtce_xdp.h"

namespace rtce {

// The last client activity the sweep trusts for a flow: its last_seen_ns, never earlier
// than its creation. A flow that an older loader created and no packet has touched since
// reads last_seen_ns 0; it counts as active when this loader started watching
// (watch_start), so it gets a full idle timeout to show it is alive before it goes.
inline Nanos xdp_flow_last_activity(const rtce_xdp_flow& flow, Nanos watch_start) {
  const auto last_seen = static_cast<Nanos>(flow.last_seen_ns);
  const auto created = static_cast<Nanos>(flow.created_ns);
  if (flow.last_seen_ns == 0) return created > watch_start ? created : watch_start;
  return last_seen > created ? last_seen : created;
}

// True when the flow has seen no client packet for idle_timeout. A last activity after
// `now` (the program's coarse clock against ours, or a flow created since now was read)
// is not idle.
inline bool xdp_flow_idle(const rtce_xdp_flow& flow, Nanos now, Nanos idle_timeout, Nanos watch_start) {
  const Nanos last = xdp_flow_last_activity(flow, watch_start);
  return last <= now && now - last >= idle_timeout;
}

// How old the program lets last_seen_ns get before a hit rewrites it: 1 s, or a quarter of
// a shorter idle timeout, so that a flow sending more often than every 3/4 of the timeout
// never looks idle (its stored time trails its last packet by less than a granularity).
inline uint32_t xdp_last_seen_granularity(Nanos idle_timeout) {
  constexpr Nanos kMax = RTCE_XDP_DEFAULT_LAST_SEEN_GRANULARITY_NS;
  const Nanos quarter = idle_timeout / 4;
  return static_cast<uint32_t>(quarter >= kMax ? kMax : quarter < 1 ? 1 : quarter);
}

// How often a sweep pass starts: as often as the granularity (more would find nothing
// new), but no more than every 10 ms (the event poll's slice, which paces the sweep).
inline Nanos xdp_sweep_interval(Nanos idle_timeout) {
  const Nanos g = xdp_last_seen_granularity(idle_timeout);
  return g < 10'000'000 ? 10'000'000 : g;
}

}  // namespace rtce
