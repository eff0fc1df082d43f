// redis_cluster_test.cpp — RedisClusterClient: the key slot function against Redis's
// vectors and a real server's CLUSTER KEYSLOT, the redirect and RESP helpers, and a real
// Redis Cluster (tests/support/redis_topology.h): keys over every slot land on their
// owners, a stale map follows MOVED, ASK during a migration, a killed master replaced by
// its replica (timed), send_batch spread over the nodes, pub/sub that moves when its node
// dies, EVAL with a hash tag, queueing before the map and the pending bound, TLS with AUTH.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis_cluster_client.h"
#include "redis_protocol.h"
#include "redis_topology.h"
#include "sync_test_support.h"

namespace rtce::test {
namespace {

// A missing tool is a failure, not a skip: scripts/install-deps.sh installs both.
bool tools_available() { return RedisServer::available() && access(kRedisCliPath, X_OK) == 0; }
#define REQUIRE_REDIS_TOOLS() \
  if (!tools_available())     \
  GTEST_FAIL() << "needs /usr/bin/redis-server and redis-cli (scripts/install-deps.sh)"

struct Answer {
  SyncStatus status = SyncStatus::kError;
  int type = 0;
  std::string text;
  long long integer = 0;
};

std::optional<Answer> call(boost::asio::io_context& io, RedisClient& client, std::vector<std::string> args,
                           std::chrono::milliseconds timeout = 5000ms) {
  auto slot = std::make_shared<std::optional<Answer>>();
  std::vector<std::string_view> views(args.begin(), args.end());
  client.command(views, [slot](SyncStatus status, const redisReply* reply) {
    Answer answer;
    answer.status = status;
    if (reply != nullptr) {
      answer.type = reply->type;
      answer.text = std::string(reply_string(reply));
      answer.integer = reply->integer;
    }
    *slot = answer;
  });
  run_until(
      io, [&] { return slot->has_value(); }, timeout);
  return *slot;
}

bool ok_text(const std::optional<Answer>& answer, std::string_view text) {
  return answer && answer->status == SyncStatus::kOk && answer->text == text;
}

RedisOptions cluster_options(const RedisClusterNodes& cluster) {
  auto options = RedisOptions::from_url(cluster.url());
  EXPECT_TRUE(options.has_value()) << cluster.url();
  if (!options) return {};
  EXPECT_EQ(options->topology, RedisTopology::kCluster);
  options->command_timeout = 1000ms;
  options->connect_timeout = 500ms;
  return *options;
}

// A key whose slot is served by master `port` (per the client's map), from a numbered family.
std::string key_on(const RedisClusterClient& client, uint16_t port, const std::string& prefix) {
  for (int i = 0; i < 100000; ++i) {
    std::string key = prefix + std::to_string(i);
    const auto owner = client.owner_of_slot(redis_key_slot(key));
    if (owner && owner->port == port) return key;
  }
  return {};
}

// ---- unit parts ----

TEST(RedisKeySlot, MatchesRedisDocumentedVectors) {
  // CRC16/XMODEM("123456789") = 0x31C3 (Redis Cluster spec, appendix A); the slot keeps 14 bits.
  EXPECT_EQ(redis_key_slot("123456789"), 0x31C3 & 0x3FFF);
  EXPECT_EQ(redis_key_slot("foo"), 12182);
  EXPECT_EQ(redis_key_slot("bar"), 5061);
  EXPECT_EQ(redis_key_slot("hello"), 866);
  EXPECT_EQ(redis_key_slot(""), 0);
  // Hash tags (the spec's examples): only the first {...} with something inside counts.
  EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("user1000"));
  EXPECT_EQ(redis_key_slot("{user1000}.followers"), redis_key_slot("user1000"));
  EXPECT_EQ(redis_key_slot("foo{}{bar}"), redis_key_slot("foo{}{bar}"));  // empty tag: the whole key
  EXPECT_NE(redis_key_slot("foo{}{bar}"), redis_key_slot("bar"));
  EXPECT_EQ(redis_key_slot("foo{{bar}}zap"), redis_key_slot("{bar"));
  EXPECT_EQ(redis_key_slot("foo{bar}{zap}"), redis_key_slot("bar"));
  EXPECT_EQ(redis_key_slot("{bar"), redis_key_slot("{bar"));  // no closing brace: the whole key
  EXPECT_EQ(redis_key_slot("rtce:{c1}:flow:1.2.3.4:5|6.7.8.9:10"), redis_key_slot("c1"));
}

TEST(RedisRedirect, ParsesMovedAndAsk) {
  EXPECT_EQ(parse_redis_redirect("MOVED 3999 127.0.0.1:6381"),
            (RedisRedirect{RedisRedirect::Kind::kMoved, 3999, RedisNode{"127.0.0.1", 6381}}));
  EXPECT_EQ(parse_redis_redirect("ASK 16383 10.0.0.2:7000"),
            (RedisRedirect{RedisRedirect::Kind::kAsk, 16383, RedisNode{"10.0.0.2", 7000}}));
  EXPECT_EQ(parse_redis_redirect("MOVED 1 ::1:7000"),
            (RedisRedirect{RedisRedirect::Kind::kMoved, 1, RedisNode{"::1", 7000}}));
  EXPECT_EQ(parse_redis_redirect("MOVED 1 [::1]:7000"),
            (RedisRedirect{RedisRedirect::Kind::kMoved, 1, RedisNode{"::1", 7000}}));
  // Redis 7 with an unknown endpoint: the host is left empty for the caller to fill in.
  EXPECT_EQ(parse_redis_redirect("MOVED 5 :7001"),
            (RedisRedirect{RedisRedirect::Kind::kMoved, 5, RedisNode{"", 7001}}));
  for (const char* bad : {"MOVED", "MOVED 16384 1.2.3.4:1", "MOVED x 1.2.3.4:1", "MOVED 1 1.2.3.4",
                          "MOVED 1 1.2.3.4:0", "MOVED 1 1.2.3.4:70000", "ASK 1", "ERR unknown",
                          "TRYAGAIN Multiple keys", "CLUSTERDOWN The cluster is down", "moved 1 1.2.3.4:5"}) {
    EXPECT_FALSE(parse_redis_redirect(bad).has_value()) << bad;
  }
}

TEST(RedisResp, EncodesAndDecodesCommands) {
  const std::vector<std::string_view> args{"SET", "k", "", std::string_view("a\r\nb\0c", 6)};
  std::string text;
  encode_redis_command(args, text);
  EXPECT_EQ(text, std::string("*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$6\r\na\r\nb\0c\r\n", 38));
  std::vector<std::string_view> back;
  ASSERT_TRUE(decode_redis_command(text, back));
  EXPECT_EQ(back, args);
  for (const char* bad : {"", "*0\r\n", "*1\r\n$3\r\nGE\r\n", "*1\r\n$3\r\nGETX\r\n", "*2\r\n$3\r\nGET\r\n",
                          "*1\r\n$3\r\nGET\r\n*1", "$3\r\nGET\r\n", "*1\r\n$99\r\nGET\r\n"}) {
    EXPECT_FALSE(decode_redis_command(bad, back)) << bad;
  }
}

TEST(RedisResp, TheReaderRefusesAnArrayTooLargeToAllocate) {
  // hiredis 0.14 allocates an array's table before its elements arrive.
  const auto read = [](std::string_view bytes) {
    const std::unique_ptr<redisReader, void (*)(redisReader*)> reader(make_bounded_redis_reader(),
                                                                      redisReaderFree);
    void* reply = nullptr;
    EXPECT_EQ(redisReaderFeed(reader.get(), bytes.data(), bytes.size()), REDIS_OK);
    const int status = redisReaderGetReply(reader.get(), &reply);
    if (reply != nullptr) freeReplyObject(reply);
    return status == REDIS_OK && reply != nullptr;
  };
  EXPECT_FALSE(read("*800000000\r\n"));
  EXPECT_FALSE(read("*" + std::to_string(kRedisMaxArrayElements + 1) + "\r\n"));
  EXPECT_TRUE(read("*2\r\n$1\r\na\r\n:7\r\n"));
}

TEST(RedisClusterClient, QueuesBoundedWithoutANodeAndTimesOut) {
  boost::asio::io_context io;
  SyncCounters counters;
  RedisOptions options;
  options.topology = RedisTopology::kCluster;
  options.nodes = {RedisNode{"127.0.0.1", RedisServer::free_port()}};  // nobody listens
  options.command_timeout = 300ms;
  options.connect_timeout = 200ms;
  options.max_pending = 10;
  RedisClusterClient client(io, options, counters);
  client.start();
  std::map<SyncStatus, int> statuses;
  int accepted = 0;
  for (int i = 0; i < 15; ++i) {
    const std::string key = "k" + std::to_string(i);
    const std::array<std::string_view, 2> args{"GET", key};
    accepted += client.command(args, [&](SyncStatus status, const redisReply*) { ++statuses[status]; });
  }
  EXPECT_EQ(accepted, 10);
  EXPECT_EQ(counters.dropped.get(), 5u);
  EXPECT_EQ(client.pending(), 10u);
  EXPECT_TRUE(statuses.empty()) << "callbacks never run inside the call";
  ASSERT_TRUE(
      run_until(io, [&] { return statuses[SyncStatus::kDropped] + statuses[SyncStatus::kTimeout] == 15; }));
  EXPECT_EQ(statuses[SyncStatus::kDropped], 5);
  EXPECT_EQ(statuses[SyncStatus::kTimeout], 10);
  EXPECT_FALSE(client.connected());
  EXPECT_FALSE(client.map_known());
  EXPECT_EQ(client.pending(), 0u);
}

// ---- a shared 3-master cluster for the cases that do not change its topology ----

class ClusterShared : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!tools_available()) return;
    cluster_ = std::make_unique<RedisClusterNodes>(RedisClusterOptions{.masters = 3});
    started_ = cluster_->start();
  }
  static void TearDownTestSuite() { cluster_.reset(); }
  void SetUp() override {
    REQUIRE_REDIS_TOOLS();
    ASSERT_TRUE(started_) << "the cluster did not start";
    options_ = cluster_options(*cluster_);
  }

  static std::unique_ptr<RedisClusterNodes> cluster_;
  static bool started_;
  boost::asio::io_context io_;
  SyncCounters counters_;
  RedisOptions options_;
};
std::unique_ptr<RedisClusterNodes> ClusterShared::cluster_;
bool ClusterShared::started_ = false;

TEST_F(ClusterShared, SlotFunctionAgreesWithClusterKeyslot) {
  int checked = 0;
  for (int i = 0; i < 400; ++i) {
    std::string key = i % 4 == 0   ? "rtce:{c" + std::to_string(i) + "}:flow:x"
                      : i % 4 == 1 ? "k" + std::to_string(i * 7919)
                      : i % 4 == 2 ? "{}" + std::to_string(i) + "{t}"
                                   : std::string("\xff\x01 bin") + std::to_string(i);
    const std::string server = cluster_->node(0).command({"CLUSTER", "KEYSLOT", key});
    ASSERT_FALSE(server.empty()) << key;
    EXPECT_EQ(std::to_string(redis_key_slot(key)), server) << key;
    ++checked;
  }
  EXPECT_EQ(checked, 400);
}

TEST_F(ClusterShared, CommandsBeforeTheMapWaitThenLandOnTheOwnerOfTheirSlot) {
  RedisClusterClient client(io_, options_, counters_);
  int hooks = 0;
  client.on_connected([&] { ++hooks; });
  client.start();
  // Issued before the map is known: they wait, then go out.
  constexpr int kKeys = 3000;
  int ok = 0;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "spread:" + std::to_string(i);
    const std::string value = "v" + std::to_string(i);
    const std::array<std::string_view, 3> args{"SET", key, value};
    client.command(args, [&](SyncStatus status, const redisReply*) { ok += status == SyncStatus::kOk; });
  }
  EXPECT_FALSE(client.map_known());
  ASSERT_TRUE(run_until(io_, [&] { return ok == kKeys; })) << ok;
  EXPECT_TRUE(client.connected());
  EXPECT_GE(hooks, 1);
  EXPECT_EQ(counters_.redirects.get(), 0u) << "a fresh map needs no redirect";
  ASSERT_EQ(client.primaries(), 3u);

  // Every slot has an owner, the one the cluster names.
  std::set<uint16_t> owners;
  for (uint32_t slot = 0; slot < kRedisClusterSlots; slot += 97) {
    const auto owner = client.owner_of_slot(static_cast<uint16_t>(slot));
    ASSERT_TRUE(owner.has_value()) << slot;
    EXPECT_EQ(owner->port, cluster_->master_of_slot(static_cast<uint16_t>(slot))) << slot;
    owners.insert(owner->port);
  }
  EXPECT_EQ(owners.size(), 3u);
  // Each key is on its slot's master: the per-node key counts add up, and a node holds a key
  // only for its own slots.
  long long total = 0;
  for (size_t i = 0; i < 3; ++i) {
    const long long size = std::stoll(cluster_->node(i).command({"DBSIZE"}));
    EXPECT_GT(size, kKeys / 5) << "node " << i;
    total += size;
  }
  EXPECT_EQ(total, kKeys);
  for (int i = 0; i < kKeys; i += 37) {
    const std::string key = "spread:" + std::to_string(i);
    const size_t index = cluster_->index_of_port(cluster_->master_of_slot(redis_key_slot(key)));
    ASSERT_LT(index, cluster_->size());
    EXPECT_EQ(cluster_->node(index).command({"EXISTS", key}), "1") << key;
    EXPECT_TRUE(ok_text(call(io_, client, {"GET", key}), "v" + std::to_string(i))) << key;
  }
  // Keyless commands go to some master.
  EXPECT_TRUE(ok_text(call(io_, client, {"PING"}), "PONG"));
  // primaries() is sorted by address (one host here: by port), and command_on_primary
  // reaches each one.
  std::vector<long long> ports;
  long long scanned = 0;
  for (size_t i = 0; i < client.primaries(); ++i) {
    const auto answer = std::make_shared<std::optional<std::pair<long long, long long>>>();
    const std::array<std::string_view, 3> port{"CONFIG", "GET", "port"};
    client.command_on_primary(i, port, [answer](SyncStatus status, const redisReply* reply) {
      *answer = std::pair<long long, long long>{status == SyncStatus::kOk && reply->elements == 2
                                                    ? std::stoll(std::string(reply_string(reply->element[1])))
                                                    : -1,
                                                0};
    });
    ASSERT_TRUE(run_until(io_, [&] { return answer->has_value(); }));
    ports.push_back((*answer)->first);
    const auto size = std::make_shared<std::optional<long long>>();
    const std::array<std::string_view, 1> dbsize{"DBSIZE"};
    client.command_on_primary(i, dbsize, [size](SyncStatus status, const redisReply* reply) {
      *size = status == SyncStatus::kOk ? reply->integer : -1;
    });
    ASSERT_TRUE(run_until(io_, [&] { return size->has_value(); }));
    scanned += **size;
  }
  EXPECT_TRUE(std::is_sorted(ports.begin(), ports.end()));
  EXPECT_EQ(std::set<long long>(ports.begin(), ports.end()).size(), 3u);
  EXPECT_EQ(scanned, total);
  // Out of range: refused, answered later.
  bool answered = false;
  const std::array<std::string_view, 1> ping{"PING"};
  EXPECT_FALSE(client.command_on_primary(3, ping, [&](SyncStatus status, const redisReply*) {
    answered = status == SyncStatus::kDisconnected;
  }));
  EXPECT_TRUE(run_until(io_, [&] { return answered; }));
}

TEST_F(ClusterShared, SendBatchSpreadsOverTheNodesAndEveryKeyArrives) {
  RedisClusterClient client(io_, options_, counters_);
  client.start();
  ASSERT_TRUE(run_until(io_, [&] { return client.connected(); }));
  ASSERT_TRUE(ok_text(call(io_, client, {"PING"}), "PONG"));
  std::map<uint16_t, long long> before;
  for (size_t i = 0; i < 3; ++i)
    before[cluster_->node(i).port()] = std::stoll(cluster_->node(i).command({"DBSIZE"}));
  // One buffer, as put_many encodes it.
  constexpr int kKeys = 2000;
  std::string buffer;
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back("rtce:{c" + std::to_string(i % 200) + "}:flow:" + std::to_string(i));
    const std::array<std::string_view, 5> args{"SET", keys.back(), "12", "PX", "60000"};
    const size_t at = buffer.size();
    encode_redis_command(args, buffer);
    spans.emplace_back(at, buffer.size() - at);
  }
  std::vector<RedisBatchCommand> batch;
  for (int i = 0; i < kKeys; ++i)
    batch.push_back({std::string_view(buffer).substr(spans[i].first, spans[i].second), keys[i]});
  EXPECT_EQ(client.send_batch(batch), static_cast<size_t>(kKeys));
  buffer.assign(buffer.size(), 'x');  // the client keeps no view into the caller's buffer
  ASSERT_TRUE(run_until(io_, [&] { return client.pending() == 0; }));
  std::map<uint16_t, long long> added;
  long long total = 0;
  for (size_t i = 0; i < 3; ++i) {
    const uint16_t port = cluster_->node(i).port();
    added[port] = std::stoll(cluster_->node(i).command({"DBSIZE"})) - before[port];
    total += added[port];
    EXPECT_GT(added[port], kKeys / 10) << "node " << port << " got too few of the batch";
  }
  EXPECT_EQ(total, kKeys);
  for (int i = 0; i < kKeys; i += 53)
    EXPECT_TRUE(ok_text(call(io_, client, {"GET", keys[i]}), "12")) << keys[i];
}

TEST_F(ClusterShared, EvalWithAHashTaggedKeyRunsOnItsSlotsMaster) {
  RedisClusterClient client(io_, options_, counters_);
  client.start();
  const char* script = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[2])";
  for (int c = 1; c <= 20; ++c) {
    const std::string tag = "{c" + std::to_string(c) + "}";
    ASSERT_TRUE(ok_text(call(io_, client, {"SET", "rtce:" + tag + ":b", "B" + std::to_string(c)}), "OK"));
    const auto answer =
        call(io_, client, {"EVAL", script, "2", "rtce:" + tag + ":a", "rtce:" + tag + ":b", "A"});
    EXPECT_TRUE(ok_text(answer, "B" + std::to_string(c)))
        << tag << " " << (answer ? answer->text : "no answer");
    EXPECT_TRUE(ok_text(call(io_, client, {"GET", "rtce:" + tag + ":a"}), "A"));
  }
  // Keys of two slots in one script: the server's CROSSSLOT error comes back as an error.
  const auto cross = call(io_, client, {"EVAL", script, "2", "foo", "bar", "x"});
  ASSERT_TRUE(cross.has_value());
  EXPECT_EQ(cross->status, SyncStatus::kError);
  EXPECT_TRUE(cross->text.starts_with("CROSSSLOT")) << cross->text;
}

// ---- cases that change the cluster: each has its own ----

class ClusterOwn : public ::testing::Test {
 protected:
  void start_cluster(RedisClusterOptions options) {
    cluster_ = std::make_unique<RedisClusterNodes>(options);
    ASSERT_TRUE(cluster_->start()) << "the cluster did not start";
    options_ = cluster_options(*cluster_);
  }
  void SetUp() override { REQUIRE_REDIS_TOOLS(); }

  std::unique_ptr<RedisClusterNodes> cluster_;
  boost::asio::io_context io_;
  SyncCounters counters_;
  RedisOptions options_;
};

TEST_F(ClusterOwn, AStaleMapFollowsMovedThenReloads) {
  ASSERT_NO_FATAL_FAILURE(start_cluster({.masters = 3}));
  RedisClusterClient client(io_, options_, counters_);
  client.start();
  ASSERT_TRUE(run_until(io_, [&] { return client.connected(); }));
  const std::string key = key_on(client, cluster_->node(0).port(), "moved:");
  ASSERT_TRUE(ok_text(call(io_, client, {"SET", key, "before"}), "OK"));
  const uint16_t slot = redis_key_slot(key);
  const uint64_t loads = client.map_loads();

  // The slot moves while the client is busy elsewhere: its map is stale.
  ASSERT_TRUE(cluster_->migrate_slots(slot, slot, 1));
  EXPECT_EQ(client.owner_of_slot(slot)->port, cluster_->node(0).port());
  const auto got = call(io_, client, {"GET", key});
  EXPECT_TRUE(ok_text(got, "before")) << (got ? got->text : "no answer");
  EXPECT_GE(counters_.redirects.get(), 1u);
  EXPECT_EQ(client.owner_of_slot(slot)->port, cluster_->node(1).port()) << "MOVED updates the slot at once";
  EXPECT_TRUE(ok_text(call(io_, client, {"SET", key, "after"}), "OK"));
  EXPECT_EQ(cluster_->node(1).command({"GET", key}), "after");
  // The whole map is read again soon after (coalesced, rate-limited).
  ASSERT_TRUE(run_until(
      io_, [&] { return client.map_loads() > loads; }, 2000ms));
  EXPECT_EQ(client.owner_of_slot(slot)->port, cluster_->node(1).port());
  const uint64_t redirects = counters_.redirects.get();
  EXPECT_TRUE(ok_text(call(io_, client, {"GET", key}), "after"));
  EXPECT_EQ(counters_.redirects.get(), redirects) << "the reloaded map needs no redirect";

  // A batch whose map went stale: every entry still arrives (handlers follow MOVED).
  const std::string batch_key = key_on(client, cluster_->node(2).port(), "batchmoved:");
  const uint16_t batch_slot = redis_key_slot(batch_key);
  ASSERT_TRUE(cluster_->migrate_slots(batch_slot, batch_slot, 0));
  std::string text;
  std::vector<std::string> keys;
  std::vector<size_t> starts;
  for (int i = 0; i < 50; ++i) {
    keys.push_back("{" + batch_key + "}:" + std::to_string(i));
    starts.push_back(text.size());
    const std::array<std::string_view, 3> args{"SET", keys.back(), "v"};
    encode_redis_command(args, text);
  }
  starts.push_back(text.size());
  std::vector<RedisBatchCommand> batch;
  for (int i = 0; i < 50; ++i)
    batch.push_back({std::string_view(text).substr(starts[i], starts[i + 1] - starts[i]), keys[i]});
  EXPECT_EQ(client.send_batch(batch), 50u);
  ASSERT_TRUE(run_until(io_, [&] { return client.pending() == 0; }));
  EXPECT_EQ(cluster_->node(0).command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(batch_slot)}), "50");
}

TEST_F(ClusterOwn, AskDuringAMigrationLeavesTheMapAlone) {
  ASSERT_NO_FATAL_FAILURE(start_cluster({.masters = 3}));
  RedisClusterClient client(io_, options_, counters_);
  client.start();
  ASSERT_TRUE(run_until(io_, [&] { return client.connected(); }));
  RedisServer& source = cluster_->node(0);
  RedisServer& target = cluster_->node(1);
  const std::string tag = key_on(client, source.port(), "ask:");
  const uint16_t slot = redis_key_slot(tag);
  const std::string moved_key = "{" + tag + "}:moved";
  const std::string stays_key = "{" + tag + "}:stays";
  const std::string new_key = "{" + tag + "}:new";
  ASSERT_TRUE(ok_text(call(io_, client, {"SET", moved_key, "m"}), "OK"));
  ASSERT_TRUE(ok_text(call(io_, client, {"SET", stays_key, "s"}), "OK"));

  // Half-way through a migration: the slot is MIGRATING on the source, IMPORTING on the
  // target, and one of its keys has moved.
  const std::string source_id = source.command({"CLUSTER", "MYID"});
  const std::string target_id = target.command({"CLUSTER", "MYID"});
  const std::string slot_text = std::to_string(slot);
  ASSERT_EQ(target.command({"CLUSTER", "SETSLOT", slot_text, "IMPORTING", source_id}), "OK");
  ASSERT_EQ(source.command({"CLUSTER", "SETSLOT", slot_text, "MIGRATING", target_id}), "OK");
  ASSERT_EQ(source.command({"MIGRATE", "127.0.0.1", std::to_string(target.port()), moved_key, "0", "5000"}),
            "OK");

  const uint64_t redirects = counters_.redirects.get();
  EXPECT_TRUE(ok_text(call(io_, client, {"GET", moved_key}), "m"));      // source: ASK -> target
  EXPECT_TRUE(ok_text(call(io_, client, {"GET", stays_key}), "s"));      // still on the source
  EXPECT_TRUE(ok_text(call(io_, client, {"SET", new_key, "n"}), "OK"));  // new keys go to the target
  EXPECT_EQ(counters_.redirects.get(), redirects + 2);
  EXPECT_EQ(target.command({"CLUSTER", "COUNTKEYSINSLOT", slot_text}), "2");
  EXPECT_EQ(source.command({"CLUSTER", "COUNTKEYSINSLOT", slot_text}), "1");
  EXPECT_EQ(client.owner_of_slot(slot)->port, source.port()) << "ASK does not change the map";
  // An EVAL over keys on both sides of the migration is refused with TRYAGAIN until the
  // migration ends; the client retries it a few times, then reports the error.
  const auto split = call(io_, client, {"MGET", moved_key, stays_key});
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->status, SyncStatus::kError);
  EXPECT_TRUE(split->text.starts_with("TRYAGAIN") || split->text.starts_with("ASK")) << split->text;

  // Finish the migration: the next command follows MOVED to the target for good.
  ASSERT_EQ(source.command({"MIGRATE", "127.0.0.1", std::to_string(target.port()), stays_key, "0", "5000"}),
            "OK");
  for (size_t i = 0; i < 3; ++i)
    cluster_->node(i).command({"CLUSTER", "SETSLOT", slot_text, "NODE", target_id});
  EXPECT_TRUE(ok_text(call(io_, client, {"GET", stays_key}), "s"));
  EXPECT_EQ(client.owner_of_slot(slot)->port, target.port());
}

TEST_F(ClusterOwn, AKilledMasterIsReplacedByItsReplicaAndCommandsSucceedAgain) {
  ASSERT_NO_FATAL_FAILURE(start_cluster({.masters = 3, .replicas_per_master = 1}));
  RedisClusterClient client(io_, options_, counters_);
  int hooks = 0;
  client.on_connected([&] { ++hooks; });
  client.start();
  ASSERT_TRUE(run_until(io_, [&] { return client.connected(); }));
  ASSERT_EQ(client.primaries(), 3u);
  const uint16_t victim = cluster_->node(0).port();
  const std::string key = key_on(client, victim, "failover:");
  const std::string other = key_on(client, cluster_->node(1).port(), "failover-other:");
  ASSERT_TRUE(ok_text(call(io_, client, {"SET", key, "v0"}), "OK"));
  run_for(io_, 300ms);  // let the replica copy it
  const int hooks_before = hooks;

  cluster_->kill(0);
  const auto killed_at = Clock::now();
  // Write the key every 50 ms until a write succeeds on the new master.
  std::optional<Clock::duration> recovered;
  int attempts = 0;
  std::map<SyncStatus, int> failures;
  bool in_flight = false;
  run_until(
      io_,
      [&] {
        if (recovered) return true;
        if (!in_flight) {
          in_flight = true;
          ++attempts;
          const std::array<std::string_view, 3> args{"SET", key, "v1"};
          client.command(args, [&](SyncStatus status, const redisReply*) {
            in_flight = false;
            if (status == SyncStatus::kOk) {
              recovered = Clock::now() - killed_at;
            } else {
              ++failures[status];
            }
          });
        }
        return false;
      },
      30000ms);
  ASSERT_TRUE(recovered.has_value()) << "no write succeeded within 30 s of the kill";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*recovered).count();
  std::printf(
      "[ measure  ] master SIGKILLed -> first successful write on its slot: %lld ms (%d attempts, "
      "%d timeouts, %d errors, %d disconnected)\n",
      static_cast<long long>(ms), attempts, failures[SyncStatus::kTimeout], failures[SyncStatus::kError],
      failures[SyncStatus::kDisconnected]);
  EXPECT_LT(ms, 10000) << "node timeout 1 s + election: a few seconds";
  const auto owner = client.owner_of_slot(redis_key_slot(key));
  ASSERT_TRUE(owner.has_value());
  EXPECT_NE(owner->port, victim);
  EXPECT_EQ(owner->port, cluster_->master_of_slot(redis_key_slot(key)));
  EXPECT_GT(hooks, hooks_before) << "the new map runs the hook";
  EXPECT_TRUE(ok_text(call(io_, client, {"GET", key}), "v1"));
  EXPECT_TRUE(ok_text(call(io_, client, {"SET", other, "o"}), "OK"));
  ASSERT_EQ(client.primaries(), 3u);

  // The old master comes back as a replica: commands keep going to the masters only.
  ASSERT_TRUE(cluster_->restart(0));
  ASSERT_TRUE(cluster_->wait_state_ok());
  run_for(io_, 300ms);
  for (int i = 0; i < 50; ++i) {
    const std::string k = "after-restart:" + std::to_string(i);
    EXPECT_TRUE(ok_text(call(io_, client, {"SET", k, "x"}), "OK")) << k;
  }
  for (size_t i = 0; i < client.primaries(); ++i) {
    const auto answer = std::make_shared<std::optional<std::string>>();
    const std::array<std::string_view, 1> role{"ROLE"};
    client.command_on_primary(i, role, [answer](SyncStatus status, const redisReply* reply) {
      *answer = status == SyncStatus::kOk && reply->elements > 0
                    ? std::string(reply_string(reply->element[0]))
                    : "";
    });
    ASSERT_TRUE(run_until(io_, [&] { return answer->has_value(); }));
    EXPECT_EQ(**answer, "master") << "primary " << i;
  }
}

TEST_F(ClusterOwn, SubscriberHearsOtherNodesAndMovesWhenItsNodeDies) {
  ASSERT_NO_FATAL_FAILURE(start_cluster({.masters = 3}));
  RedisClusterClient client(io_, options_, counters_);
  std::vector<std::string> messages;
  int subscriptions = 0;
  client.subscribe("rtce:{c1}:events", [&](std::string_view payload) {
    if (payload.empty()) {
      ++subscriptions;
    } else {
      messages.emplace_back(payload);
    }
  });
  client.start();
  ASSERT_TRUE(run_until(io_, [&] { return client.connected() && client.subscriber_node().has_value(); }));
  // Publishes on `node` every 100 ms until the subscriber has `count` messages: the
  // subscription may still be on its way, and cluster pub/sub crosses the bus.
  const auto publish_until = [&](size_t node, const std::string& payload, size_t count) {
    auto next = Clock::now();
    return run_until(
        io_,
        [&] {
          if (messages.size() >= count) return true;
          if (Clock::now() >= next) {
            cluster_->node(node).command({"PUBLISH", "rtce:{c1}:events", payload});
            next = Clock::now() + 100ms;
          }
          return false;
        },
        5000ms);
  };
  const auto first = *client.subscriber_node();
  const size_t first_index = cluster_->index_of_port(first.port);
  ASSERT_LT(first_index, 3u);

  // PUBLISH on another node reaches the subscriber through the cluster bus.
  ASSERT_TRUE(publish_until((first_index + 1) % 3, "up 1", 1)) << "publish on another node";
  EXPECT_EQ(messages[0], "up 1");
  EXPECT_EQ(subscriptions, 1) << "the subscription announces itself with an empty payload";

  // Its node dies: the subscription moves to another node.
  cluster_->kill(first_index);
  const auto killed_at = Clock::now();
  ASSERT_TRUE(run_until(
      io_, [&] { return client.subscriber_node()->port != first.port; }, 5000ms));
  const auto second = *client.subscriber_node();
  const size_t second_index = cluster_->index_of_port(second.port);
  ASSERT_LT(second_index, 3u);
  const size_t live_publisher = 3 - first_index - second_index;  // the third master
  ASSERT_TRUE(publish_until(live_publisher, "down 1", 2)) << "publish after the move";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at).count();
  std::printf("[ measure  ] subscriber node SIGKILLed -> a message published elsewhere received: %lld ms\n",
              static_cast<long long>(ms));
  EXPECT_EQ(messages[1], "down 1");
  EXPECT_EQ(subscriptions, 2) << "the new subscription announces itself too (the registry re-lists on it)";
}

TEST_F(ClusterOwn, TlsAndAPasswordOnEveryNodeConnection) {
  if (access(kOpensslPath, X_OK) != 0)
    GTEST_FAIL() << "needs " << kOpensslPath << " (scripts/install-deps.sh)";
  TestCertificates certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  ASSERT_NO_FATAL_FAILURE(start_cluster({.masters = 3, .password = "s3cret", .tls = &certs}));
  EXPECT_TRUE(options_.tls.enabled) << cluster_->url();
  options_.tls.ca_file = certs.ca_cert();
  options_.password = "s3cret";
  RedisClusterClient client(io_, options_, counters_);
  client.start();
  int ok = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string key = "tls:" + std::to_string(i);
    const std::array<std::string_view, 3> args{"SET", key, "v"};
    client.command(args, [&](SyncStatus status, const redisReply*) { ok += status == SyncStatus::kOk; });
  }
  ASSERT_TRUE(run_until(
      io_, [&] { return ok == 300; }, 10000ms))
      << ok;
  EXPECT_EQ(client.primaries(), 3u);
  EXPECT_EQ(counters_.tls_errors.get(), 0u);
  // A redirect over TLS: the slot moves, the next command follows MOVED.
  const std::string key = key_on(client, cluster_->node(0).port(), "tlsmoved:");
  ASSERT_TRUE(ok_text(call(io_, client, {"SET", key, "x"}), "OK"));
  ASSERT_TRUE(cluster_->migrate_slots(redis_key_slot(key), redis_key_slot(key), 2));
  EXPECT_TRUE(ok_text(call(io_, client, {"GET", key}), "x"));
  EXPECT_GE(counters_.redirects.get(), 1u);
}

}  // namespace
}  // namespace rtce::test
