// xdp_loader_test.cpp — XdpDataPath against real pins (needs root; the program is attached
// in generic mode to the loopback of a private network namespace, with its own pin
// directory): an upgrade over counter maps of an older layout, the flow limits it writes
// for the program, an attach attempt that is undone unless committed, and the map walk
// the map sync and the sweep share.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "unique_fd.h"
#include "xdp_attach.h"
#include "xdp_data_path.h"
#include "xdp_map_sync.h"
#include "xdp_on_loopback.h"

namespace {

constexpr rtce::Nanos kSecond = 1'000'000'000;

class XdpLoader : public rtce::testing::XdpOnLoopback {
 protected:
  XdpLoader() : XdpOnLoopback("loader-test") {}
  static bpf_map_info pinned_info(const std::string& path) {
    bpf_map_info info{};
    uint32_t len = sizeof info;
    const int fd = bpf_obj_get(path.c_str());
    EXPECT_GE(fd, 0) << path << ": " << std::strerror(errno);
    if (fd >= 0) {
      EXPECT_EQ(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
      close(fd);
    }
    return info;
  }
};

TEST_F(XdpLoader, CounterPinsOfAnOlderLayoutAreReplacedNotRefused) {
  // Can XDP run here at all? (Then a refusal below is the layout's fault, not the host's.)
  if (!start()) GTEST_SKIP() << "XDP unavailable here: " << skip_reason_;
  xdp_.reset();
  rtce::XdpDataPath::detach(config_.xdp_pin_path, {});

  // A loader from before the flow-limit reasons pinned `counters` with fewer slots.
  const std::string maps = config_.xdp_pin_path + "/maps";
  std::filesystem::create_directories(maps);
  const uint32_t old_slots = RTCE_XDP_COUNTER_SLOTS - 2 * RTCE_XDP_DIR_COUNT;
  const int old_fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "counters", sizeof(uint32_t),
                                    sizeof(rtce_xdp_counter), old_slots, nullptr);
  ASSERT_GE(old_fd, 0) << "bpf_map_create: " << std::strerror(errno);
  ASSERT_EQ(bpf_obj_pin(old_fd, (maps + "/counters").c_str()), 0) << std::strerror(errno);
  close(old_fd);

  ASSERT_TRUE(start()) << "the loader refused the old pin: " << skip_reason_;
  EXPECT_EQ(pinned_info(maps + "/counters").max_entries, static_cast<uint32_t>(RTCE_XDP_COUNTER_SLOTS))
      << "the pin now holds this build's counters";
  EXPECT_EQ(xdp_->read_counters().packets[RTCE_XDP_HINT_FLOW_LIMIT][0], 0u);
}

TEST_F(XdpLoader, SyncWritesTheWorkersFlowLimits) {
  config_.flow_limits.max_per_hint = 5;
  config_.flow_limits.max_per_source_prefix = 0;  // no limit
  config_.flow_limits.window = 3 * kSecond;
  config_.flow_limits.source_prefix_v4 = 20;
  config_.flow_limits.source_prefix_v6 = 48;
  if (!start()) GTEST_SKIP() << "XDP unavailable here: " << skip_reason_;
  rtce::RoutingTable routing;
  xdp_->sync(config_, routing);

  const int fd = bpf_obj_get((config_.xdp_pin_path + "/maps/flow_limit_config").c_str());
  ASSERT_GE(fd, 0) << "flow_limit_config is pinned: " << std::strerror(errno);
  rtce_xdp_flow_limit_config c{};
  const uint32_t zero = 0;
  ASSERT_EQ(bpf_map_lookup_elem(fd, &zero, &c), 0);
  close(fd);
  EXPECT_EQ(c.max_per_hint, 5u);
  EXPECT_EQ(c.max_per_source_prefix, RTCE_FLOW_LIMIT_NONE) << "0 = no limit, not the program's default";
  EXPECT_EQ(c.window_ns, 3'000'000'000u);
  EXPECT_EQ(c.prefix_len4, 20);
  EXPECT_EQ(c.prefix_len6, 48);
  for (const char* name : {"hint_flow_limits", "prefix_flow_limits"})
    EXPECT_EQ(pinned_info(config_.xdp_pin_path + "/maps/" + name).type,
              static_cast<uint32_t>(BPF_MAP_TYPE_LRU_HASH))
        << name;

  // A reload cannot change them (the workers keep theirs until a restart): same bounds.
  rtce::RelayConfig next = config_;
  next.flow_limits.max_per_hint = 50;
  xdp_->sync(next, routing);
  const int fd2 = bpf_obj_get((config_.xdp_pin_path + "/maps/flow_limit_config").c_str());
  ASSERT_GE(fd2, 0);
  ASSERT_EQ(bpf_map_lookup_elem(fd2, &zero, &c), 0);
  close(fd2);
  EXPECT_EQ(c.max_per_hint, 5u);
}

// The program attached to lo in this test's namespace (0: none).
uint32_t lo_prog_id() {
  uint32_t id = 0;
  bpf_xdp_query_id(static_cast<int>(if_nametoindex("lo")), 0, &id);
  return id;
}

// A link whose last pin goes is released after an RCU grace period, not at the unlink.
bool lo_detached_within(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (lo_prog_id() != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST_F(XdpLoader, AnAttachAttemptWithoutCommitLeavesNothingAttachedOrPinned) {
  {
    rtce::XdpAttach attempt(config_);
    try {
      attempt.load();
      ASSERT_EQ(attempt.attach_all(), std::vector<std::string>{"lo=generic"});
    } catch (const rtce::XdpError& e) {
      GTEST_SKIP() << "XDP unavailable here: " << e.what();
    }
    EXPECT_NE(lo_prog_id(), 0u);
    EXPECT_TRUE(std::filesystem::exists(config_.xdp_pin_path + "/links/lo"));
  }  // a start that fails after attaching, e.g. in the ring buffer, ends like this
  EXPECT_TRUE(lo_detached_within(std::chrono::seconds(5)))
      << "the link pinned by the attempt is gone, and the program with it";
  EXPECT_FALSE(std::filesystem::exists(config_.xdp_pin_path)) << "fresh pins are removed";
}

TEST_F(XdpLoader, ACommittedAttachKeepsItsPinsAndARestartReplacesThroughThem) {
  uint32_t first_prog = 0;
  {
    rtce::XdpAttach attempt(config_);
    try {
      attempt.load();
      attempt.attach_all();
    } catch (const rtce::XdpError& e) {
      GTEST_SKIP() << "XDP unavailable here: " << e.what();
    }
    rtce::XdpSkeleton skel = attempt.commit();
    first_prog = lo_prog_id();
    EXPECT_NE(first_prog, 0u);
  }  // the skeleton is closed: the pinned link keeps the program attached
  EXPECT_EQ(lo_prog_id(), first_prog);
  rtce::XdpAttach again(config_);
  again.load();
  EXPECT_EQ(again.attach_all(), std::vector<std::string>{"lo=replaced"});
  EXPECT_NE(lo_prog_id(), first_prog) << "the new program took the link's place";
  auto skel = again.commit();
}

TEST_F(XdpLoader, ForEachKeyWalksEveryKeyOnceResumesAfterAKeyAndStopsAtTheLimit) {
  LIBBPF_OPTS(bpf_map_create_opts, opts);
  const rtce::UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_HASH, "walk_test", 4, 4, 256, &opts));
  if (!fd) GTEST_SKIP() << "bpf_map_create: " << std::strerror(errno);
  for (uint32_t k = 0; k < 100; k++) ASSERT_EQ(bpf_map_update_elem(fd.get(), &k, &k, BPF_ANY), 0);

  std::vector<uint32_t> all;
  EXPECT_EQ(rtce::for_each_key<uint32_t>(fd.get(), [&](const uint32_t& k) { all.push_back(k); }), 100u);
  EXPECT_EQ(std::set<uint32_t>(all.begin(), all.end()).size(), 100u) << "each key once";
  EXPECT_EQ(rtce::map_keys<uint32_t>(fd.get()), all) << "the kernel's order, both ways";

  // In two parts: the first 30, then from after the 30th; together the same walk.
  std::vector<uint32_t> parts;
  EXPECT_EQ(rtce::for_each_key<uint32_t>(
                fd.get(), [&](const uint32_t& k) { parts.push_back(k); }, 30),
            30u);
  const uint32_t resume = parts.back();
  EXPECT_EQ(rtce::for_each_key<uint32_t>(
                fd.get(), [&](const uint32_t& k) { parts.push_back(k); }, UINT32_MAX, &resume),
            70u);
  EXPECT_EQ(parts, all);
}

}  // namespace
