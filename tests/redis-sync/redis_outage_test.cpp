// redis_outage_test.cpp — the Redis implementations when Redis is killed, frozen and
// restarted under traffic: calls return at once, nothing crashes, the queue stays
// bounded, errors/timeouts/drops are counted, and the clients reconnect by themselves.
// Each test owns its redis-server.
#include "sync_test_support.h"

namespace rtce::test {
namespace {

class RedisOutage : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisServer::available())
      GTEST_FAIL() << kRedisServerPath << " is missing (scripts/install-deps.sh installs redis-server)";
    server_ = std::make_unique<RedisServer>();
    ASSERT_TRUE(server_->start()) << "redis-server did not answer PING";
    options_ = redis_options(server_->port());
    options_.command_timeout = 300ms;
    options_.max_pending = 5000;
  }

  static rtce_flow_key flow(int i) {
    const std::string client = "10." + std::to_string(i >> 16 & 255) + "." + std::to_string(i >> 8 & 255) +
                               "." + std::to_string(i & 255) + ":" + std::to_string(1024 + i % 60000);
    return make_flow_key(addr(client.c_str()), addr("203.0.113.1:3478"));
  }

  boost::asio::io_context io_;
  std::unique_ptr<RedisServer> server_;
  RedisOptions options_;
};

TEST_F(RedisOutage, KilledMidTrafficNothingBlocksAndTheStoreRecovers) {
  RedisFlowStore store(io_, options_, FlowStoreOptions{.cluster = 1});
  int stored = 0;
  for (int i = 0; i < 1000; ++i) store.put(flow(i), 1, 60'000ms, [&](bool ok) { stored += ok; });
  ASSERT_TRUE(run_until(io_, [&] { return stored == 1000; }));
  ASSERT_TRUE(store.connected());

  server_->kill();
  // Traffic during the outage: every call returns immediately; the queue never grows
  // past its bound; every callback still comes back, with a failure.
  int answered = 0;
  int failed = 0;
  size_t max_pending = 0;
  const auto start = Clock::now();
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 5000; ++i) {
      store.put(flow(1000 + i), 2, 60'000ms, [&](bool ok) {
        ++answered;
        failed += !ok;
      });
      max_pending = std::max(max_pending, store.pending());
    }
    io_.restart();
    io_.poll();
  }
  const auto issue_time = Clock::now() - start;
  EXPECT_LT(issue_time, 1000ms) << "issuing 20000 puts during an outage must not block";
  EXPECT_LE(max_pending, options_.max_pending);
  ASSERT_TRUE(run_until(
      io_, [&] { return answered == 20'000; }, 5000ms))
      << answered;
  EXPECT_EQ(failed, 20'000);
  EXPECT_FALSE(store.connected());
  auto got = await<std::optional<FlowRecord>>(
      io_, [&](auto cb) { store.get(flow(1), cb); }, 2000ms);
  ASSERT_TRUE(got) << "a get during the outage must still call back";
  EXPECT_EQ(*got, std::nullopt);
  const auto& counters = store.counters();
  EXPECT_GT(counters.dropped.get(), 0u);
  EXPECT_GT(counters.errors.get() + counters.timeouts.get(), 0u);

  // Redis comes back (empty: no persistence in the test): the store reconnects on its own
  // within the 2 s backoff cap and works again.
  ASSERT_TRUE(server_->start());
  const auto restarted = Clock::now();
  ASSERT_TRUE(run_until(
      io_, [&] { return store.connected(); }, 4000ms));
  EXPECT_LT(Clock::now() - restarted, 2500ms);
  EXPECT_GE(counters.reconnects.get(), 1u);
  auto ok = await<bool>(io_, [&](auto cb) { store.put(flow(7), 9, 60'000ms, cb); });
  EXPECT_EQ(ok, true);
  got = await<std::optional<FlowRecord>>(io_, [&](auto cb) { store.get(flow(7), cb); });
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, EndpointId{9});
}

TEST_F(RedisOutage, FrozenServerTimesOutCommandsAndTheQueueStaysBounded) {
  RedisFlowStore store(io_, options_, FlowStoreOptions{.cluster = 2});
  ASSERT_TRUE(run_until(io_, [&] { return store.connected(); }));
  server_->pause();
  int answered = 0;
  int failed = 0;
  const auto start = Clock::now();
  for (int i = 0; i < 8000; ++i) {
    store.put(flow(i), 3, 60'000ms, [&](bool ok) {
      ++answered;
      failed += !ok;
    });
  }
  EXPECT_LT(Clock::now() - start, 500ms);
  EXPECT_LE(store.pending(), options_.max_pending);
  ASSERT_TRUE(run_until(
      io_, [&] { return answered == 8000; }, 3000ms))
      << answered;
  EXPECT_EQ(failed, 8000);
  EXPECT_GE(store.counters().timeouts.get(), 1u);
  EXPECT_EQ(store.counters().dropped.get(), 3000u);

  server_->resume();
  // After the timeout the connection was reset; it comes back and serves again.
  std::optional<bool> ok;
  ASSERT_TRUE(run_until(
      io_,
      [&] {
        if (!ok.has_value() || !*ok)
          ok = await<bool>(io_, [&](auto cb) { store.put(flow(1), 4, 60'000ms, cb); });
        return ok == true;
      },
      4000ms));
  auto got = await<std::optional<FlowRecord>>(io_, [&](auto cb) { store.get(flow(1), cb); });
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, EndpointId{4});
}

TEST_F(RedisOutage, FrozenServerTimesOutPipelinedBatchesPerCommandAndBoundsThem) {
  // put_many sends a batch as one in-flight entry; its losses are still counted per flow.
  RedisFlowStore store(io_, options_, FlowStoreOptions{.cluster = 2});
  ASSERT_TRUE(run_until(io_, [&] { return store.connected(); }));
  server_->pause();
  std::vector<FlowEntry> batch;
  for (int i = 0; i < 1000; ++i) batch.push_back(FlowEntry{flow(i), 5});
  const auto start = Clock::now();
  for (int round = 0; round < 8; ++round) store.put_many(batch, 60'000ms);  // 8000 flows
  EXPECT_LT(Clock::now() - start, 500ms) << "put_many must not wait for a frozen server";
  EXPECT_EQ(store.pending(), options_.max_pending);
  EXPECT_EQ(store.counters().dropped.get(), 3000u);
  // The stuck head times out: every flow of every batch in flight is one timeout.
  ASSERT_TRUE(run_until(
      io_, [&] { return store.counters().timeouts.get() >= 5000u; }, 3000ms))
      << store.counters().timeouts.get();
  EXPECT_LT(store.counters().timeouts.get(), 5100u) << "only reconnect attempts may add to them";
  EXPECT_EQ(store.pending(), 0u);

  server_->resume();
  // Reconnected, a batch is written whole.
  ASSERT_TRUE(run_until(
      io_, [&] { return store.connected(); }, 4000ms));
  const uint64_t replies_before = store.counters().replies.get();
  store.put_many(batch, 60'000ms);
  ASSERT_TRUE(run_until(
      io_, [&] { return store.counters().replies.get() - replies_before >= 1000u; }, 3000ms));
  auto got = await<std::optional<FlowRecord>>(io_, [&](auto cb) { store.get(flow(999), cb); });
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, EndpointId{5});
}

TEST_F(RedisOutage, RegistryKeepsItsWatchedSetDuringAnOutageAndResyncsAfter) {
  // The relay's TTL sets its outage grace; the transceiver's records outlive the test.
  const RegistryOptions registry_options{.cluster = 3, .endpoint_ttl = 1500ms, .relist_interval = 200ms};
  RedisRegistry transceiver(io_, options_, RegistryOptions{.cluster = 3, .endpoint_ttl = 60'000ms});
  RedisRegistry relay(io_, options_, registry_options);
  std::vector<RegistryEvent> events;
  relay.watch([&](const RegistryEvent& event) { events.push_back(event); });
  transceiver.register_endpoint(EndpointRecord{1, addr("10.0.0.1:1000"), 10, 0, false});
  ASSERT_TRUE(run_until(io_, [&] { return events.size() == 1; }));

  server_->kill();
  // Lists fail fast and are reported as failures, not as an empty registry.
  auto listed = await<std::optional<std::vector<EndpointRecord>>>(
      io_, [&](auto cb) { relay.list(cb); }, 2000ms);
  ASSERT_TRUE(listed);
  EXPECT_FALSE(*listed);
  auto base = await<std::optional<FlowRecord>>(
      io_, [&](auto cb) { transceiver.allocate_endpoint_ids("pod", 2, cb); }, 2000ms);
  ASSERT_TRUE(base);
  EXPECT_FALSE(*base);
  run_for(io_, 600ms);  // several re-list periods while down
  EXPECT_EQ(events.size(), 1u) << "an outage must not look like every endpoint leaving";

  const auto back = Clock::now();
  ASSERT_TRUE(server_->start());  // comes back empty
  ASSERT_TRUE(run_until(
      io_, [&] { return transceiver.connected() && relay.connected(); }, 4000ms));
  // Truth is Redis again: a new registration is seen at once; the old endpoint, which
  // never registers again, leaves once it has had one TTL to do so (the outage grace).
  transceiver.register_endpoint(EndpointRecord{2, addr("10.0.0.2:1000"), 10, 0, false});
  ASSERT_TRUE(run_until(
      io_, [&] { return events.size() == 3; }, 4000ms));
  EXPECT_EQ(events[1].change, RegistryChange::kAdded);
  EXPECT_EQ(events[1].record.id, 2);
  EXPECT_EQ(events[2].change, RegistryChange::kRemoved);
  EXPECT_EQ(events[2].record.id, 1);
  EXPECT_GE(Clock::now() - back, registry_options.endpoint_ttl);
  EXPECT_GE(relay.counters().reconnects.get(), 1u);
}

// Issue 15 item 6: Redis frozen (SIGSTOP) for longer than the registry TTL, as a call
// goes on. When it resumes, every record has expired because no transceiver could
// heartbeat into it. The relay's watch must not report a mass departure: a live
// transceiver re-registers within one TTL and is never removed; one that really stopped
// leaves one TTL (plus a re-list) after Redis came back, not sooner.
TEST_F(RedisOutage, RegistryFrozenLongerThanTheTtlKeepsEndpointsThatRegisterAgain) {
  constexpr Millis kTtl = 1200ms;
  constexpr Millis kRelist = 100ms;
  options_.backoff_max = 200ms;  // both sides reconnect promptly after SIGCONT
  const RegistryOptions registry_options{.cluster = 6, .endpoint_ttl = kTtl, .relist_interval = kRelist};
  RedisRegistry transceivers(io_, options_, registry_options);
  RedisRegistry relay(io_, options_, registry_options);
  std::vector<std::pair<Clock::time_point, RegistryEvent>> events;
  relay.watch([&](const RegistryEvent& event) { events.emplace_back(Clock::now(), event); });

  // Endpoint 1 is a live transceiver: it heartbeats every TTL/3 and registers again when
  // its record is gone (what RegistryAgent does). Endpoint 2 dies during the freeze.
  const EndpointRecord alive{1, addr("10.0.0.1:40000"), 10, 0, false};
  const EndpointRecord dies{2, addr("10.0.0.2:40000"), 10, 0, false};
  bool endpoint2_heartbeats = true;
  boost::asio::steady_timer heartbeat(io_);
  std::function<void()> beat = [&] {
    transceivers.heartbeat(alive.id, 0, false, [&](bool ok) {
      if (!ok) transceivers.register_endpoint(alive);
    });
    if (endpoint2_heartbeats) transceivers.heartbeat(dies.id, 0, false);
    heartbeat.expires_after(kTtl / 3);
    heartbeat.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) beat();
    });
  };
  transceivers.register_endpoint(alive);
  transceivers.register_endpoint(dies);
  beat();
  ASSERT_TRUE(run_until(io_, [&] { return events.size() == 2; }));

  server_->pause();
  endpoint2_heartbeats = false;
  run_for(io_, 2 * kTtl + 500ms);  // every record's TTL runs out inside the frozen server
  EXPECT_EQ(events.size(), 2u) << "a frozen store must not look like endpoints leaving";
  server_->resume();
  const auto resumed = Clock::now();

  auto removed = [&](EndpointId id) {
    return std::find_if(events.begin(), events.end(), [id](const auto& e) {
      return e.second.change == RegistryChange::kRemoved && e.second.record.id == id;
    });
  };
  ASSERT_TRUE(run_until(
      io_, [&] { return removed(2) != events.end(); }, kTtl + 3000ms))
      << "an endpoint that stopped heartbeating must still leave after Redis returns";
  const auto left_after = removed(2)->first - resumed;
  EXPECT_GE(left_after, kTtl) << "removed before it had one TTL to register again";
  EXPECT_LT(left_after, kTtl + kRelist + 1500ms);
  run_for(io_, kTtl);  // and well past the grace: the live one stays
  EXPECT_EQ(removed(1), events.end()) << "the live transceiver was dropped after the freeze";
  auto listed = await<std::optional<std::vector<EndpointRecord>>>(io_, [&](auto cb) { relay.list(cb); });
  ASSERT_TRUE(listed && *listed);
  ASSERT_EQ((*listed)->size(), 1u);
  EXPECT_EQ((**listed)[0].id, 1) << "the live transceiver registered again";
  heartbeat.cancel();
}

TEST_F(RedisOutage, NoServerAtAllCountsConnectErrorsAndBacksOff) {
  server_->kill();
  RedisFlowStore store(io_, options_, FlowStoreOptions{.cluster = 4});
  run_for(io_, 1500ms);
  EXPECT_FALSE(store.connected());
  // 50+100+200+400+800 ms: about 5 attempts in 1.5 s, not hundreds.
  EXPECT_GE(store.counters().errors.get(), 3u);
  EXPECT_LE(store.counters().errors.get(), 8u);
  ASSERT_TRUE(server_->start());
  ASSERT_TRUE(run_until(
      io_, [&] { return store.connected(); }, 3000ms));
  EXPECT_EQ(store.counters().reconnects.get(), 0u) << "the first successful connect is not a reconnect";
}

TEST(RedisAuth, PasswordFromTheUrlIsSentBeforeAnyCommand) {
  if (!RedisServer::available()) GTEST_FAIL() << kRedisServerPath << " is missing (scripts/install-deps.sh)";
  RedisServer server(0, "s3cret");
  ASSERT_TRUE(server.start());
  boost::asio::io_context io;
  const rtce_flow_key key = make_flow_key(addr("198.51.100.1:1"), addr("203.0.113.1:3478"));
  {
    auto options = RedisOptions::from_url("redis://:s3cret@127.0.0.1:" + std::to_string(server.port()));
    ASSERT_TRUE(options);
    RedisFlowStore store(io, *options, FlowStoreOptions{.cluster = 1});
    EXPECT_EQ(await<bool>(io, [&](auto cb) { store.put(key, 3, 60'000ms, cb); }), true);
    EXPECT_EQ(store.counters().errors.get(), 0u);
  }
  auto options = RedisOptions::from_url("redis://:wrong@127.0.0.1:" + std::to_string(server.port()));
  RedisFlowStore store(io, *options, FlowStoreOptions{.cluster = 1});
  auto got = await<std::optional<FlowRecord>>(io, [&](auto cb) { store.get(key, cb); });
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, std::nullopt);
  EXPECT_GE(store.counters().errors.get(), 1u);
}

}  // namespace
}  // namespace rtce::test
