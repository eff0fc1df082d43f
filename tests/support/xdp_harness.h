// xdp_harness.h — the XDP program (bpf/rtce_xdp.bpf.c) loaded for real through its skeleton
// and driven under BPF_PROG_TEST_RUN: load (the verifier runs), the config / hint key / VIP /
// endpoint maps set to the test addresses of xdp_packets.h, one run per frame, and reads
// of the counters, hint failures, flows, flow-limit windows and flow events. Shared by the
// BPF_PROG_TEST_RUN fixtures and the XDP-vs-RelayCore differential test, which add their
// own checks on top. Needs root; load() returns the reason to skip otherwise.
#pragma once

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rtce_hint.h"
#include "rtce_xdp.h"
#include "rtce_xdp.skel.h"
#include "stun_payloads.h"
#include "xdp_packets.h"

namespace rtce::xdp_packets {

inline rtce_flow_key flow_key(const Ep& client, const Ep& vip) {
  rtce_flow_key k{};
  std::memcpy(k.client_addr, client.addr.data(), 16);
  std::memcpy(k.vip_addr, vip.addr.data(), 16);
  k.client_port_be = htons(client.port);
  k.vip_port_be = htons(vip.port);
  k.family = client.family;
  return k;
}

inline rtce_xdp_endpoint endpoint_value(const Ep& e) {
  rtce_xdp_endpoint v{};
  std::memcpy(v.addr, e.addr.data(), 16);
  v.port_be = htons(e.port);
  v.family = e.family;
  return v;
}

class XdpProgram {
 public:
  XdpProgram() = default;
  XdpProgram(const XdpProgram&) = delete;
  XdpProgram& operator=(const XdpProgram&) = delete;
  ~XdpProgram() {
    if (rb_) ring_buffer__free(rb_);
    if (skel_) rtce_xdp__destroy(skel_);
  }

  // Opens, loads (verifier) and configures. Returns a skip reason, or "" when ready.
  // A verifier rejection is a failure, not a skip.
  std::string load(uint32_t max_flows = 4096) {
    if (geteuid() != 0) return "needs root (CAP_BPF/CAP_NET_ADMIN) to load XDP programs";
    skel_ = rtce_xdp__open();
    if (!skel_) return std::string("rtce_xdp__open failed: ") + std::strerror(errno);
    bpf_map__set_max_entries(skel_->maps.flows, max_flows);
    const int err = rtce_xdp__load(skel_);
    if (err == -EPERM) return "loading BPF programs is not permitted here (EPERM)";
    if (err == -ENOSYS || err == -EOPNOTSUPP) return "the kernel lacks BPF features the program needs";
    if (err) {
      ADD_FAILURE() << "rtce_xdp__load failed: " << std::strerror(-err) << " (verifier log above)";
      return "load failed";
    }
    prog_fd_ = bpf_program__fd(skel_->progs.rtce_xdp);
    rb_ = ring_buffer__new(bpf_map__fd(skel_->maps.events), &XdpProgram::on_event, this, nullptr);
    if (!rb_) ADD_FAILURE() << "ring_buffer__new failed";
    configure();
    return "";
  }

  void configure(uint32_t flags = RTCE_XDP_F_SKIP_FIB | RTCE_XDP_F_HAVE_V4 | RTCE_XDP_F_HAVE_V6,
                 uint32_t budget = 1000000, uint64_t window_ns = 0, uint32_t last_seen_granularity_ns = 0) {
    rtce_xdp_config cfg{};
    std::memcpy(cfg.relay_addr4, kRelay4.addr.data(), 4);
    std::memcpy(cfg.relay_addr6, kRelay6.addr.data(), 16);
    cfg.return_port_be = htons(kReturnPort);
    cfg.cluster_id = kCluster;
    cfg.flags = flags;
    cfg.new_flow_budget = budget;
    cfg.budget_window_ns = window_ns;
    cfg.last_seen_granularity_ns = last_seen_granularity_ns;
    std::memcpy(cfg.fixed_src_mac, kTxSrcMac.data(), 6);
    std::memcpy(cfg.fixed_dst_mac, kTxDstMac.data(), 6);
    update(skel_->maps.config, uint32_t{0}, cfg);

    rtce_hint_keyset ks{};
    ks.keys[0] = test_key(1);
    update(skel_->maps.hint_keys, uint32_t{0}, ks);

    auto ports = std::make_unique<rtce_xdp_vip_ports>();
    for (const Ep* v : {&kVip4, &kVip6}) {
      rtce_xdp_vip_key k{};
      k.family = v->family;
      k.port_be = htons(v->port);
      std::memcpy(k.addr, v->addr.data(), 16);
      update(skel_->maps.vips, k, rtce_xdp_vip{static_cast<uint32_t>(v->family)});
      rtce_xdp_vip_port_set(ports.get(), v->port);
    }
    update(skel_->maps.vip_ports, uint32_t{0}, *ports);
    update(skel_->maps.endpoints, uint16_t{2}, endpoint_value(kEndpoint2));
    update(skel_->maps.endpoints, uint16_t{3}, endpoint_value(kEndpoint3));
    // No flow limits unless a case sets them: many cases make flows from one hint.
    set_flow_limits(RTCE_FLOW_LIMIT_NONE, RTCE_FLOW_LIMIT_NONE);
  }

  // The flow_limit_config map; all zero (the program's defaults) with set_flow_limits(0, 0).
  void set_flow_limits(uint32_t max_per_hint, uint32_t max_per_prefix, uint64_t window_ns = 0,
                       uint8_t prefix_len4 = 0, uint8_t prefix_len6 = 0) {
    rtce_xdp_flow_limit_config c{};
    c.max_per_hint = max_per_hint;
    c.max_per_source_prefix = max_per_prefix;
    c.window_ns = window_ns;
    c.prefix_len4 = prefix_len4;
    c.prefix_len6 = prefix_len6;
    update(skel_->maps.flow_limit_config, uint32_t{0}, c);
  }

  // Moves every flow-limit window `ago_ns` into the past (the program's clock cannot be
  // set; what it compares against can). Returns the entries moved.
  size_t age_flow_limit_windows(uint64_t ago_ns) {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);  // bpf_ktime_get_ns()'s clock
    const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
    size_t moved = 0;
    for (bpf_map* map : {skel_->maps.hint_flow_limits, skel_->maps.prefix_flow_limits}) {
      const size_t key_size = bpf_map__key_size(map);
      std::vector<uint8_t> key(key_size), next(key_size);
      const void* prev = nullptr;
      while (bpf_map__get_next_key(map, prev, next.data(), key_size) == 0) {
        key = next;
        prev = key.data();
        rtce_flow_limit l{};
        if (bpf_map__lookup_elem(map, key.data(), key_size, &l, sizeof l, 0) != 0) continue;
        l.window_start_ns = now - ago_ns;
        EXPECT_EQ(bpf_map__update_elem(map, key.data(), key_size, &l, sizeof l, BPF_EXIST), 0);
        moved++;
      }
    }
    return moved;
  }

  // The hint_flow_limits entry of a hint minted by mint(cluster, endpoint, nonce).
  std::optional<rtce_flow_limit> hint_limit(uint8_t cluster, uint16_t endpoint, uint32_t nonce,
                                            uint8_t key_id = 1) {
    rtce_hint_limit_key k{};
    k.nonce = nonce;
    k.endpoint_id = endpoint;
    k.cluster_id = cluster;
    k.key_id = key_id;
    rtce_flow_limit l{};
    if (bpf_map__lookup_elem(skel_->maps.hint_flow_limits, &k, sizeof k, &l, sizeof l, 0) != 0)
      return std::nullopt;
    return l;
  }

  template <typename K, typename V>
  void update(bpf_map* map, const K& key, const V& value) {
    ASSERT_EQ(bpf_map__update_elem(map, &key, sizeof(key), &value, sizeof(value), BPF_ANY), 0)
        << bpf_map__name(map);
  }

  struct Run {
    int action = -1;
    Bytes out;
  };

  Run run(const Bytes& in, uint32_t ingress_ifindex = 0) {
    Run r;
    r.out.resize(in.size() + 512);
    bpf_test_run_opts opts{};
    opts.sz = sizeof(opts);
    opts.data_in = in.data();
    opts.data_size_in = static_cast<uint32_t>(in.size());
    opts.data_out = r.out.data();
    opts.data_size_out = static_cast<uint32_t>(r.out.size());
    opts.repeat = 1;
    xdp_md ctx{};
    if (ingress_ifindex) {
      ctx.data_end = static_cast<uint32_t>(in.size());
      ctx.ingress_ifindex = ingress_ifindex;
      opts.ctx_in = &ctx;
      opts.ctx_size_in = sizeof(ctx);
    }
    const int err = bpf_prog_test_run_opts(prog_fd_, &opts);
    EXPECT_EQ(err, 0) << "bpf_prog_test_run_opts: " << std::strerror(errno);
    if (err) return r;
    r.action = static_cast<int>(opts.retval);
    r.out.resize(opts.data_size_out);
    return r;
  }

  // Sum over CPUs of every counter slot's packets.
  std::vector<uint64_t> counters() {
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<uint64_t> out(RTCE_XDP_COUNTER_SLOTS);
    std::vector<rtce_xdp_counter> per(static_cast<size_t>(ncpu));
    for (uint32_t i = 0; i < RTCE_XDP_COUNTER_SLOTS; i++) {
      EXPECT_EQ(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &i, per.data()), 0);
      for (const auto& c : per) out[i] += c.packets;
    }
    return out;
  }

  uint64_t hint_failures(uint32_t slot) {
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<uint64_t> per(static_cast<size_t>(ncpu));
    EXPECT_EQ(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.hint_failures), &slot, per.data()), 0);
    uint64_t sum = 0;
    for (auto v : per) sum += v;
    return sum;
  }

  std::optional<rtce_xdp_flow> flow(const Ep& client, const Ep& vip) {
    const rtce_flow_key k = flow_key(client, vip);
    rtce_xdp_flow v{};
    if (bpf_map__lookup_elem(skel_->maps.flows, &k, sizeof(k), &v, sizeof(v), 0) != 0) return std::nullopt;
    return v;
  }

  // Overwrites a flow's last_seen_ns (the test's control of time: the program's clock
  // cannot be set, but what it compares against can).
  void set_last_seen(const Ep& client, const Ep& vip, uint64_t last_seen_ns) {
    const rtce_flow_key k = flow_key(client, vip);
    auto v = flow(client, vip);
    ASSERT_TRUE(v) << "no flow to set last_seen_ns on";
    v->last_seen_ns = last_seen_ns;
    ASSERT_EQ(bpf_map__update_elem(skel_->maps.flows, &k, sizeof(k), &*v, sizeof(*v), BPF_EXIST), 0);
  }

  size_t flow_count() {
    size_t n = 0;
    rtce_flow_key k{}, next{};
    const void* prev = nullptr;
    while (bpf_map__get_next_key(skel_->maps.flows, prev, &next, sizeof(next)) == 0) {
      n++;
      k = next;
      prev = &k;
    }
    return n;
  }

  void clear_flows() {
    rtce_flow_key k{};
    while (bpf_map__get_next_key(skel_->maps.flows, nullptr, &k, sizeof(k)) == 0)
      bpf_map__delete_elem(skel_->maps.flows, &k, sizeof(k), 0);
  }

  std::vector<rtce_xdp_flow_event> take_events() {
    events_.clear();
    if (rb_) ring_buffer__consume(rb_);
    return events_;
  }

  rtce_xdp* skel() { return skel_; }

 private:
  static int on_event(void* ctx, void* data, size_t size) {
    auto* self = static_cast<XdpProgram*>(ctx);
    rtce_xdp_flow_event ev{};
    EXPECT_EQ(size, sizeof(ev));
    std::memcpy(&ev, data, std::min(size, sizeof(ev)));
    self->events_.push_back(ev);
    return 0;
  }

  rtce_xdp* skel_ = nullptr;
  int prog_fd_ = -1;
  ring_buffer* rb_ = nullptr;
  std::vector<rtce_xdp_flow_event> events_;
};

}  // namespace rtce::xdp_packets
