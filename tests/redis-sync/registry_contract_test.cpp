// registry_contract_test.cpp — the Registry's behaviour, run unchanged against the Redis
// and the in-memory implementation: register/list/deregister, heartbeat and TTL expiry,
// the draining flag, watch latency, and endpoint id allocation.
#include <algorithm>
#include <map>
#include <set>

#include "sync_test_support.h"

namespace rtce::test {
namespace {

template <typename Backend>
class RegistryContract : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = Backend::unavailable(); !why.empty()) GTEST_FAIL() << why;
  }
  std::unique_ptr<Registry> make(Millis ttl = 300ms, Millis relist = 100ms) {
    return backend_.registry(io_,
                             RegistryOptions{.cluster = 0, .endpoint_ttl = ttl, .relist_interval = relist});
  }
  std::optional<bool> done(std::function<void(DoneCallback)> start) { return await<bool>(io_, start); }
  std::optional<std::vector<EndpointRecord>> list(Registry& registry) {
    auto result = await<std::optional<std::vector<EndpointRecord>>>(
        io_, [&](auto callback) { registry.list(callback); });
    return result ? *result : std::nullopt;
  }
  static bool contains(const std::vector<EndpointRecord>& records, EndpointId id) {
    return std::any_of(records.begin(), records.end(), [id](const auto& r) { return r.id == id; });
  }

  boost::asio::io_context io_;
  Backend backend_;
};

TYPED_TEST_SUITE(RegistryContract, Backends, BackendNames);

EndpointRecord record(EndpointId id, const char* address, uint32_t capacity = 500) {
  return EndpointRecord{id, addr(address), capacity, 0, false};
}

TYPED_TEST(RegistryContract, RegisterListDeregister) {
  auto registry = this->make(5000ms);
  const auto a = record(7, "10.0.0.1:40000", 800);
  const auto b = record(3, "[2001:db8::5]:40001");
  EXPECT_EQ(this->done([&](auto cb) { registry->register_endpoint(a, cb); }), true);
  EXPECT_EQ(this->done([&](auto cb) { registry->register_endpoint(b, cb); }), true);
  auto listed = this->list(*registry);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0], b);  // sorted by id
  EXPECT_EQ((*listed)[1], a);
  EXPECT_EQ(this->done([&](auto cb) { registry->deregister(3, cb); }), true);
  listed = this->list(*registry);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, 7);
  EXPECT_TRUE(registry->connected());
  EXPECT_GE(registry->counters().replies.get(), 5u);
}

TYPED_TEST(RegistryContract, HeartbeatKeepsRecordAliveAndAStoppedOneExpiresWithinTtl) {
  const Millis ttl = 300ms;
  auto registry = this->make(ttl);
  ASSERT_EQ(this->done([&](auto cb) { registry->register_endpoint(record(11, "10.0.0.1:1000"), cb); }), true);
  // Heartbeats over more than twice the TTL: only they can keep the record alive.
  for (int i = 0; i < 10; ++i) {
    run_for(this->io_, 70ms);
    ASSERT_EQ(this->done([&](auto cb) { registry->heartbeat(11, 40 + i, false, cb); }), true) << i;
  }
  const auto last_heartbeat = Clock::now();
  auto listed = this->list(*registry);
  ASSERT_TRUE(listed);
  ASSERT_TRUE(this->contains(*listed, 11));
  EXPECT_EQ(listed->front().load, 49u);
  // Stop heartbeating: the record must be gone within the TTL (plus scheduling slack).
  bool gone = false;
  while (!gone && Clock::now() - last_heartbeat < ttl + 400ms) {
    auto now_listed = this->list(*registry);
    gone = now_listed && !this->contains(*now_listed, 11);
    if (!gone) run_for(this->io_, 20ms);
  }
  const auto gone_after = Clock::now() - last_heartbeat;
  EXPECT_TRUE(gone);
  EXPECT_GE(gone_after, ttl - 50ms) << "expired before its TTL";
  // A heartbeat for an expired record says so: the owner must register again.
  EXPECT_EQ(this->done([&](auto cb) { registry->heartbeat(11, 1, false, cb); }), false);
}

TYPED_TEST(RegistryContract, HeartbeatOfAnUnknownEndpointFails) {
  auto registry = this->make();
  EXPECT_EQ(this->done([&](auto cb) { registry->heartbeat(999, 1, false, cb); }), false);
  auto listed = this->list(*registry);
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty()) << "a heartbeat must not create a partial record";
}

TYPED_TEST(RegistryContract, DrainingFlagIsStoredAndWatched) {
  auto transceiver = this->make(5000ms);
  auto relay = this->make(5000ms, 10'000ms);  // long re-list: the change must come by notification
  std::vector<RegistryEvent> events;
  relay->watch([&](const RegistryEvent& event) { events.push_back(event); });
  ASSERT_EQ(this->done([&](auto cb) { transceiver->register_endpoint(record(5, "10.0.0.5:5000"), cb); }),
            true);
  ASSERT_TRUE(run_until(
      this->io_, [&] { return !events.empty(); }, 1000ms));
  EXPECT_EQ(events.back().change, RegistryChange::kAdded);
  EXPECT_FALSE(events.back().record.draining);

  ASSERT_EQ(this->done([&](auto cb) { transceiver->heartbeat(5, 10, true, cb); }), true);
  auto listed = this->list(*transceiver);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE(listed->front().draining);
  const auto start = Clock::now();
  ASSERT_TRUE(run_until(
      this->io_, [&] { return events.size() >= 2; }, 1000ms));
  EXPECT_LT(Clock::now() - start, 1000ms);
  EXPECT_EQ(events[1].change, RegistryChange::kUpdated);
  EXPECT_TRUE(events[1].record.draining);
}

TYPED_TEST(RegistryContract, WatchSeesAddAndRemoveWithinOneSecond) {
  auto transceiver = this->make(5000ms);
  auto relay = this->make(5000ms, 10'000ms);
  std::vector<RegistryEvent> events;
  relay->watch([&](const RegistryEvent& event) { events.push_back(event); });
  run_for(this->io_, 50ms);

  auto start = Clock::now();
  ASSERT_EQ(this->done([&](auto cb) { transceiver->register_endpoint(record(21, "10.0.0.21:2100"), cb); }),
            true);
  ASSERT_TRUE(run_until(
      this->io_, [&] { return events.size() == 1; }, 1000ms));
  EXPECT_LT(Clock::now() - start, 1000ms);
  EXPECT_EQ(events[0].change, RegistryChange::kAdded);
  EXPECT_EQ(events[0].record, record(21, "10.0.0.21:2100"));

  start = Clock::now();
  transceiver->deregister(21);
  ASSERT_TRUE(run_until(
      this->io_, [&] { return events.size() == 2; }, 1000ms));
  EXPECT_LT(Clock::now() - start, 1000ms);
  EXPECT_EQ(events[1].change, RegistryChange::kRemoved);
  EXPECT_EQ(events[1].record.id, 21);
}

TYPED_TEST(RegistryContract, WatchSeesTtlExpiryThroughThePeriodicRelist) {
  auto transceiver = this->make(300ms);
  auto relay = this->make(300ms, 200ms);
  std::vector<RegistryEvent> events;
  relay->watch([&](const RegistryEvent& event) { events.push_back(event); });
  ASSERT_EQ(this->done([&](auto cb) { transceiver->register_endpoint(record(31, "10.0.0.31:3100"), cb); }),
            true);
  const auto registered = Clock::now();
  ASSERT_TRUE(run_until(
      this->io_, [&] { return events.size() == 2; }, 1500ms));
  EXPECT_EQ(events[0].change, RegistryChange::kAdded);
  EXPECT_EQ(events[1].change, RegistryChange::kRemoved);
  EXPECT_LT(Clock::now() - registered, 300ms + 1000ms);
}

TYPED_TEST(RegistryContract, WatchStartsWithEveryLiveEndpoint) {
  auto transceiver = this->make(5000ms);
  for (EndpointId id : {1, 2, 3}) {
    ASSERT_EQ(this->done([&](auto cb) { transceiver->register_endpoint(record(id, "10.0.0.1:1000"), cb); }),
              true);
  }
  auto relay = this->make(5000ms, 10'000ms);
  std::set<EndpointId> added;
  relay->watch([&](const RegistryEvent& event) {
    if (event.change == RegistryChange::kAdded) added.insert(event.record.id);
  });
  ASSERT_TRUE(run_until(
      this->io_, [&] { return added.size() == 3; }, 1000ms));
}

TYPED_TEST(RegistryContract, ConcurrentAllocatorsGetDisjointRanges) {
  constexpr uint16_t kCount = 8;
  std::vector<std::unique_ptr<Registry>> allocators;
  for (int i = 0; i < 4; ++i) allocators.push_back(this->make());
  run_for(this->io_, 20ms);  // let the connections come up so the calls race at the server
  std::map<std::string, std::optional<EndpointId>> bases;
  int answered = 0;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 4; ++i) {
      const std::string pod = "pod-" + std::to_string(round) + "-" + std::to_string(i);
      allocators[i]->allocate_endpoint_ids(pod, kCount, [&, pod](std::optional<EndpointId> base) {
        bases[pod] = base;
        ++answered;
      });
    }
  }
  ASSERT_TRUE(run_until(this->io_, [&] { return answered == 20; }));
  std::vector<std::pair<int, int>> ranges;
  for (const auto& [pod, base] : bases) {
    ASSERT_TRUE(base) << pod;
    EXPECT_GE(*base, 1);
    ranges.emplace_back(*base, *base + kCount);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "ranges overlap";
  }
}

TYPED_TEST(RegistryContract, SamePodIdentityGetsTheSameBaseAfterARestart) {
  std::optional<EndpointId> first;
  std::optional<EndpointId> other;
  {
    auto registry = this->make();
    first = *await<std::optional<EndpointId>>(
        this->io_, [&](auto cb) { registry->allocate_endpoint_ids("tx-0", 4, cb); });
    other = *await<std::optional<EndpointId>>(
        this->io_, [&](auto cb) { registry->allocate_endpoint_ids("tx-1", 4, cb); });
  }
  ASSERT_TRUE(first && other);
  EXPECT_NE(*first, *other);
  auto restarted = this->make();  // a new client object, as after a pod restart
  auto again = await<std::optional<EndpointId>>(
      this->io_, [&](auto cb) { restarted->allocate_endpoint_ids("tx-0", 4, cb); });
  ASSERT_TRUE(again && *again);
  EXPECT_EQ(**again, *first);
  auto fewer = await<std::optional<EndpointId>>(
      this->io_, [&](auto cb) { restarted->allocate_endpoint_ids("tx-0", 2, cb); });
  ASSERT_TRUE(fewer && *fewer);
  EXPECT_EQ(**fewer, *first);
  // Asking for more than the pod had cannot reuse the range: a new, disjoint one.
  auto more = await<std::optional<EndpointId>>(
      this->io_, [&](auto cb) { restarted->allocate_endpoint_ids("tx-0", 16, cb); });
  ASSERT_TRUE(more && *more);
  EXPECT_TRUE(**more >= *other + 4 || **more + 16 <= *first);
}

}  // namespace
}  // namespace rtce::test
