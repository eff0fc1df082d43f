// redis_flow_store.cpp — flow keys as Redis strings; put_many encodes its batch in one
// buffer; restore by SCAN on every primary + MGET.
#include "redis_flow_store.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <string>
#include <vector>

namespace rtce {

namespace asio = boost::asio;

struct RedisFlowStore::Restore {
  BatchCallback on_batch;
  DoneCallback done;
  size_t reads_in_flight = 0;
  size_t scans_running = 0;  // primaries whose SCAN has not reached cursor 0
  bool scan_finished = false;
  bool failed = false;
  bool reported = false;

  void finish_if_done() {
    if (reported) return;
    if (failed || (scan_finished && reads_in_flight == 0)) {
      reported = true;
      done(!failed);
    }
  }
};

RedisFlowStore::RedisFlowStore(asio::io_context& io, RedisOptions redis, FlowStoreOptions options)
    : io_(io),
      options_(options),
      schema_(options.cluster),
      cluster_(redis.topology == RedisTopology::kCluster),
      connection_(make_redis_client(io, std::move(redis), counters_)) {
  connection_->start();
}

RedisFlowStore::~RedisFlowStore() { life_.reset(); }

void RedisFlowStore::put(const rtce_flow_key& key, FlowRecord record, Millis ttl, DoneCallback done) {
  const std::string redis_key = schema_.flow_key(key);
  const std::string value = format_flow_record(record);
  const std::string ttl_text = std::to_string(ttl.count());
  const std::array<std::string_view, 5> args{"SET", redis_key, value, "PX", ttl_text};
  RedisClient::ReplyHandler handler;
  if (done)
    handler = [done = std::move(done)](SyncStatus status, const redisReply*) {
      done(status == SyncStatus::kOk);
    };
  connection_->command(args, std::move(handler));
}

void RedisFlowStore::put_many(std::span<const FlowEntry> flows, Millis ttl) {
  // The batch is RESP-encoded here into one reused buffer (the constant parts once, the key
  // straight after its length) and handed over as one in-flight entry; hiredis appends each
  // command to its output buffer and writes the lot on the next writable event.
  if (flows.empty()) return;
  char number[24];
  const auto append_number = [&](std::string& out, uint64_t value) {
    out.append(number, std::to_chars(number, number + sizeof number, value).ptr);
  };
  std::string tail = "$2\r\nPX\r\n$";
  const std::string ttl_text = std::to_string(ttl.count());
  append_number(tail, ttl_text.size());
  tail += "\r\n" + ttl_text + "\r\n";

  batch_.clear();
  batch_ends_.clear();
  batch_key_offsets_.clear();
  for (const auto& flow : flows) {
    schema_.format_flow_key(flow.key, key_scratch_);
    batch_ += "*5\r\n$3\r\nSET\r\n$";
    append_number(batch_, key_scratch_.size());
    batch_ += "\r\n";
    batch_key_offsets_.push_back(batch_.size());
    batch_ += key_scratch_;
    value_scratch_.clear();
    append_flow_record(flow.record, value_scratch_);
    batch_ += "\r\n$";
    append_number(batch_, value_scratch_.size());
    batch_ += "\r\n";
    batch_ += value_scratch_;
    batch_ += "\r\n";
    batch_ += tail;
    batch_ends_.push_back(batch_.size());
  }
  batch_commands_.clear();
  size_t begin = 0;
  for (size_t i = 0; i < batch_ends_.size(); ++i) {
    const size_t key_at = batch_key_offsets_[i];
    const size_t key_end = batch_.find('\r', key_at);
    batch_commands_.push_back(
        RedisBatchCommand{std::string_view(batch_.data() + begin, batch_ends_[i] - begin),
                          std::string_view(batch_.data() + key_at, key_end - key_at)});
    begin = batch_ends_[i];
  }
  connection_->send_batch(batch_commands_);
}

void RedisFlowStore::refresh(const rtce_flow_key& key, Millis ttl, DoneCallback done) {
  const std::string redis_key = schema_.flow_key(key);
  const std::string ttl_text = std::to_string(ttl.count());
  const std::array<std::string_view, 3> args{"PEXPIRE", redis_key, ttl_text};
  RedisClient::ReplyHandler handler;
  if (done) {
    handler = [done = std::move(done)](SyncStatus status, const redisReply* reply) {
      done(status == SyncStatus::kOk && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1);
    };
  }
  connection_->command(args, std::move(handler));
}

void RedisFlowStore::get(const rtce_flow_key& key, GetCallback done) {
  const std::string redis_key = schema_.flow_key(key);
  const std::array<std::string_view, 2> args{"GET", redis_key};
  connection_->command(args, [done = std::move(done)](SyncStatus status, const redisReply* reply) {
    if (status != SyncStatus::kOk || reply->type != REDIS_REPLY_STRING) {
      done(std::nullopt);
      return;
    }
    done(parse_flow_record(reply_string(reply)));
  });
}

void RedisFlowStore::del(const rtce_flow_key& key, DoneCallback done) {
  const std::string redis_key = schema_.flow_key(key);
  const std::array<std::string_view, 2> args{"DEL", redis_key};
  RedisClient::ReplyHandler handler;
  if (done)
    handler = [done = std::move(done)](SyncStatus status, const redisReply*) {
      done(status == SyncStatus::kOk);
    };
  connection_->command(args, std::move(handler));
}

void RedisFlowStore::restore(BatchCallback on_batch, DoneCallback done) {
  auto state = std::make_shared<Restore>();
  state->on_batch = std::move(on_batch);
  state->done = std::move(done);
  // Each primary is walked by its own SCAN; a cluster whose map is not known yet has no
  // primaries, and a restore then fails (the caller retries on the next connect).
  const size_t primaries = connection_->primaries();
  if (primaries == 0) {
    state->failed = true;
    state->finish_if_done();
    return;
  }
  state->scans_running = primaries;
  for (size_t i = 0; i < primaries; ++i) scan_primary(state, i, "0");
}

void RedisFlowStore::scan_primary(std::shared_ptr<Restore> state, size_t primary, std::string cursor) {
  // Each SCAN reply issues the next SCAN at once and the reads of its keys, so reads
  // overlap the walk.
  const std::string pattern = schema_.flow_pattern();
  const std::string count = std::to_string(options_.restore_page);
  const std::array<std::string_view, 6> args{"SCAN", cursor, "MATCH", pattern, "COUNT", count};
  connection_->command_on_primary(
      primary, args,
      [this, state, primary, life = std::weak_ptr<int>(life_)](SyncStatus status, const redisReply* reply) {
        if (life.expired() || state->reported) return;
        if (status != SyncStatus::kOk || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            reply->element[1]->type != REDIS_REPLY_ARRAY) {
          state->failed = true;
          state->finish_if_done();
          return;
        }
        std::string next(reply_string(reply->element[0]));
        read_page(state, reply->element[1]);
        if (next == "0") {
          if (--state->scans_running == 0) state->scan_finished = true;
          state->finish_if_done();
        } else {
          scan_primary(state, primary, std::move(next));
        }
      });
}

void RedisFlowStore::read_page(const std::shared_ptr<Restore>& state, const redisReply* keys) {
  if (keys->elements == 0) return;
  // One MGET per page; on a cluster one per slot (MGET may not cross slots), which with
  // flow keys spread over every slot is mostly one GET-like read per key, all pipelined.
  std::vector<std::vector<size_t>> groups;
  if (cluster_) {
    std::vector<std::pair<uint16_t, size_t>> by_slot;
    by_slot.reserve(keys->elements);
    for (size_t i = 0; i < keys->elements; ++i)
      by_slot.emplace_back(redis_key_slot(reply_string(keys->element[i])), i);
    std::sort(by_slot.begin(), by_slot.end());
    for (size_t i = 0; i < by_slot.size(); ++i) {
      if (i == 0 || by_slot[i].first != by_slot[i - 1].first) groups.emplace_back();
      groups.back().push_back(by_slot[i].second);
    }
  } else {
    groups.emplace_back(keys->elements);
    for (size_t i = 0; i < keys->elements; ++i) groups.back()[i] = i;
  }
  for (const auto& group : groups) {
    std::vector<std::string_view> mget;
    mget.reserve(group.size() + 1);
    mget.push_back("MGET");
    auto flow_keys = std::make_shared<std::vector<std::optional<rtce_flow_key>>>();
    flow_keys->reserve(group.size());
    for (const size_t i : group) {
      mget.push_back(reply_string(keys->element[i]));
      flow_keys->push_back(schema_.parse_flow_key(reply_string(keys->element[i])));
    }
    ++state->reads_in_flight;
    connection_->command(mget, [state, flow_keys](SyncStatus status, const redisReply* values) {
      --state->reads_in_flight;
      if (state->reported) return;
      if (status != SyncStatus::kOk || values->type != REDIS_REPLY_ARRAY ||
          values->elements != flow_keys->size()) {
        state->failed = true;
        state->finish_if_done();
        return;
      }
      std::vector<FlowEntry> batch;
      batch.reserve(values->elements);
      for (size_t i = 0; i < values->elements; ++i) {
        const auto record = parse_flow_record(reply_string(values->element[i]));
        if (record && (*flow_keys)[i]) batch.push_back(FlowEntry{*(*flow_keys)[i], *record});
      }
      if (!batch.empty()) state->on_batch(batch);
      state->finish_if_done();
    });
  }
}

}  // namespace rtce
