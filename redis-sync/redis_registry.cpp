// redis_registry.cpp — the registry's Lua scripts and the watch loop.
#include "redis_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <charconv>
#include <string>

namespace rtce {

namespace asio = boost::asio;

namespace {

// Scripts run atomically and touch only keys of one cluster (one hash tag, one slot).
// KEYS[1] endpoint hash, KEYS[2] id set; ARGV: id address capacity load draining ttl_ms channel signaling
constexpr std::string_view kRegisterScript = R"lua(
redis.call('HSET', KEYS[1], 'address', ARGV[2], 'capacity', ARGV[3], 'load', ARGV[4], 'draining', ARGV[5],
           'signaling', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[7], 'up ' .. ARGV[1])
return 1
)lua";

// KEYS[1] the key's call counter; ARGV: max_calls expires_at (unix s). 1 counted, 0 exhausted.
constexpr std::string_view kTakeKeyCallScript = R"lua(
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIREAT', KEYS[1], ARGV[2]) end
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
)lua";

// KEYS[1] a provider's call; ARGV[1] the call id claiming it, ARGV[2] the TTL in seconds.
// The holder's call id: ARGV[1] when this took it.
constexpr std::string_view kClaimProviderCallScript = R"lua(
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then return ARGV[1] end
return redis.call('GET', KEYS[1]) or ARGV[1]
)lua";

// KEYS[1] the key's call counter. Never below zero, never revives an expired counter.
constexpr std::string_view kGiveBackKeyCallScript = R"lua(
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then redis.call('DECR', KEYS[1]) end
return 1
)lua";

// KEYS[1] endpoint hash; ARGV: id load draining ttl_ms channel. 0 when the record is gone.
constexpr std::string_view kHeartbeatScript = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local was = redis.call('HGET', KEYS[1], 'draining')
redis.call('HSET', KEYS[1], 'load', ARGV[2], 'draining', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if was ~= ARGV[3] then redis.call('PUBLISH', ARGV[5], 'change ' .. ARGV[1]) end
return 1
)lua";

// KEYS[1] endpoint hash, KEYS[2] id set; ARGV: id channel
constexpr std::string_view kDeregisterScript = R"lua(
local n = redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], 'down ' .. ARGV[1])
return n
)lua";

// KEYS[1] id set; ARGV[1] endpoint key prefix. Drops the ids whose hash expired.
constexpr std::string_view kListScript = R"lua(
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local h = redis.call('HMGET', ARGV[1] .. id, 'address', 'capacity', 'load', 'draining', 'signaling')
  if h[1] then
    out[#out + 1] = {id, h[1], h[2] or '0', h[3] or '0', h[4] or '0', h[5] or ''}
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return out
)lua";

// KEYS[1] id allocation hash; ARGV: identity count first_id last_id. Returns the base.
constexpr std::string_view kAllocateScript = R"lua(
local want = tonumber(ARGV[2])
local field = 'pod:' .. ARGV[1]
local have = redis.call('HGET', KEYS[1], field)
if have then
  local base, n = string.match(have, '^(%d+):(%d+)$')
  if base and tonumber(n) >= want then return tonumber(base) end
end
local base = tonumber(redis.call('HGET', KEYS[1], 'next') or ARGV[3])
if base + want - 1 > tonumber(ARGV[4]) then return redis.error_reply('endpoint ids exhausted') end
redis.call('HSET', KEYS[1], 'next', base + want, field, base .. ':' .. want)
return base
)lua";

// KEYS[1] ingress set; ARGV: member ttl_ms. Scores are expiry times in Redis's clock (ms).
constexpr std::string_view kPublishIngressScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
)lua";

// KEYS[1] ingress set. The members not yet expired.
constexpr std::string_view kListIngressScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
)lua";

template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<EndpointRecord> parse_record(const redisReply* row) {
  if (row == nullptr || row->type != REDIS_REPLY_ARRAY || row->elements != 6) return std::nullopt;
  EndpointRecord record;
  const auto id = parse_endpoint_id(reply_string(row->element[0]));
  const auto address = SocketAddress::parse(reply_string(row->element[1]));
  const auto capacity = parse_number<uint32_t>(reply_string(row->element[2]));
  const auto load = parse_number<uint32_t>(reply_string(row->element[3]));
  if (!id || !address || !capacity || !load) return std::nullopt;
  record.id = *id;
  record.address = *address;
  record.capacity = *capacity;
  record.load = *load;
  record.draining = reply_string(row->element[4]) == "1";
  // A record without one (a relay's view of an older transceiver) routes no calls.
  if (SocketAddress::parse(reply_string(row->element[5])))
    record.signaling = std::string(reply_string(row->element[5]));
  return record;
}

RedisClient::ReplyHandler done_on_integer_one(DoneCallback done) {
  if (!done) return {};
  return [done = std::move(done)](SyncStatus status, const redisReply* reply) {
    done(status == SyncStatus::kOk && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1);
  };
}

}  // namespace

RedisRegistry::RedisRegistry(asio::io_context& io, RedisOptions redis, RegistryOptions options)
    : io_(io),
      redis_(std::move(redis)),
      options_(options),
      schema_(options.cluster),
      commands_(make_redis_client(io, redis_, counters_)),
      diff_(std::chrono::duration_cast<std::chrono::nanoseconds>(options.endpoint_ttl).count()),
      relist_timer_(io) {
  commands_->start();
}

RedisRegistry::~RedisRegistry() {
  life_.reset();
  relist_timer_.cancel();
}

void RedisRegistry::register_endpoint(const EndpointRecord& record, DoneCallback done) {
  const std::string key = schema_.endpoint_key(record.id);
  const std::string set = schema_.endpoint_set_key();
  const std::string id = std::to_string(record.id);
  const std::string address = record.address.to_string();
  const std::string capacity = std::to_string(record.capacity);
  const std::string load = std::to_string(record.load);
  const std::string ttl = std::to_string(options_.endpoint_ttl.count());
  const std::string channel = schema_.events_channel();
  const std::array<std::string_view, 13> args{
      "EVAL",  kRegisterScript, "2", key, set, id, address, capacity, load, record.draining ? "1" : "0", ttl,
      channel, record.signaling};
  commands_->command(args, done_on_integer_one(std::move(done)));
}

void RedisRegistry::take_key_call(std::string_view principal, uint32_t max_calls, int64_t expires_at,
                                  std::function<void(std::optional<bool>)> done) {
  const std::string key = schema_.key_calls_key(principal);
  const std::string max = std::to_string(max_calls);
  const std::string expires = std::to_string(expires_at);
  const std::array<std::string_view, 6> args{"EVAL", kTakeKeyCallScript, "1", key, max, expires};
  auto handler = [done](SyncStatus status, const redisReply* reply) {
    if (status != SyncStatus::kOk || reply->type != REDIS_REPLY_INTEGER) return done(std::nullopt);
    done(reply->integer == 1);
  };
  if (!commands_->command(args, handler)) done(std::nullopt);
}

void RedisRegistry::give_back_key_call(std::string_view principal) {
  const std::string key = schema_.key_calls_key(principal);
  const std::array<std::string_view, 4> args{"EVAL", kGiveBackKeyCallScript, "1", key};
  commands_->command(args, {});
}

void RedisRegistry::claim_provider_call(std::string_view provider, std::string_view provider_call_id,
                                        std::string_view call_id, int64_t ttl_s,
                                        std::function<void(std::optional<std::string>)> done) {
  const std::string key = schema_.provider_call_key(provider, provider_call_id);
  const std::string ttl = std::to_string(ttl_s);
  const std::array<std::string_view, 6> args{"EVAL", kClaimProviderCallScript, "1", key, call_id, ttl};
  auto handler = [done](SyncStatus status, const redisReply* reply) {
    if (status != SyncStatus::kOk || reply->type != REDIS_REPLY_STRING) return done(std::nullopt);
    done(std::string(reply->str, reply->len));
  };
  if (!commands_->command(args, handler)) done(std::nullopt);
}

void RedisRegistry::heartbeat(EndpointId id, uint32_t load, bool draining, DoneCallback done) {
  const std::string key = schema_.endpoint_key(id);
  const std::string id_text = std::to_string(id);
  const std::string load_text = std::to_string(load);
  const std::string ttl = std::to_string(options_.endpoint_ttl.count());
  const std::string channel = schema_.events_channel();
  const std::array<std::string_view, 9> args{"EVAL",    kHeartbeatScript,     "1", key,    id_text,
                                             load_text, draining ? "1" : "0", ttl, channel};
  commands_->command(args, done_on_integer_one(std::move(done)));
}

void RedisRegistry::deregister(EndpointId id, DoneCallback done) {
  const std::string key = schema_.endpoint_key(id);
  const std::string set = schema_.endpoint_set_key();
  const std::string id_text = std::to_string(id);
  const std::string channel = schema_.events_channel();
  const std::array<std::string_view, 7> args{"EVAL", kDeregisterScript, "2", key, set, id_text, channel};
  RedisClient::ReplyHandler handler;
  if (done)
    handler = [done = std::move(done)](SyncStatus status, const redisReply*) {
      done(status == SyncStatus::kOk);
    };
  commands_->command(args, std::move(handler));
}

void RedisRegistry::list(ListCallback done) {
  const std::string set = schema_.endpoint_set_key();
  const std::string prefix = schema_.endpoint_key_prefix();
  const std::array<std::string_view, 5> args{"EVAL", kListScript, "1", set, prefix};
  commands_->command(args, [done = std::move(done)](SyncStatus status, const redisReply* reply) {
    if (status != SyncStatus::kOk || reply->type != REDIS_REPLY_ARRAY) {
      done(std::nullopt);
      return;
    }
    std::vector<EndpointRecord> records;
    records.reserve(reply->elements);
    for (size_t i = 0; i < reply->elements; ++i) {
      if (auto record = parse_record(reply->element[i])) records.push_back(*record);
    }
    std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    done(std::move(records));
  });
}

void RedisRegistry::allocate_endpoint_ids(std::string_view pod_identity, uint16_t count,
                                          AllocateCallback done) {
  if (count == 0) {
    asio::post(io_, [done = std::move(done)] { done(std::nullopt); });
    return;
  }
  const std::string key = schema_.endpoint_ids_key();
  const std::string count_text = std::to_string(count);
  const std::array<std::string_view, 8> args{"EVAL",       kAllocateScript, "1", key,
                                             pod_identity, count_text,      "1", "65535"};
  commands_->command(args, [done = std::move(done)](SyncStatus status, const redisReply* reply) {
    if (status != SyncStatus::kOk || reply->type != REDIS_REPLY_INTEGER || reply->integer < 1 ||
        reply->integer > 65535) {
      done(std::nullopt);
      return;
    }
    done(static_cast<EndpointId>(reply->integer));
  });
}

void RedisRegistry::publish_ingress(const SocketAddress& address, DoneCallback done) {
  const std::string key = schema_.ingress_key();
  const std::string member = address.to_string();
  const std::string ttl = std::to_string(options_.endpoint_ttl.count());
  const std::array<std::string_view, 6> args{"EVAL", kPublishIngressScript, "1", key, member, ttl};
  commands_->command(args, done_on_integer_one(std::move(done)));
}

void RedisRegistry::withdraw_ingress(const SocketAddress& address, DoneCallback done) {
  const std::string key = schema_.ingress_key();
  const std::string member = address.to_string();
  const std::array<std::string_view, 3> args{"ZREM", key, member};
  RedisClient::ReplyHandler handler;
  if (done)
    handler = [done = std::move(done)](SyncStatus status, const redisReply*) {
      done(status == SyncStatus::kOk);
    };
  commands_->command(args, std::move(handler));
}

void RedisRegistry::list_ingress(uint8_t cluster, IngressCallback done) {
  const std::string key = RedisSchema(cluster).ingress_key();
  const std::array<std::string_view, 4> args{"EVAL", kListIngressScript, "1", key};
  commands_->command(args, [done = std::move(done)](SyncStatus status, const redisReply* reply) {
    if (status != SyncStatus::kOk || reply->type != REDIS_REPLY_ARRAY) {
      done(std::nullopt);
      return;
    }
    std::vector<std::string> members;
    members.reserve(reply->elements);
    for (size_t i = 0; i < reply->elements; ++i) members.emplace_back(reply_string(reply->element[i]));
    done(std::move(members));
  });
}

void RedisRegistry::watch(WatchCallback on_change) {
  on_change_ = std::move(on_change);
  diff_.clear();
  if (!events_) {
    events_ = make_redis_client(io_, redis_, counters_);
    // Any message, and every (re)subscription (messages may have been lost), re-lists.
    events_->subscribe(schema_.events_channel(), [this](std::string_view) { relist(); });
    events_->start();
    arm_relist_timer();
  }
  relist();
}

void RedisRegistry::arm_relist_timer() {
  relist_timer_.expires_after(options_.relist_interval);
  relist_timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const boost::system::error_code& ec) {
    if (ec || life.expired()) return;
    relist();
    arm_relist_timer();
  });
}

void RedisRegistry::relist() {
  if (relist_in_flight_) {
    relist_again_ = true;  // coalesce a burst of notifications into one more re-list
    return;
  }
  relist_in_flight_ = true;
  const Nanos asked_at = monotonic_now();
  list([this, asked_at,
        life = std::weak_ptr<int>(life_)](std::optional<std::vector<EndpointRecord>> records) {
    if (life.expired()) return;
    relist_in_flight_ = false;
    const Nanos now = monotonic_now();
    const Millis stall =
        options_.stall_threshold.count() > 0 ? options_.stall_threshold : options_.endpoint_ttl / 3;
    // Unreachable store: keep what we know rather than report every endpoint removed. A
    // failed or stalled answer also starts the outage grace for the snapshots that follow.
    if (!records || now - asked_at > std::chrono::duration_cast<std::chrono::nanoseconds>(stall).count())
      diff_.store_unavailable();
    if (records && on_change_) {
      diff_.apply(*records, now, [this](const RegistryEvent& event) { on_change_(event); });
      if (diff_.held_removals() > 0 && !reported_held_) {
        reported_held_ = true;
        spdlog::warn(
            "registry: the store answers again after an outage; {} endpoint(s) missing from it are kept for "
            "{} ms so that their transceivers can register again",
            diff_.held_removals(), (diff_.holding_removals_until() - now) / 1'000'000);
      } else if (diff_.held_removals() == 0) {
        reported_held_ = false;
      }
    }
    if (on_listed_) on_listed_(records.has_value());
    if (relist_again_) {
      relist_again_ = false;
      relist();
    }
  });
}

}  // namespace rtce
