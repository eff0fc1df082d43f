// flow_store_contract_test.cpp — the FlowStore's behaviour, run unchanged against the
// Redis and the in-memory implementation: put/get/refresh/del, TTL expiry, a 10k
// pipelined batch, and restore.
#include <map>
#include <set>

#include "sync_test_support.h"

namespace rtce::test {
namespace {

template <typename Backend>
class FlowStoreContract : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = Backend::unavailable(); !why.empty()) GTEST_FAIL() << why;
    store_ = backend_.flow_store(io_);
  }
  std::optional<bool> done(std::function<void(DoneCallback)> start) { return await<bool>(io_, start); }
  std::optional<FlowRecord> get(const rtce_flow_key& key) {
    auto result = await<std::optional<FlowRecord>>(io_, [&](auto cb) { store_->get(key, cb); });
    EXPECT_TRUE(result) << "get did not call back";
    return result ? *result : std::nullopt;
  }

  boost::asio::io_context io_;
  Backend backend_;
  std::unique_ptr<FlowStore> store_;
};

TYPED_TEST_SUITE(FlowStoreContract, Backends, BackendNames);

rtce_flow_key flow(int i) {
  const std::string client = "198.51." + std::to_string(i / 250 % 250) + "." + std::to_string(i % 250 + 1) +
                             ":" + std::to_string(10000 + i % 50000);
  return make_flow_key(addr(client.c_str()), addr("203.0.113.10:3478"));
}

TYPED_TEST(FlowStoreContract, PutGetRefreshDelete) {
  const rtce_flow_key key = make_flow_key(addr("198.51.100.7:50000"), addr("203.0.113.1:3478"));
  const rtce_flow_key v6 = make_flow_key(addr("[2001:db8::7]:50001"), addr("[2001:db8:1::1]:3478"));
  EXPECT_EQ(this->get(key), std::nullopt);
  EXPECT_EQ(this->done([&](auto cb) { this->store_->put(key, 42, 5000ms, cb); }), true);
  EXPECT_EQ(this->done([&](auto cb) { this->store_->put(v6, 43, 5000ms, cb); }), true);
  EXPECT_EQ(this->get(key), EndpointId{42});
  EXPECT_EQ(this->get(v6), EndpointId{43});
  EXPECT_EQ(this->done([&](auto cb) { this->store_->put(key, 44, 5000ms, cb); }), true);  // re-home
  EXPECT_EQ(this->get(key), EndpointId{44});
  EXPECT_EQ(this->done([&](auto cb) { this->store_->refresh(key, 5000ms, cb); }), true);
  EXPECT_EQ(this->done([&](auto cb) { this->store_->del(key, cb); }), true);
  EXPECT_EQ(this->get(key), std::nullopt);
  EXPECT_EQ(this->done([&](auto cb) { this->store_->refresh(key, 5000ms, cb); }), false);
  EXPECT_EQ(this->get(v6), EndpointId{43});
  EXPECT_TRUE(this->store_->connected());
  EXPECT_EQ(this->store_->counters().errors.get(), 0u);
}

// The global relay's ingress flows name a peer cluster, not an endpoint; both kinds share
// the key space (one flow is one or the other) and come back from get, put_many and restore
// as they were written.
TYPED_TEST(FlowStoreContract, PeerClusterRecordsRoundTrip) {
  const rtce_flow_key ingress = make_flow_key(addr("198.51.100.8:50000"), addr("203.0.113.1:3478"));
  const rtce_flow_key local = make_flow_key(addr("198.51.100.9:50000"), addr("203.0.113.1:3478"));
  ASSERT_EQ(this->done([&](auto cb) { this->store_->put(ingress, FlowRecord::peer_cluster(2), 5000ms, cb); }),
            true);
  ASSERT_EQ(this->done([&](auto cb) { this->store_->put(local, 2, 5000ms, cb); }), true);
  EXPECT_EQ(this->get(ingress), FlowRecord::peer_cluster(2));
  EXPECT_EQ(this->get(local), FlowRecord(2));
  EXPECT_NE(this->get(ingress), FlowRecord(2));  // cluster 2 is not endpoint 2
  const std::vector<FlowEntry> batch{{flow(1), FlowRecord::peer_cluster(255)}, {flow(2), FlowRecord(7)}};
  this->store_->put_many(batch, 5000ms);
  EXPECT_EQ(this->get(flow(1)), FlowRecord::peer_cluster(255));
  EXPECT_EQ(this->get(flow(2)), FlowRecord(7));
  // A local flow that became an ingress flow (the client's next session) is overwritten.
  ASSERT_EQ(this->done([&](auto cb) { this->store_->put(local, FlowRecord::peer_cluster(3), 5000ms, cb); }),
            true);
  EXPECT_EQ(this->get(local), FlowRecord::peer_cluster(3));
  std::map<std::string, FlowRecord> restored;
  std::optional<bool> ok;
  auto fresh = this->backend_.flow_store(this->io_);
  fresh->restore(
      [&](std::span<const FlowEntry> page) {
        for (const auto& entry : page) restored[flow_client(entry.key).to_string()] = entry.record;
      },
      [&](bool result) { ok = result; });
  ASSERT_TRUE(run_until(
      this->io_, [&] { return ok.has_value(); }, 5000ms));
  EXPECT_EQ(restored[flow_client(ingress).to_string()], FlowRecord::peer_cluster(2));
  EXPECT_EQ(restored[flow_client(flow(1)).to_string()], FlowRecord::peer_cluster(255));
  EXPECT_EQ(restored[flow_client(flow(2)).to_string()], FlowRecord(7));
}

// An owner flow's record carries the ingress relay it comes from, and comes back as written.
TYPED_TEST(FlowStoreContract, OwnerRecordsRoundTrip) {
  const rtce_flow_key owned = make_flow_key(addr("198.51.100.8:50000"), addr("203.0.113.9:3478"));
  const FlowRecord record = FlowRecord::owner(7, addr("198.18.0.9:3479"));
  ASSERT_EQ(this->done([&](auto cb) { this->store_->put(owned, record, 5000ms, cb); }), true);
  EXPECT_EQ(this->get(owned), record);
  const std::vector<FlowEntry> batch{{flow(1), FlowRecord::owner(8, addr("[2001:db8::9]:3479"))}};
  this->store_->put_many(batch, 5000ms);
  EXPECT_EQ(this->get(flow(1)), FlowRecord::owner(8, addr("[2001:db8::9]:3479")));
}

TYPED_TEST(FlowStoreContract, FlowsExpireAfterTheirTtlAndRefreshExtendsIt) {
  const rtce_flow_key idle = flow(1);
  const rtce_flow_key active = flow(2);
  ASSERT_EQ(this->done([&](auto cb) { this->store_->put(idle, 1, 300ms, cb); }), true);
  ASSERT_EQ(this->done([&](auto cb) { this->store_->put(active, 2, 300ms, cb); }), true);
  const auto put_at = Clock::now();
  ASSERT_EQ(this->done([&](auto cb) { this->store_->refresh(active, 3000ms, cb); }), true);
  bool expired = false;
  while (!expired && Clock::now() - put_at < 300ms + 500ms) {
    expired = !this->get(idle).has_value();
    if (!expired) run_for(this->io_, 20ms);
  }
  EXPECT_TRUE(expired);
  EXPECT_GE(Clock::now() - put_at, 250ms) << "expired before its TTL";
  EXPECT_EQ(this->get(active), EndpointId{2});
  EXPECT_EQ(this->done([&](auto cb) { this->store_->refresh(idle, 3000ms, cb); }), false);
}

TYPED_TEST(FlowStoreContract, TenThousandPipelinedPutsAreAllFound) {
  constexpr int kFlows = 10'000;
  std::vector<FlowEntry> flows;
  for (int i = 0; i < kFlows; ++i) flows.push_back({flow(i), static_cast<EndpointId>(i % 1000 + 1)});
  this->store_->put_many(flows, 30'000ms);
  int answered = 0;
  int found = 0;
  for (const auto& entry : flows) {
    this->store_->get(entry.key, [&, expected = entry.record](std::optional<FlowRecord> id) {
      ++answered;
      if (id == expected) ++found;
    });
  }
  ASSERT_TRUE(run_until(
      this->io_, [&] { return answered == kFlows; }, 10'000ms))
      << answered;
  EXPECT_EQ(found, kFlows);
  EXPECT_EQ(this->store_->counters().dropped.get(), 0u);
  EXPECT_GE(this->store_->counters().commands_sent.get(), 2u * kFlows);
}

TYPED_TEST(FlowStoreContract, RestoreReadsBackEveryFlow) {
  constexpr int kFlows = 2'500;
  std::vector<FlowEntry> flows;
  for (int i = 0; i < kFlows; ++i) flows.push_back({flow(i), static_cast<EndpointId>(i % 7 + 1)});
  flows.push_back({make_flow_key(addr("[2001:db8::9]:4000"), addr("[2001:db8::1]:3478")), 9});
  this->store_->put_many(flows, 30'000ms);
  // One connection answers in order: once this get is answered every put has landed.
  ASSERT_EQ(this->get(flows.back().key), EndpointId{9});
  // A relay that never saw these flows (a fresh client object) reads them back.
  auto fresh = this->backend_.flow_store(this->io_);
  std::map<std::string, FlowRecord> restored;
  std::optional<bool> ok;
  fresh->restore(
      [&](std::span<const FlowEntry> batch) {
        for (const auto& entry : batch) {
          restored[flow_client(entry.key).to_string() + "|" + flow_vip(entry.key).to_string()] = entry.record;
        }
      },
      [&](bool result) { ok = result; });
  ASSERT_TRUE(run_until(
      this->io_, [&] { return ok.has_value(); }, 10'000ms));
  EXPECT_TRUE(*ok);
  ASSERT_EQ(restored.size(), flows.size());
  for (const auto& entry : flows) {
    EXPECT_EQ(restored[flow_client(entry.key).to_string() + "|" + flow_vip(entry.key).to_string()],
              entry.record);
  }
}

}  // namespace
}  // namespace rtce::test
