// xdp_data_path.cpp — see xdp_data_path.h.
#include "xdp_data_path.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <set>

#include "error.h"
#include "rtce_xdp.skel.h"
#include "xdp_flow_expiry.h"

namespace rtce {
namespace {

constexpr unsigned long kBpfFsMagic = 0xcafe4a11;

// libbpf reuses a pinned map only if its key and value sizes match; a `flows` value of
// another size would make every upgrade refuse to start until 'detach'. last_seen_ns took
// the place of padding to keep this size.
static_assert(sizeof(rtce_xdp_flow) == 40 && offsetof(rtce_xdp_flow, last_seen_ns) == 24 &&
                  offsetof(rtce_xdp_flow, created_ns) == 32,
              "the flows map value layout changed: pinned maps of older loaders would not be reused");
static_assert(sizeof(rtce_xdp_config) == 64, "the config map value size changed");

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

int libbpf_to_spdlog(enum libbpf_print_level level, const char* format, va_list args) {
  char line[1024];
  int n = std::vsnprintf(line, sizeof line, format, args);
  std::string text(line);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (level == LIBBPF_WARN)
    spdlog::warn("libbpf: {}", text);
  else
    spdlog::debug("libbpf: {}", text);
  return n;
}

// The maps whose contents must outlive a loader: state, configuration and counters.
// Scratch and per-CPU work maps are private to each program instance.
std::vector<bpf_map*> pinned_maps(rtce_xdp* skel) {
  return {skel->maps.vips,
          skel->maps.vip_ports,
          skel->maps.endpoints,
          skel->maps.flows,
          skel->maps.config,
          skel->maps.hint_keys,
          skel->maps.hint_failures,
          skel->maps.counters,
          skel->maps.events,
          skel->maps.flow_limit_config,
          skel->maps.hint_flow_limits,
          skel->maps.prefix_flow_limits};
}

// Pinned maps that hold only counters: when this build's layout differs from the pin's
// (a reason was added, so `counters` has more slots), the pin is replaced rather than the
// load refused. The old program keeps its own map until the link update swaps it out;
// the counters restart from zero, which Prometheus reads as a counter reset.
void replace_counter_pins_of_old_layout(rtce_xdp* skel, const std::filesystem::path& maps_dir) {
  for (bpf_map* map : {skel->maps.counters, skel->maps.hint_failures}) {
    const std::string path = (maps_dir / bpf_map__name(map)).string();
    const int fd = bpf_obj_get(path.c_str());
    if (fd < 0) continue;
    bpf_map_info info{};
    uint32_t info_len = sizeof info;
    const bool same =
        bpf_obj_get_info_by_fd(fd, &info, &info_len) == 0 && info.max_entries == bpf_map__max_entries(map) &&
        info.value_size == bpf_map__value_size(map) && info.key_size == bpf_map__key_size(map) &&
        info.type == static_cast<uint32_t>(bpf_map__type(map));
    close(fd);
    if (same) continue;
    spdlog::warn("xdp: pinned map {} has an older layout; replacing it (its counters restart from zero)",
                 path);
    if (unlink(path.c_str()) != 0)
      throw XdpError("replacing the pinned map " + path + ": " + errno_text(errno));
  }
}

void ensure_bpffs_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw XdpError("cannot create pin directory " + dir.string() + ": " + ec.message());
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0 || static_cast<unsigned long>(fs.f_type) != kBpfFsMagic)
    throw XdpError(dir.string() + " is not on a bpf filesystem; mount one (mount -t bpf bpf /sys/fs/bpf)");
}

void fill_addr(uint8_t out[16], const std::string& text, int family, const std::string& key) {
  if (text.empty()) return;
  auto parsed = SocketAddress::parse((family == AF_INET6 ? "[" + text + "]" : text) + ":1");
  if (!parsed || parsed->family() != family)
    throw ConfigError("config key '" + key + "': '" + text + "' is not an IPv" +
                      (family == AF_INET6 ? "6" : "4") + " address");
  parsed->to_bytes(out);
}

}  // namespace

void XdpDataPath::SkeletonDeleter::operator()(rtce_xdp* skel) const { rtce_xdp__destroy(skel); }
void XdpDataPath::RingDeleter::operator()(ring_buffer* rb) const { ring_buffer__free(rb); }

XdpDataPath::XdpDataPath(const RelayConfig& config)
    : pin_path_(config.xdp_pin_path),
      idle_timeout_(config.flow_idle_timeout),
      flow_limits_(config.flow_limits),
      watch_start_(monotonic_now()) {
  libbpf_set_print(libbpf_to_spdlog);
  if (geteuid() != 0) throw XdpError("XDP needs root (CAP_BPF and CAP_NET_ADMIN)");
  if (config.xdp_interfaces.empty())
    throw XdpError("config key 'xdp.interfaces' is empty: name the NICs to attach to");
  std::vector<std::pair<std::string, unsigned>> interfaces;
  for (const auto& name : config.xdp_interfaces) {
    unsigned index = if_nametoindex(name.c_str());
    if (index == 0) throw XdpError("xdp.interfaces: no interface named '" + name + "'");
    interfaces.emplace_back(name, index);
  }
  const std::filesystem::path root(pin_path_);
  std::error_code exists_ec;
  const bool fresh_pins = !std::filesystem::exists(root, exists_ec);
  ensure_bpffs_dir(root / "maps");
  ensure_bpffs_dir(root / "links");
  try {
    load_and_attach(config, interfaces);
  } catch (...) {
    // Undo what this attempt attached: a link pinned here would keep the program on that
    // interface after we give up (and --mode auto would then run "userspace" with XDP
    // still steering packets). Pins we did not create (a previous loader's) stay.
    std::error_code ec;
    for (const auto& link : created_links_) std::filesystem::remove(link, ec);
    if (fresh_pins) {
      skel_.reset();
      std::filesystem::remove_all(root, ec);
    }
    throw;
  }
}

void XdpDataPath::load_and_attach(const RelayConfig& config,
                                  const std::vector<std::pair<std::string, unsigned>>& interfaces) {
  const std::filesystem::path root(pin_path_);

  skel_.reset(rtce_xdp__open());
  if (!skel_) throw XdpError("opening the XDP object failed: " + errno_text(errno));
  for (bpf_map* map : pinned_maps(skel_.get())) {
    const std::string path = (root / "maps" / bpf_map__name(map)).string();
    if (int err = bpf_map__set_pin_path(map, path.c_str()); err)
      throw XdpError("pin path " + path + ": " + errno_text(err));
  }
  replace_counter_pins_of_old_layout(skel_.get(), root / "maps");
  // libbpf reuses a compatible pinned map (same type, sizes and flags) and pins new ones.
  if (int err = rtce_xdp__load(skel_.get()); err)
    throw XdpError("loading the XDP program failed (" + errno_text(err) +
                   "); the libbpf log above says why. If a pinned map has an old layout, run "
                   "'rtcedge-relay detach' first");
  possible_cpus_ = libbpf_num_possible_cpus();
  const int prog_fd = bpf_program__fd(skel_->progs.rtce_xdp);
  // The port filter from the (possibly pinned) VIPs before this program can run: pins of a
  // loader that predates `vip_ports` come with a fresh, empty one, which would make every
  // VIP packet "not ours" until the first sync.
  {
    auto ports = std::make_unique<rtce_xdp_vip_ports>();
    const int vip_fd = bpf_map__fd(skel_->maps.vips);
    rtce_xdp_vip_key key{}, next{};
    for (const rtce_xdp_vip_key* prev = nullptr; bpf_map_get_next_key(vip_fd, prev, &next) == 0;
         prev = &key) {
      key = next;
      rtce_xdp_vip_port_set(ports.get(), ntohs(key.port_be));
    }
    const uint32_t zero = 0;
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.vip_ports), &zero, ports.get(), BPF_ANY) != 0)
      throw XdpError("writing the vip_ports map: " + errno_text(errno));
  }

  for (const auto& [name, index] : interfaces) {
    const std::string link_path = (root / "links" / name).string();
    int link_fd = bpf_obj_get(link_path.c_str());
    if (link_fd >= 0) {
      // Atomic replace: the interface never runs without a program.
      int err = bpf_link_update(link_fd, prog_fd, nullptr);
      close(link_fd);
      if (err == 0) {
        attach_modes_.push_back(name + "=replaced");
        spdlog::info("xdp: replaced the program on {} through the pinned link {}", name, link_path);
        continue;
      }
      spdlog::warn("xdp: pinned link {} is stale ({}); attaching afresh", link_path, errno_text(err));
      unlink(link_path.c_str());
    }
    LIBBPF_OPTS(bpf_link_create_opts, opts);
    opts.flags = XDP_FLAGS_DRV_MODE;
    link_fd = bpf_link_create(prog_fd, static_cast<int>(index), BPF_XDP, &opts);
    std::string mode = "native";
    if (link_fd < 0) {
      const int native_err = errno;
      if (!config.xdp_allow_generic)
        throw XdpError("native XDP attach on " + name + " failed: " + errno_text(native_err) +
                       (native_err == EBUSY ? " (another XDP program is attached: 'ip link set dev " + name +
                                                  " xdp off' or 'rtcedge-relay detach')"
                                            : "") +
                       "; set xdp.allow_generic to accept generic (skb) mode");
      opts.flags = XDP_FLAGS_SKB_MODE;
      link_fd = bpf_link_create(prog_fd, static_cast<int>(index), BPF_XDP, &opts);
      if (link_fd < 0)
        throw XdpError("XDP attach on " + name + " failed in native (" + errno_text(native_err) +
                       ") and generic (" + errno_text(errno) + ") mode");
      mode = "generic";
      spdlog::warn(
          "xdp: {} does not take native XDP ({}); running in generic mode, which is slower than the "
          "userspace relay on some drivers",
          name, errno_text(native_err));
    }
    if (bpf_obj_pin(link_fd, link_path.c_str()) != 0) {
      const int err = errno;
      close(link_fd);
      throw XdpError("pinning the XDP link at " + link_path + " failed: " + errno_text(err));
    }
    close(link_fd);  // the pin holds the link: the program stays attached without us
    created_links_.push_back(link_path);
    attach_modes_.push_back(name + "=" + mode);
    spdlog::info("xdp: attached to {} in {} mode, link pinned at {}", name, mode, link_path);
  }

  ring_.reset(ring_buffer__new(bpf_map__fd(skel_->maps.events), &XdpDataPath::on_event, this, nullptr));
  if (!ring_) throw XdpError("opening the flow event ring buffer failed: " + errno_text(errno));
}

XdpDataPath::~XdpDataPath() = default;

void XdpDataPath::sync(const RelayConfig& config, const RoutingTable& routing) {
  rtce_xdp_config cfg{};
  fill_addr(cfg.relay_addr4, config.xdp_relay_address4, AF_INET, "xdp.relay_address4");
  fill_addr(cfg.relay_addr6, config.xdp_relay_address6, AF_INET6, "xdp.relay_address6");
  if (!config.xdp_relay_address4.empty()) cfg.flags |= RTCE_XDP_F_HAVE_V4;
  if (!config.xdp_relay_address6.empty()) cfg.flags |= RTCE_XDP_F_HAVE_V6;
  cfg.return_port_be = htons(config.xdp_return_port);
  cfg.cluster_id = routing.cluster_id;
  cfg.new_flow_budget = config.xdp_new_flow_budget;
  // From the idle timeout this instance sweeps with (a reload cannot change it).
  cfg.last_seen_granularity_ns = xdp_last_seen_granularity(idle_timeout_);
  const uint32_t zero = 0;
  auto update = [](bpf_map* map, const void* key, const void* value, const char* what) {
    if (bpf_map_update_elem(bpf_map__fd(map), key, value, BPF_ANY) != 0)
      throw XdpError(std::string("updating the ") + what + " map: " + errno_text(errno));
  };
  update(skel_->maps.hint_keys, &zero, &routing.keys, "hint_keys");

  // Endpoints: upsert the table, then delete ids it no longer has.
  std::set<uint16_t> wanted;
  std::map<uint16_t, rtce_xdp_endpoint> synced;
  for (const auto& [id, addr6] : routing.endpoints) {
    SocketAddress addr =
        SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&addr6), sizeof addr6).unmapped();
    rtce_xdp_endpoint ep{};
    ep.family = addr.to_bytes(ep.addr);
    ep.port_be = htons(addr.port());
    update(skel_->maps.endpoints, &id, &ep, "endpoints");
    wanted.insert(id);
    synced[id] = ep;
  }
  const int ep_fd = bpf_map__fd(skel_->maps.endpoints);
  uint16_t key = 0, next = 0;
  std::vector<uint16_t> stale;
  for (const uint16_t* prev = nullptr; bpf_map_get_next_key(ep_fd, prev, &next) == 0; prev = &key) {
    key = next;
    if (!wanted.count(key)) stale.push_back(key);
  }
  for (uint16_t id : stale) bpf_map_delete_elem(ep_fd, &id);
  const bool endpoints_changed =
      synced.size() != synced_endpoints_.size() ||
      !std::equal(synced.begin(), synced.end(), synced_endpoints_.begin(), [](const auto& a, const auto& b) {
        return a.first == b.first && std::memcmp(&a.second, &b.second, sizeof a.second) == 0;
      });
  const bool first_sync = !synced_once_;
  synced_once_ = true;
  synced_endpoints_ = std::move(synced);

  // VIPs: XDP matches exact addresses; a wildcard listen address stays userspace-only.
  // Upsert first, then delete the VIPs no longer listed: a restarted loader syncs while the
  // pinned program is forwarding, and a VIP missing even briefly would send its packets to
  // a kernel with no socket bound yet (lost with ICMP port unreachable).
  const int vip_fd = bpf_map__fd(skel_->maps.vips);
  std::vector<rtce_xdp_vip_key> old_vips;
  rtce_xdp_vip_key vkey{}, vnext{};
  for (const rtce_xdp_vip_key* prev = nullptr; bpf_map_get_next_key(vip_fd, prev, &vnext) == 0;
       prev = &vkey) {
    vkey = vnext;
    old_vips.push_back(vkey);
  }
  std::vector<rtce_xdp_vip_key> new_vips;
  uint32_t vip_id = 0;
  for (const auto& vip : config.listen) {
    if (vip.is_unspecified()) {
      spdlog::warn(
          "xdp: listen address {} is a wildcard; XDP steers only exact VIP addresses, so its traffic "
          "takes the userspace relay",
          vip.to_string());
      continue;
    }
    rtce_xdp_vip_key k{};
    k.family = vip.to_bytes(k.addr);
    k.port_be = htons(vip.port());
    rtce_xdp_vip v{vip_id++};
    update(skel_->maps.vips, &k, &v, "vips");
    new_vips.push_back(k);
  }
  // The port filter after the VIPs exist, before the old ones go.
  auto ports = std::make_unique<rtce_xdp_vip_ports>();
  for (const auto& k : new_vips) rtce_xdp_vip_port_set(ports.get(), ntohs(k.port_be));
  update(skel_->maps.vip_ports, &zero, ports.get(), "vip_ports");
  bool vips_removed = false;
  for (const auto& k : old_vips)
    if (std::none_of(new_vips.begin(), new_vips.end(),
                     [&](const rtce_xdp_vip_key& n) { return std::memcmp(&n, &k, sizeof k) == 0; })) {
      bpf_map_delete_elem(vip_fd, &k);
      vips_removed = true;
    }
  synced_vips_ = std::move(new_vips);
  // Flows of a vanished endpoint go; not at the first sync of a restarted loader, whose
  // pinned flows may name endpoints that only the registry (not yet read) knows. Flows of a
  // VIP that is gone go too: a flow hit skips the VIP lookup (the port filter and the flow
  // key suffice).
  if (endpoints_changed || vips_removed) reconcile_flows(routing, /*remove_gone=*/!first_sync);
  // The workers' flow limits (0 = no limit there; here 0 means "default", so no limit
  // is written as RTCE_FLOW_LIMIT_NONE).
  rtce_xdp_flow_limit_config limits{};
  const FlowLimits& fl = flow_limits_;
  limits.max_per_hint = fl.max_per_hint ? fl.max_per_hint : RTCE_FLOW_LIMIT_NONE;
  limits.max_per_source_prefix = fl.max_per_source_prefix ? fl.max_per_source_prefix : RTCE_FLOW_LIMIT_NONE;
  limits.window_ns = static_cast<uint64_t>(fl.window);
  limits.prefix_len4 = fl.source_prefix_v4;
  limits.prefix_len6 = fl.source_prefix_v6;
  update(skel_->maps.flow_limit_config, &zero, &limits, "flow_limit_config");
  // Config last: until now the program saw the previous, consistent configuration.
  update(skel_->maps.config, &zero, &cfg, "config");
}

int XdpDataPath::on_event(void* ctx, void* data, size_t size) {
  auto* self = static_cast<XdpDataPath*>(ctx);
  if (size < sizeof(rtce_xdp_flow_event)) return 0;
  rtce_xdp_flow_event event;
  std::memcpy(&event, data, sizeof event);
  self->events_seen_++;
  if (self->store_sink_) {
    self->store_sink_->put(event.key, event.endpoint_id);
    self->store_activity_ = true;
  }
  if (spdlog::should_log(spdlog::level::debug)) {
    SocketAddress client =
        SocketAddress::from_bytes(event.key.family, event.key.client_addr, ntohs(event.key.client_port_be));
    spdlog::debug("xdp: flow {} -> endpoint {}", client.to_string(), event.endpoint_id);
  }
  return 0;
}

int XdpDataPath::poll_events(int timeout_ms) {
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

uint32_t XdpDataPath::expire_idle_flows(Nanos now) {
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
      if (s.refreshing && store_sink_ && static_cast<Nanos>(s.values[i].last_seen_ns) >= s.refresh_since) {
        store_sink_->put(s.keys[i], s.values[i].endpoint_id);
        store_activity_ = true;
      }
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

uint32_t XdpDataPath::read_sweep_chunk(int fd, bool& last) {
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
            errno_text(err));
      s.warned = true;
      last = true;
      return 0;
    }
    spdlog::info(
        "xdp: the kernel refused a batch lookup of the flows map ({}); the idle sweep walks it key "
        "by key instead",
        errno_text(err));
    s.walk = true;
    s.have_walk_key = false;
  }
  // Key-by-key walk. The chunk ends one key early: that key (not yet visited) is where the
  // next chunk resumes, so deleting idle flows of this chunk never loses the position. A
  // resume key that vanished meanwhile (LRU) restarts the pass: slower, never wrong.
  uint32_t count = 0;
  rtce_flow_key next{};
  const rtce_flow_key* prev = nullptr;
  if (s.have_walk_key) {
    s.keys[count++] = s.walk_key;
    prev = &s.keys[0];
  }
  while (count < kSweepChunk && bpf_map_get_next_key(fd, prev, &next) == 0) {
    s.keys[count++] = next;
    prev = &s.keys[count - 1];
  }
  if (count == kSweepChunk && bpf_map_get_next_key(fd, prev, &next) == 0) {
    s.walk_key = next;
    s.have_walk_key = true;
  } else {
    s.have_walk_key = false;
    last = true;
  }
  uint32_t kept = 0;
  for (uint32_t i = 0; i < count; i++)
    if (bpf_map_lookup_elem(fd, &s.keys[i], &s.values[kept]) == 0) s.keys[kept++] = s.keys[i];
  return kept;
}

void XdpDataPath::attach_flow_store(FlowStoreOutbox* sink, Nanos refresh_interval) {
  store_sink_ = sink;
  store_refresh_interval_ = refresh_interval;
  sweep_.next_refresh = monotonic_now() + refresh_interval;
}

void XdpDataPath::install_flow(const rtce_flow_key& key, uint16_t endpoint_id, const sockaddr_in6& endpoint) {
  SocketAddress addr =
      SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&endpoint), sizeof endpoint).unmapped();
  rtce_xdp_flow value{};
  value.endpoint.family = addr.to_bytes(value.endpoint.addr);
  value.endpoint.port_be = htons(addr.port());
  value.endpoint_id = endpoint_id;
  value.last_seen_ns = static_cast<uint64_t>(monotonic_now());
  value.created_ns = value.last_seen_ns;
  // BPF_NOEXIST: if the program created the flow meanwhile (a STUN check), keep its entry.
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.flows), &key, &value, BPF_NOEXIST) == 0)
    flows_installed_.add();
}

void XdpDataPath::reconcile_flows(const RoutingTable& routing, bool remove_gone) {
  const int fd = bpf_map__fd(skel_->maps.flows);
  std::vector<rtce_flow_key> gone;
  std::vector<std::pair<rtce_flow_key, rtce_xdp_flow>> moved;
  rtce_flow_key key{}, next{};
  const uint32_t max_flows = bpf_map__max_entries(skel_->maps.flows);
  uint32_t walked = 0;
  // Collect first, change after: deleting during a get_next_key walk would restart it.
  for (const rtce_flow_key* prev = nullptr; walked < max_flows && bpf_map_get_next_key(fd, prev, &next) == 0;
       prev = &key, walked++) {
    key = next;
    rtce_xdp_flow value{};
    if (bpf_map_lookup_elem(fd, &key, &value) != 0) continue;
    const bool vip_known =
        std::any_of(synced_vips_.begin(), synced_vips_.end(), [&](const rtce_xdp_vip_key& v) {
          return v.family == key.family && v.port_be == key.vip_port_be &&
                 std::memcmp(v.addr, key.vip_addr, 16) == 0;
        });
    auto endpoint = synced_endpoints_.find(value.endpoint_id);
    if (!vip_known) {
      gone.push_back(key);  // configured VIPs are authoritative, also at a first sync
    } else if (endpoint == synced_endpoints_.end()) {
      if (remove_gone) gone.push_back(key);
    } else if (std::memcmp(&endpoint->second, &value.endpoint, sizeof value.endpoint) != 0) {
      value.endpoint = endpoint->second;
      moved.emplace_back(key, value);
    }
  }
  for (const auto& k : gone) bpf_map_delete_elem(fd, &k);
  for (const auto& [k, v] : moved) bpf_map_update_elem(fd, &k, &v, BPF_EXIST);
  flows_endpoint_gone_ += gone.size();
  if (!gone.empty() || !moved.empty())
    spdlog::info(
        "xdp: {} flows removed (their endpoint left), {} re-pointed (their endpoint moved); {} endpoints",
        gone.size(), moved.size(), routing.endpoints.size());
}

XdpCounters XdpDataPath::read_counters() const {
  XdpCounters out;
  std::vector<rtce_xdp_counter> per_cpu(static_cast<size_t>(possible_cpus_));
  const int fd = bpf_map__fd(skel_->maps.counters);
  for (uint32_t reason = 0; reason < RTCE_XDP_REASON_COUNT; reason++) {
    for (uint32_t dir = 0; dir < RTCE_XDP_DIR_COUNT; dir++) {
      const uint32_t index = rtce_xdp_counter_index(reason, dir);
      if (bpf_map_lookup_elem(fd, &index, per_cpu.data()) != 0) continue;
      for (const auto& c : per_cpu) {
        out.packets[reason][dir] += c.packets;
        out.bytes[reason][dir] += c.bytes;
      }
    }
  }
  std::vector<uint64_t> hint(static_cast<size_t>(possible_cpus_));
  const int hint_fd = bpf_map__fd(skel_->maps.hint_failures);
  for (uint32_t i = 0; i < RTCE_XDP_HINT_FAILURE_SLOTS; i++)
    if (bpf_map_lookup_elem(hint_fd, &i, hint.data()) == 0)
      for (uint64_t v : hint) out.hint_failures[i] += v;
  // The flows map has no entry count: walk its keys (bounded by the map size).
  const int flows_fd = bpf_map__fd(skel_->maps.flows);
  const uint32_t max_flows = bpf_map__max_entries(skel_->maps.flows);
  rtce_flow_key key{}, next{};
  for (const rtce_flow_key* prev = nullptr;
       out.flows < max_flows && bpf_map_get_next_key(flows_fd, prev, &next) == 0; prev = &key) {
    key = next;
    out.flows++;
  }
  return out;
}

void XdpDataPath::detach(const std::string& pin_path, const std::vector<std::string>& interfaces) {
  namespace fs = std::filesystem;
  const fs::path root(pin_path);
  std::error_code ec;
  if (!fs::exists(root, ec)) throw XdpError("nothing pinned at " + pin_path);
  // Unpinning the last reference to a link detaches its program.
  if (interfaces.empty()) {
    for (const auto& entry : fs::directory_iterator(root / "links", ec)) fs::remove(entry.path(), ec);
  } else {
    for (const auto& name : interfaces) fs::remove(root / "links" / name, ec);
  }
  bool links_left = fs::exists(root / "links", ec) && !fs::is_empty(root / "links", ec);
  if (links_left) {
    spdlog::info("detach: other interfaces still attached; maps kept under {}", pin_path);
    return;
  }
  fs::remove_all(root, ec);
  if (ec) throw XdpError("removing " + pin_path + ": " + ec.message());
}

}  // namespace rtce
