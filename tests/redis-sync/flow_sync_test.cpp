// flow_sync_test.cpp — the relay's flow sync (loader/sync/flow_sync.*) against a real
// redis-server: what a worker's channel puts comes back from a lookup with its role, an
// ingress flow naming its cluster, and records written by older relays (or by later
// versions) read as the record format says (docs/redis.md, "Flow records").
#include "flow_sync.h"

#include <array>

#include "sync_test_support.h"

namespace rtce::test {
namespace {

template <typename Predicate>
bool wait_until(Predicate&& done, std::chrono::milliseconds timeout = 3000ms) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);  // the sync runs on its own thread
  }
  return true;
}

class FlowSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = RedisBackend::unavailable(); !why.empty()) GTEST_FAIL() << why;
    FlowSync::Options options;
    options.redis = redis_options(shared_redis()->port());
    options.cluster = cluster_;
    options.ttl = 60'000ms;
    sync_ = std::make_unique<FlowSync>(options, 1);
    ASSERT_TRUE(wait_until([&] { return sync_->connected(); }));
  }
  // One lookup through the channel, as a worker does it; the reply the sync sent back.
  std::optional<FlowLookupReply> lookup(const rtce_flow_key& key) {
    FlowSyncChannel& channel = sync_->channel(0);
    EXPECT_TRUE(channel.lookup(key));
    sync_->notify();
    std::optional<FlowLookupReply> got;
    wait_until([&] {
      channel.drain_replies([&](const FlowLookupReply& r) { got = r; });
      return got.has_value();
    });
    return got;
  }
  // A value written by someone else: an older relay, or a later record version.
  void raw_set(const rtce_flow_key& key, const char* value) {
    boost::asio::io_context io;
    SyncCounters counters;
    RedisConnection connection(io, redis_options(shared_redis()->port()), counters);
    connection.start();
    const std::string redis_key = RedisSchema(cluster_).flow_key(key);
    const std::array<std::string_view, 3> args{"SET", redis_key, value};
    bool done = false;
    connection.command(args, [&](SyncStatus status, const redisReply*) {
      EXPECT_EQ(status, SyncStatus::kOk);
      done = true;
    });
    ASSERT_TRUE(run_until(io, [&] { return done; }));
  }
  static rtce_flow_key key(const char* client) {
    return make_flow_key(addr(client), addr("203.0.113.1:3478"));
  }

  uint8_t cluster_ = next_cluster();
  std::unique_ptr<FlowSync> sync_;
};

TEST_F(FlowSyncTest, AnIngressFlowComesBackWithItsClusterAndALocalOneWithItsEndpoint) {
  FlowSyncChannel& channel = sync_->channel(0);
  ASSERT_TRUE(channel.put_ingress(key("198.51.100.1:5000"), 2));
  ASSERT_TRUE(channel.put(key("198.51.100.2:5000"), 2));
  sync_->notify();
  // Puts and the later gets share one connection, answered in order.
  ASSERT_TRUE(wait_until([&] { return sync_->counters().puts.get() == 2; }));
  auto ingress = lookup(key("198.51.100.1:5000"));
  ASSERT_TRUE(ingress);
  EXPECT_EQ(ingress->role, FlowRole::ingress);
  EXPECT_EQ(ingress->endpoint_id, 2u);
  auto local = lookup(key("198.51.100.2:5000"));
  ASSERT_TRUE(local);
  EXPECT_EQ(local->role, FlowRole::local);
  EXPECT_EQ(local->endpoint_id, 2u);
  EXPECT_EQ(sync_->counters().lookups_found.get(), 2u);
}

TEST_F(FlowSyncTest, OldRecordsReadAsLocalAndUnknownOnesAsNoFlow) {
  raw_set(key("198.51.100.3:5000"), "12");      // what every relay before version 2 wrote
  raw_set(key("198.51.100.4:5000"), "z9@any");  // a record kind this relay does not know
  auto old = lookup(key("198.51.100.3:5000"));
  ASSERT_TRUE(old);
  EXPECT_EQ(old->role, FlowRole::local);
  EXPECT_EQ(old->endpoint_id, 12u);
  auto unknown = lookup(key("198.51.100.4:5000"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->endpoint_id, 0u);
  EXPECT_TRUE(unknown->store_reachable);
  EXPECT_EQ(sync_->counters().lookups_missing.get(), 1u);
  EXPECT_EQ(sync_->counters().lookups_found.get(), 1u);
}

TEST(FlowSyncStoreDown, LookupsWaitForAFirstConnectThenFailAtOnceWhileTheStoreStaysDown) {
  FlowSync::Options options;
  options.redis = redis_options(RedisServer::free_port());  // nothing listens there
  options.cluster = next_cluster();
  const auto started = Clock::now();
  FlowSync sync(options, 1);
  FlowSyncChannel& channel = sync.channel(0);
  const auto one_lookup = [&] {
    EXPECT_TRUE(channel.lookup(make_flow_key(addr("198.51.100.9:5000"), addr("203.0.113.1:3478"))));
    sync.notify();
    std::optional<FlowLookupReply> got;
    EXPECT_TRUE(wait_until([&] {
      channel.drain_replies([&](const FlowLookupReply& r) { got = r; });
      return got.has_value();
    }));
    return got;
  };
  // Just started: the lookup is sent (and queued for the connect), then fails with the store.
  const auto first = one_lookup();
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->store_reachable);
  EXPECT_GE(sync.store_counters().timeouts.get() + sync.store_counters().dropped.get(), 1u);
  // Down for longer than a connect takes: answered at once, nothing sent to the store.
  ASSERT_TRUE(wait_until([&] { return sync.store_counters().errors.get() >= 2; }, 5000ms));
  // The store down since the start for longer than FlowSync's kStoreDownAfter (2 s).
  ASSERT_TRUE(wait_until([&] { return Clock::now() - started > 2100ms; }));
  const uint64_t timeouts = sync.store_counters().timeouts.get();
  const auto later = one_lookup();
  ASSERT_TRUE(later);
  EXPECT_FALSE(later->store_reachable);
  EXPECT_EQ(sync.counters().lookups_failed.get(), 2u);
  EXPECT_EQ(sync.store_counters().timeouts.get(), timeouts) << "the second lookup must not reach the store";
}

}  // namespace
}  // namespace rtce::test
