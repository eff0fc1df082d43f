// memory_and_schema_test.cpp — what only one side has: TTLs of the in-memory stores on a
// clock the test drives, the memory store's size bound, the Redis key schema and URL
// parsing.
#include "schema.h"
#include "sync_test_support.h"

namespace rtce::test {
namespace {

struct DrivenClock {
  Nanos now = 1'000'000'000;
  void advance(Millis ms) { now += static_cast<Nanos>(ms.count()) * 1'000'000; }
};

TEST(MemoryFlowStore, TtlFollowsTheDrivenClock) {
  boost::asio::io_context io;
  auto clock = std::make_shared<DrivenClock>();
  auto backend = std::make_shared<MemoryFlowBackend>([clock] { return clock->now; });
  MemoryFlowStore store(io, backend);
  const rtce_flow_key key = make_flow_key(addr("198.51.100.1:5000"), addr("203.0.113.1:3478"));
  store.put(key, 5, 1000ms);
  clock->advance(999ms);
  auto got = await<std::optional<FlowRecord>>(io, [&](auto cb) { store.get(key, cb); });
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, EndpointId{5});
  EXPECT_EQ(await<bool>(io, [&](auto cb) { store.refresh(key, 1000ms, cb); }), true);
  clock->advance(999ms);
  got = await<std::optional<FlowRecord>>(io, [&](auto cb) { store.get(key, cb); });
  EXPECT_EQ(*got, EndpointId{5});
  clock->advance(2ms);
  got = await<std::optional<FlowRecord>>(io, [&](auto cb) { store.get(key, cb); });
  EXPECT_EQ(*got, std::nullopt);
  EXPECT_EQ(backend->size(), 0u);
}

TEST(MemoryFlowStore, IsBoundedAndCountsDrops) {
  boost::asio::io_context io;
  auto clock = std::make_shared<DrivenClock>();
  auto backend = std::make_shared<MemoryFlowBackend>([clock] { return clock->now; }, 10);
  MemoryFlowStore store(io, backend);
  std::vector<FlowEntry> flows;
  for (uint16_t i = 0; i < 10; ++i) {
    flows.push_back(
        {make_flow_key(addr(("198.51.100.1:" + std::to_string(1000 + i)).c_str()), addr("203.0.113.1:3478")),
         1});
  }
  store.put_many(flows, 1000ms);
  const rtce_flow_key extra = make_flow_key(addr("198.51.100.2:1"), addr("203.0.113.1:3478"));
  EXPECT_EQ(await<bool>(io, [&](auto cb) { store.put(extra, 2, 1000ms, cb); }), false);
  EXPECT_EQ(store.counters().dropped.get(), 1u);
  clock->advance(1001ms);  // the old ones expire: room again
  EXPECT_EQ(await<bool>(io, [&](auto cb) { store.put(extra, 2, 1000ms, cb); }), true);
  EXPECT_EQ(backend->size(), 1u);
}

TEST(MemoryRegistry, TtlAndWatchFollowTheDrivenClock) {
  boost::asio::io_context io;
  auto clock = std::make_shared<DrivenClock>();
  auto backend = std::make_shared<MemoryRegistryBackend>([clock] { return clock->now; });
  const RegistryOptions options{.cluster = 0, .endpoint_ttl = 3000ms, .relist_interval = 3'600'000ms};
  MemoryRegistry transceiver(io, backend, options);
  MemoryRegistry relay(io, backend, options);
  std::vector<RegistryEvent> events;
  relay.watch([&](const RegistryEvent& event) { events.push_back(event); });
  transceiver.register_endpoint(EndpointRecord{9, addr("10.0.0.9:9000"), 1, 0, false});
  ASSERT_TRUE(run_until(io, [&] { return events.size() == 1; }));
  clock->advance(2999ms);
  EXPECT_EQ(await<bool>(io, [&](auto cb) { transceiver.heartbeat(9, 3, false, cb); }), true);
  clock->advance(2999ms);
  relay.resync();  // alive (the heartbeat extended it); its load changed
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].change, RegistryChange::kUpdated);
  EXPECT_EQ(events[1].record.load, 3u);
  clock->advance(2ms);
  relay.resync();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].change, RegistryChange::kRemoved);
  EXPECT_EQ(events[2].record.id, 9);
}

// The outage grace (watch_diff.h) on a driven clock: after the store was unavailable,
// records missing from the next snapshots are kept for one grace period from the first
// answer, then removed; a record that comes back in time is never removed.
TEST(EndpointSetDiff, HoldsRemovalsForOneGraceAfterTheStoreWasUnavailable) {
  constexpr Nanos kGrace = 3'000'000'000;
  EndpointSetDiff diff(kGrace);
  std::vector<RegistryEvent> events;
  auto emit = [&](const RegistryEvent& e) { events.push_back(e); };
  const EndpointRecord a{1, addr("10.0.0.1:1"), 1, 0, false};
  const EndpointRecord b{2, addr("10.0.0.2:1"), 1, 0, false};
  Nanos now = 1'000'000'000;
  diff.apply({a, b}, now, emit);
  ASSERT_EQ(events.size(), 2u);

  // A normal departure (no outage) is reported at once.
  diff.apply({a}, now += 100'000'000, emit);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].change, RegistryChange::kRemoved);
  diff.apply({a, b}, now += 100'000'000, emit);
  ASSERT_EQ(events.size(), 4u);

  diff.store_unavailable();
  now += 10'000'000'000;  // the outage
  const Nanos back = now;
  diff.apply({}, now, emit);  // the store answers with everything expired
  EXPECT_EQ(events.size(), 4u) << "a store back from an outage is not a mass departure";
  EXPECT_EQ(diff.held_removals(), 2u);
  diff.apply({a}, now = back + 1'000'000'000, emit);  // a registers again
  EXPECT_EQ(events.size(), 4u) << "a, kept and unchanged, needs no event";
  EXPECT_EQ(diff.held_removals(), 1u);
  diff.apply({a}, now = back + kGrace - 1, emit);
  EXPECT_EQ(events.size(), 4u);
  diff.apply({a}, now = back + kGrace, emit);  // the grace is over: b really left
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[4].change, RegistryChange::kRemoved);
  EXPECT_EQ(events[4].record.id, 2);
  EXPECT_EQ(diff.held_removals(), 0u);
}

TEST(RedisSchema, RegistryKeysShareOneHashTagFlowKeysSpread) {
  const RedisSchema schema(7);
  const rtce_flow_key key = make_flow_key(addr("198.51.100.7:50000"), addr("203.0.113.1:3478"));
  EXPECT_EQ(schema.flow_key(key), "rtce:c7:flow:198.51.100.7:50000|203.0.113.1:3478");
  EXPECT_EQ(schema.endpoint_key(12), "rtce:{c7}:ep:12");
  EXPECT_EQ(schema.endpoint_set_key(), "rtce:{c7}:eps");
  EXPECT_EQ(schema.endpoint_ids_key(), "rtce:{c7}:endpoint_ids");
  EXPECT_EQ(schema.events_channel(), "rtce:{c7}:events");
  const rtce_flow_key v6 = make_flow_key(addr("[2001:db8::7]:1"), addr("[2001:db8::1]:3478"));
  EXPECT_EQ(schema.parse_flow_key(schema.flow_key(v6)), v6);
  EXPECT_EQ(schema.parse_flow_key(schema.flow_key(key)), key);
  EXPECT_EQ(RedisSchema(8).parse_flow_key(schema.flow_key(key)), std::nullopt);
  EXPECT_EQ(schema.parse_flow_key("rtce:c7:flow:garbage"), std::nullopt);
  EXPECT_EQ(parse_endpoint_id("65535"), EndpointId{65535});
  EXPECT_EQ(parse_endpoint_id("0"), std::nullopt);
  EXPECT_EQ(parse_endpoint_id("65536"), std::nullopt);
  EXPECT_EQ(parse_endpoint_id("12x"), std::nullopt);
}

// The flow record's text (docs/redis.md, "Flow records"): version 1 is the bare endpoint id
// every relay wrote and reads; a peer cluster is "c<cluster>"; an owner flow is
// "o<endpoint>@<ingress ip:port>". Anything else, a record of a later version among them,
// reads as no record rather than a wrong one.
TEST(RedisSchema, FlowRecordText) {
  EXPECT_EQ(format_flow_record(FlowRecord(12)), "12");
  EXPECT_EQ(format_flow_record(FlowRecord(65535)), "65535");
  EXPECT_EQ(format_flow_record(FlowRecord::peer_cluster(2)), "c2");
  EXPECT_EQ(format_flow_record(FlowRecord::peer_cluster(255)), "c255");
  EXPECT_EQ(parse_flow_record("12"), FlowRecord(12));  // what older relays wrote
  EXPECT_EQ(parse_flow_record("c2"), FlowRecord::peer_cluster(2));
  EXPECT_EQ(parse_flow_record("c255"), FlowRecord::peer_cluster(255));
  const SocketAddress v4 = *SocketAddress::parse("198.18.0.9:3479");
  const SocketAddress v6 = *SocketAddress::parse("[2001:db8::9]:3479");
  EXPECT_EQ(format_flow_record(FlowRecord::owner(7, v4)), "o7@198.18.0.9:3479");
  EXPECT_EQ(format_flow_record(FlowRecord::owner(65535, v6)), "o65535@[2001:db8::9]:3479");
  EXPECT_EQ(parse_flow_record("o7@198.18.0.9:3479"), FlowRecord::owner(7, v4));
  EXPECT_EQ(parse_flow_record("o65535@[2001:db8::9]:3479"), FlowRecord::owner(65535, v6));
  EXPECT_NE(parse_flow_record("o7@198.18.0.9:3479"), FlowRecord(7));  // not a local flow of endpoint 7
  for (const char* bad : {"",
                          "0",
                          "65536",
                          "12x",
                          "c",
                          "c0",
                          "c256",
                          "c-1",
                          "c2x",
                          "C2",
                          " 12",
                          "o5",
                          "o5@",
                          "o@1.2.3.4:5",
                          "o0@1.2.3.4:5",
                          "o65536@1.2.3.4:5",
                          "o5@1.2.3.4",
                          "o5@1.2.3.4:0",
                          "o5@host:5",
                          "o5x@1.2.3.4:5",
                          "O5@1.2.3.4:5",
                          "o5@1.2.3.4:5 "})
    EXPECT_EQ(parse_flow_record(bad), std::nullopt) << '"' << bad << '"';
  // Older relays read an owner record as no endpoint, and not as a cluster either.
  EXPECT_EQ(parse_endpoint_id(format_flow_record(FlowRecord::owner(7, v4))), std::nullopt);
  // An older relay reads an ingress record as no endpoint at all (its parse_endpoint_id).
  EXPECT_EQ(parse_endpoint_id(format_flow_record(FlowRecord::peer_cluster(2))), std::nullopt);
  for (const FlowRecord& r :
       {FlowRecord(1), FlowRecord(40000), FlowRecord::peer_cluster(1), FlowRecord::peer_cluster(9),
        FlowRecord::owner(3, v4), FlowRecord::owner(3, v6)})
    EXPECT_EQ(parse_flow_record(format_flow_record(r)), r);
}

TEST(RedisOptions, FromUrl) {
  auto options = RedisOptions::from_url("redis://10.1.2.3:6380");
  ASSERT_TRUE(options);
  EXPECT_EQ(options->host, "10.1.2.3");
  EXPECT_EQ(options->port, 6380);
  EXPECT_TRUE(options->password.empty());
  options = RedisOptions::from_url("redis://:s3cret@redis.local/0");
  ASSERT_TRUE(options);
  EXPECT_EQ(options->host, "redis.local");
  EXPECT_EQ(options->port, 6379);
  EXPECT_EQ(options->password, "s3cret");
  options = RedisOptions::from_url("redis://user:pw@[::1]:7000");
  ASSERT_TRUE(options);
  EXPECT_EQ(options->host, "::1");
  EXPECT_EQ(options->port, 7000);
  EXPECT_EQ(options->username, "user");
  EXPECT_EQ(options->password, "pw");
  EXPECT_FALSE(RedisOptions::from_url("http://x:1"));
  EXPECT_FALSE(RedisOptions::from_url("redis://host:99999"));
  EXPECT_FALSE(RedisOptions::from_url("redis://host:"));
  EXPECT_FALSE(RedisOptions::from_url("redis://"));
}

}  // namespace
}  // namespace rtce::test
