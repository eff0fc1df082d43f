// xdp_flow_expiry_test.cpp — idle expiry of XDP flows: the decision (xdp_flow_expiry.h,
// pure, runs anywhere) and XdpDataPath's sweep over a real `flows` map (needs root; the
// program is attached in generic mode to the loopback of a private network namespace,
// with its own pin directory).
#include "xdp_flow_expiry.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "clock.h"
#include "xdp_data_path.h"
#include "xdp_on_loopback.h"

namespace {

using rtce::Nanos;

constexpr Nanos kSecond = 1'000'000'000;

rtce_xdp_flow flow_at(uint64_t created, uint64_t last_seen) {
  rtce_xdp_flow f{};
  f.created_ns = created;
  f.last_seen_ns = last_seen;
  f.endpoint_id = 7;
  return f;
}

// ------------------------------------------------------------------ the decision

TEST(XdpFlowExpiry, IdleOnlyAfterTheTimeout) {
  const Nanos start = 1000 * kSecond, timeout = 30 * kSecond;
  const auto f = flow_at(1100 * kSecond, 1200 * kSecond);
  EXPECT_FALSE(rtce::xdp_flow_idle(f, 1200 * kSecond, timeout, start));
  EXPECT_FALSE(rtce::xdp_flow_idle(f, 1230 * kSecond - 1, timeout, start));
  EXPECT_TRUE(rtce::xdp_flow_idle(f, 1230 * kSecond, timeout, start));  // >=, as FlowTable::expire
  EXPECT_TRUE(rtce::xdp_flow_idle(f, 5000 * kSecond, timeout, start));
}

TEST(XdpFlowExpiry, ActivityAheadOfNowIsNotIdle) {
  // The program's clock read after ours, or a flow created after `now` was read.
  const auto f = flow_at(100 * kSecond, 2000 * kSecond);
  EXPECT_FALSE(rtce::xdp_flow_idle(f, 1000 * kSecond, 1, 0));
}

TEST(XdpFlowExpiry, NeverEarlierThanCreation) {
  // last_seen behind created_ns cannot make a new flow look old.
  const auto f = flow_at(1000 * kSecond, 10 * kSecond);
  EXPECT_EQ(rtce::xdp_flow_last_activity(f, 0), 1000 * kSecond);
  EXPECT_FALSE(rtce::xdp_flow_idle(f, 1010 * kSecond, 30 * kSecond, 0));
}

TEST(XdpFlowExpiry, FlowFromAnOlderLoaderGetsATimeoutFromWatchStart) {
  // last_seen_ns 0: created by a program that had padding there, untouched since.
  const Nanos start = 5000 * kSecond, timeout = 30 * kSecond;
  const auto old = flow_at(10 * kSecond, 0);
  EXPECT_EQ(rtce::xdp_flow_last_activity(old, start), start);
  EXPECT_FALSE(rtce::xdp_flow_idle(old, start + timeout - 1, timeout, start));
  EXPECT_TRUE(rtce::xdp_flow_idle(old, start + timeout, timeout, start));
  // ... but a legacy flow created after the watch began counts from its creation.
  EXPECT_EQ(rtce::xdp_flow_last_activity(flow_at(start + kSecond, 0), start), start + kSecond);
}

TEST(XdpFlowExpiry, GranularityStaysWellUnderTheTimeout) {
  EXPECT_EQ(rtce::xdp_last_seen_granularity(30 * kSecond), 1'000'000'000u);
  EXPECT_EQ(rtce::xdp_last_seen_granularity(4 * kSecond), 1'000'000'000u);
  EXPECT_EQ(rtce::xdp_last_seen_granularity(kSecond), 250'000'000u);
  EXPECT_EQ(rtce::xdp_last_seen_granularity(1'000'000), 250'000u);  // the config's minimum
  EXPECT_EQ(rtce::xdp_last_seen_granularity(3), 1u);                // never 0 (= the program's 1 s)
  EXPECT_EQ(rtce::xdp_last_seen_granularity(86'400 * kSecond), 1'000'000'000u);
  EXPECT_EQ(rtce::xdp_sweep_interval(30 * kSecond), kSecond);
  EXPECT_EQ(rtce::xdp_sweep_interval(kSecond), kSecond / 4);
  EXPECT_EQ(rtce::xdp_sweep_interval(1'000'000), 10'000'000);
}

TEST(XdpFlowExpiry, ActiveFlowNeverLooksIdle) {
  // A client sending every `period` (< 3/4 of the timeout), the program storing a packet's
  // time only when the stored one is a granularity old: no sweep instant finds it idle.
  for (const Nanos timeout : {kSecond, 2 * kSecond, 30 * kSecond}) {
    const Nanos g = rtce::xdp_last_seen_granularity(timeout);
    const Nanos period = timeout * 7 / 10, step = timeout / 100, created = kSecond;
    Nanos stored = created;
    for (Nanos t = created; t < created + 20 * timeout; t += step) {
      if ((t - created) % period < step && t - stored >= g) stored = t;  // a packet at t
      ASSERT_FALSE(rtce::xdp_flow_idle(flow_at(static_cast<uint64_t>(created), static_cast<uint64_t>(stored)),
                                       t, timeout, 0))
          << "timeout " << timeout << " t " << t;
    }
  }
}

// ------------------------------------------------------------------ the sweep over a map

class XdpSweep : public rtce::testing::XdpOnLoopback {
 protected:
  XdpSweep() : XdpOnLoopback("sweep-test") {}
  void SetUp() override {
    XdpOnLoopback::SetUp();
    if (IsSkipped()) return;
    config_.flow_idle_timeout = 30 * kSecond;
    if (!start()) GTEST_SKIP() << "XDP unavailable here: " << skip_reason_;
    fd_ = bpf_obj_get((config_.xdp_pin_path + "/maps/flows").c_str());
    ASSERT_GE(fd_, 0) << std::strerror(errno);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    XdpOnLoopback::TearDown();
  }

  static rtce_flow_key key(uint32_t i) {
    rtce_flow_key k{};
    k.family = RTCE_FAMILY_V4;
    std::memcpy(k.client_addr, &i, 4);
    k.client_port_be = 1;
    k.vip_port_be = 2;
    return k;
  }
  void insert(uint32_t i, uint64_t created, uint64_t last_seen) {
    const rtce_flow_key k = key(i);
    const rtce_xdp_flow v = flow_at(created, last_seen);
    ASSERT_EQ(bpf_map_update_elem(fd_, &k, &v, BPF_NOEXIST), 0) << i;
  }
  bool present(uint32_t i) {
    const rtce_flow_key k = key(i);
    rtce_xdp_flow v{};
    return bpf_map_lookup_elem(fd_, &k, &v) == 0;
  }
  size_t count() {
    size_t n = 0;
    rtce_flow_key k{}, next{};
    for (const rtce_flow_key* prev = nullptr; bpf_map_get_next_key(fd_, prev, &next) == 0; prev = &k) {
      k = next;
      n++;
    }
    return n;
  }
  // Runs calls until the pass started at `now` ends (a second pass cannot start at the same
  // `now`); returns what each call deleted.
  void check_bounded_pass();
  std::vector<uint32_t> pass(Nanos now, int max_calls = 64) {
    std::vector<uint32_t> per_call;
    for (int i = 0; i < max_calls; i++) per_call.push_back(xdp_->expire_idle_flows(now));
    return per_call;
  }

  int fd_ = -1;
};

// Records what the sweep hands to the flow store.
class RecordingOutbox : public rtce::FlowStoreOutbox {
 public:
  bool put(const rtce_flow_key& key, uint16_t endpoint_id) override {
    puts.emplace_back(key, endpoint_id);
    return true;
  }
  bool lookup(const rtce_flow_key&) override { return true; }
  std::vector<std::pair<rtce_flow_key, uint16_t>> puts;
};

TEST_F(XdpSweep, DeletesIdleFlowsInBoundedChunksAndKeepsActiveOnes) { check_bounded_pass(); }

TEST_F(XdpSweep, KeyWalkFallbackDeletesTheSameFlows) {
  // As on a kernel that refuses BPF_MAP_LOOKUP_BATCH on this map: the same pass, walked
  // with get_next_key, resuming at a key it has not visited yet.
  xdp_->use_key_walk_for_tests();
  check_bounded_pass();
}

TEST_F(XdpSweep, RefreshesActiveFlowsInTheFlowStoreOncePerInterval) {
  RecordingOutbox outbox;
  const Nanos start = rtce::monotonic_now();
  xdp_->attach_flow_store(&outbox, 5 * kSecond);
  const auto t = [](Nanos v) { return static_cast<uint64_t>(v); };
  for (uint32_t i = 0; i < 10; i++) insert(i, t(start - 20 * kSecond), t(start - 20 * kSecond));  // quiet
  for (uint32_t i = 10; i < 13; i++) insert(i, t(start - 20 * kSecond), t(start + 4 * kSecond));  // active
  pass(start + kSecond, 4);
  EXPECT_TRUE(outbox.puts.empty()) << "refreshed before the first interval";
  pass(start + 6 * kSecond, 4);
  ASSERT_EQ(outbox.puts.size(), 3u) << "only the flows with packets in the interval";
  for (const auto& [k, id] : outbox.puts) {
    uint32_t i = 0;
    std::memcpy(&i, k.client_addr, 4);
    EXPECT_GE(i, 10u);
    EXPECT_EQ(id, 7u);
  }
  EXPECT_TRUE(xdp_->take_flow_store_activity());
  pass(start + 7 * kSecond, 4);
  EXPECT_EQ(outbox.puts.size(), 3u) << "refreshed twice within one interval";
}

TEST_F(XdpSweep, InstalledFlowIsInTheMapAndAFlowOfTheProgramWins) {
  rtce_flow_key k = key(42);
  const sockaddr_in6 endpoint = rtce::SocketAddress::parse("198.18.2.2:40002")->to_v6_mapped();
  xdp_->install_flow(k, 9, endpoint);
  rtce_xdp_flow v{};
  ASSERT_EQ(bpf_map_lookup_elem(fd_, &k, &v), 0);
  EXPECT_EQ(v.endpoint_id, 9);
  EXPECT_EQ(v.endpoint.family, RTCE_FAMILY_V4);
  EXPECT_EQ(v.endpoint.port_be, htons(40002));
  const uint8_t want[4] = {198, 18, 2, 2};
  EXPECT_EQ(std::memcmp(v.endpoint.addr, want, 4), 0);
  EXPECT_NE(v.last_seen_ns, 0u) << "an installed flow must not look idle at once";
  EXPECT_EQ(xdp_->flows_installed(), 1u);
  xdp_->install_flow(k, 10, endpoint);  // already there (e.g. the program made it): kept
  ASSERT_EQ(bpf_map_lookup_elem(fd_, &k, &v), 0);
  EXPECT_EQ(v.endpoint_id, 9);
  EXPECT_EQ(xdp_->flows_installed(), 1u);
}

void XdpSweep::check_bounded_pass() {
  // 12 000 flows: every third idle for 60 s, the rest seen just now or created by an
  // older loader (last_seen 0) — more than two chunks, so the pass spans several calls.
  constexpr uint32_t kFlows = 12000;
  const Nanos now = rtce::monotonic_now();
  const auto t = [](Nanos v) { return static_cast<uint64_t>(v); };
  uint32_t idle = 0;
  for (uint32_t i = 0; i < kFlows; i++) {
    if (i % 3 == 0) {
      insert(i, t(now - 100 * kSecond), t(now - 60 * kSecond));
      idle++;
    } else if (i % 3 == 1) {
      insert(i, t(now - 100 * kSecond), t(now));
    } else {
      insert(i, t(now - 100 * kSecond), 0);
    }
  }
  ASSERT_EQ(count(), kFlows);
  const auto calls = pass(now);
  uint32_t total = 0, calls_that_deleted = 0;
  for (uint32_t n : calls) {
    EXPECT_LE(n, 4096u) << "a call did more than one chunk's work";
    total += n;
    calls_that_deleted += n ? 1 : 0;
  }
  EXPECT_EQ(total, idle);
  EXPECT_GE(calls_that_deleted, 3u) << "the pass was not split into chunks";
  EXPECT_EQ(xdp_->flows_expired(), idle);
  EXPECT_EQ(count(), kFlows - idle);
  for (uint32_t i = 0; i < kFlows; i++) ASSERT_EQ(present(i), i % 3 != 0) << i;

  // A pass that starts before the interval has passed does nothing; after the timeout,
  // the flows seen at `now` and the legacy ones (a timeout after the loader started) go.
  EXPECT_EQ(xdp_->expire_idle_flows(now + kSecond / 2), 0u);
  const auto later = pass(now + 31 * kSecond);
  total = 0;
  for (uint32_t n : later) total += n;
  EXPECT_EQ(total, kFlows - idle);
  EXPECT_EQ(count(), 0u);
  EXPECT_EQ(xdp_->flows_expired(), kFlows);
}

TEST_F(XdpSweep, FlowSeenAfterNowIsKept) {
  // A flow idle at `now` goes; one whose last_seen is after `now` (a packet since the
  // sweep read its clock) stays.
  const Nanos now = rtce::monotonic_now();
  insert(1, static_cast<uint64_t>(now - 100 * kSecond), static_cast<uint64_t>(now - 40 * kSecond));
  insert(2, static_cast<uint64_t>(now - 100 * kSecond), static_cast<uint64_t>(now + kSecond));
  pass(now, 2);
  EXPECT_FALSE(present(1));
  EXPECT_TRUE(present(2));
  EXPECT_EQ(xdp_->flows_expired(), 1u);
}

}  // namespace
