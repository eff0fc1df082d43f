// xdp_flows.cpp — see xdp_flows.h.
#include "xdp_flows.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rtce_xdp.skel.h"
#include "xdp_error.h"
#include "xdp_flow_expiry.h"
#include "xdp_map_sync.h"

namespace rtce {

void XdpFlows::RingDeleter::operator()(ring_buffer* rb) const { ring_buffer__free(rb); }

XdpFlows::XdpFlows(rtce_xdp* skel, Nanos idle_timeout, Nanos watch_start)
    : skel_(skel), idle_timeout_(idle_timeout), watch_start_(watch_start) {
  ring_.reset(ring_buffer__new(bpf_map__fd(skel_->maps.events), &XdpFlows::on_event, this, nullptr));
  if (!ring_) throw XdpError("opening the flow event ring buffer failed: " + xdp_errno_text(errno));
}

XdpFlows::~XdpFlows() = default;

int XdpFlows::on_event(void* ctx, void* data, size_t size) {
  auto* self = static_cast<XdpFlows*>(ctx);
  if (size < sizeof(rtce_xdp_flow_event)) return 0;
  rtce_xdp_flow_event event;
  std::memcpy(&event, data, sizeof event);
  self->events_seen_++;
  if (self->store_sink_) self->store_activity_ |= self->mirror(event.key, event.role, event.endpoint_id);
  if (spdlog::should_log(spdlog::level::debug))
    spdlog::debug("xdp: flow {} -> endpoint {}", flow_client(event.key).to_string(), event.endpoint_id);
  return 0;
}

int XdpFlows::poll_events(int timeout_ms) {
  // The program submits events without waking us (BPF_RB_NO_WAKEUP: a wakeup per new
  // flow cost several microseconds in the program) unless half the ring is waiting, so
  // epoll usually does not fire: the poll is a timer, and the ring is read after it. The
  // wait is capped so an event waits at most kEventPollSliceMs before it is mirrored into
  // userspace; the caller loops, so returning early is harmless.
  constexpr int kEventPollSliceMs = 10;
  const int wait = timeout_ms < 0 ? kEventPollSliceMs : std::min(timeout_ms, kEventPollSliceMs);
  int n = ring_buffer__poll(ring_.get(), wait);
  const int more = ring_buffer__consume(ring_.get());
  if (n < 0) n = 0;
  return more > 0 ? n + more : n;
}

uint32_t XdpFlows::expire_idle_flows(Nanos now) {
  Sweep& s = sweep_;
  if (!s.in_pass) {
    if (now < s.next_pass) return 0;
    s.in_pass = true;
    s.have_cursor = false;
    s.pass_start = now;
    s.visited = s.expired = 0;
    s.next_pass = now + xdp_sweep_interval(idle_timeout_);
    s.refreshing = store_sink_ && now >= s.next_refresh;
    if (s.refreshing) {
      // Flows with packets since the previous refresh pass began (or one interval ago).
      s.refresh_since =
          s.next_refresh ? s.next_refresh - store_refresh_interval_ : now - store_refresh_interval_;
      s.next_refresh = now + store_refresh_interval_;
    }
    if (s.keys.empty()) {  // once: no allocation per pass
      s.keys.resize(kSweepChunk);
      s.values.resize(kSweepChunk);
    }
  }
  const int fd = bpf_map__fd(skel_->maps.flows);
  bool last_batch = false;
  const uint32_t count = read_sweep_chunk(fd, last_batch);
  s.visited += count;

  uint32_t expired = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (!xdp_flow_idle(s.values[i], now, idle_timeout_, watch_start_)) {
      if (s.refreshing && store_sink_ && static_cast<Nanos>(s.values[i].last_seen_ns) >= s.refresh_since)
        store_activity_ |= mirror(s.keys[i], s.values[i].role, s.values[i].endpoint_id);
      continue;
    }
    // Look again just before deleting: a packet since the batch read may have refreshed it
    // (its last_seen is then ahead of, or within the timeout of, `now`).
    rtce_xdp_flow current{};
    if (bpf_map_lookup_elem(fd, &s.keys[i], &current) != 0) continue;  // gone already (LRU)
    if (!xdp_flow_idle(current, now, idle_timeout_, watch_start_)) continue;
    if (bpf_map_delete_elem(fd, &s.keys[i]) == 0) expired++;
  }
  s.expired += expired;
  if (expired) flows_expired_.add(expired);
  if (last_batch) {
    s.in_pass = false;
    if (s.expired && spdlog::should_log(spdlog::level::debug))
      spdlog::debug("xdp: idle sweep expired {} of {} flows (idle >= {} ms) in {:.1f} ms", s.expired,
                    s.visited, idle_timeout_ / 1'000'000,
                    static_cast<double>(monotonic_now() - s.pass_start) / 1e6);
  }
  return expired;
}

uint32_t XdpFlows::read_sweep_chunk(int fd, bool& last) {
  Sweep& s = sweep_;
  last = false;
  if (!s.walk) {
    // A batch lookup resumes from a hash bucket, not from a key, so deleting what it
    // returned cannot make the next batch start over (get_next_key from a deleted key would).
    uint32_t count = kSweepChunk;
    uint32_t next_cursor = 0;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    const int rc = bpf_map_lookup_batch(fd, s.have_cursor ? &s.cursor : nullptr, &next_cursor, s.keys.data(),
                                        s.values.data(), &count, &opts);
    const int err = rc ? errno : 0;
    if (!err || err == ENOENT) {  // ENOENT: the end of the map; `count` entries still came back
      s.cursor = next_cursor;
      s.have_cursor = true;
      last = err == ENOENT;
      return count;
    }
    if (err != EINVAL && err != ENOTSUP && err != EOPNOTSUPP && err != ENOSYS) {
      if (!s.warned)
        spdlog::warn(
            "xdp: idle sweep cannot read the flows map ({}); XDP flows leave it only when it is full",
            xdp_errno_text(err));
      s.warned = true;
      last = true;
      return 0;
    }
    spdlog::info(
        "xdp: the kernel refused a batch lookup of the flows map ({}); the idle sweep walks it key "
        "by key instead",
        xdp_errno_text(err));
    s.walk = true;
    s.have_walk_key = false;
  }
  // Key-by-key walk. The chunk ends one key early: that key (not yet visited) is where the
  // next chunk resumes, so deleting idle flows of this chunk never loses the position. A
  // resume key that vanished meanwhile (LRU) restarts the pass: slower, never wrong.
  uint32_t count = 0;
  bool more = false;
  const rtce_flow_key resume = s.walk_key;
  const bool resuming = s.have_walk_key;
  if (resuming) s.keys[count++] = resume;
  for_each_key<rtce_flow_key>(
      fd,
      [&](const rtce_flow_key& key) {
        if (count < kSweepChunk) {
          s.keys[count++] = key;
        } else {  // one past the chunk: where the next one starts
          s.walk_key = key;
          more = true;
        }
      },
      kSweepChunk + 1 - count, resuming ? &resume : nullptr);
  s.have_walk_key = more;
  last = !more;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < count; i++)
    if (bpf_map_lookup_elem(fd, &s.keys[i], &s.values[kept]) == 0) s.keys[kept++] = s.keys[i];
  return kept;
}

void XdpFlows::attach_flow_store(FlowStoreOutbox* sink, Nanos refresh_interval) {
  store_sink_ = sink;
  store_refresh_interval_ = refresh_interval;
  sweep_.next_refresh = monotonic_now() + refresh_interval;
}

bool XdpFlows::mirror(const rtce_flow_key& key, uint8_t role, uint16_t endpoint_id) {
  // A local flow's record names its transceiver endpoint, an ingress flow's the owning
  // cluster (the program keeps the cluster id in endpoint_id), an owner flow's its endpoint
  // and the ingress relay of owner_via (the program writes it right after the event; one
  // still missing is put by the next refresh).
  switch (role) {
    case RTCE_RELAY_ROLE_LOCAL: store_sink_->put(key, endpoint_id); return true;
    case RTCE_RELAY_ROLE_INGRESS:
      store_sink_->put_ingress(key, static_cast<uint8_t>(endpoint_id));
      return true;
    case RTCE_RELAY_ROLE_OWNER: {
      rtce_xdp_endpoint via{};
      if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.owner_via), &key, &via) != 0) return false;
      store_sink_->put_owner(key, endpoint_id, from_xdp_endpoint(via).to_v6_mapped());
      return true;
    }
    default: return false;
  }
}

void XdpFlows::install_flow(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& endpoint,
                            uint8_t role, const sockaddr_in6* via) {
  rtce_xdp_flow value{};
  value.endpoint = to_xdp_endpoint(endpoint);
  value.endpoint_id = endpoint_id;
  value.role = role;
  value.last_seen_ns = static_cast<uint64_t>(monotonic_now());
  value.created_ns = value.last_seen_ns;
  const int flows_fd = bpf_map__fd(skel_->maps.flows);
  if (role == RTCE_RELAY_ROLE_OWNER) {
    // The return path needs the flow's ingress relay before the flow exists in the map; a
    // flow the program created meanwhile (a check) keeps the relay it wrote.
    rtce_xdp_flow existing{};
    if (!via || bpf_map_lookup_elem(flows_fd, &key, &existing) == 0) return;
    const rtce_xdp_endpoint via_value = to_xdp_endpoint(*via);
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.owner_via), &key, &via_value, BPF_ANY) != 0) return;
  }
  // BPF_NOEXIST: if the program created the flow meanwhile (a STUN check), keep its entry.
  if (bpf_map_update_elem(flows_fd, &key, &value, BPF_NOEXIST) == 0) flows_installed_.add();
}

}  // namespace rtce
