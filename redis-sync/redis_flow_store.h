// redis_flow_store.h — FlowStore on Redis: one string key per flow holding its record
// (format_flow_record), with a PX TTL, every command single-key; restore() walks the flow
// keys with SCAN on every primary (one, or each shard of a Redis Cluster) and reads each page
// with MGET (one per page; per slot on a cluster), pipelined behind the SCANs.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flow_store.h"
#include "redis_client.h"
#include "schema.h"

namespace rtce {

struct FlowStoreOptions {
  uint8_t cluster = 0;
  size_t restore_page = 1000;  // SCAN COUNT and MGET size
};

class RedisFlowStore final : public FlowStore {
 public:
  RedisFlowStore(boost::asio::io_context& io, RedisOptions redis, FlowStoreOptions options);
  ~RedisFlowStore() override;

  void put(const rtce_flow_key& key, FlowRecord record, Millis ttl, DoneCallback done = {}) override;
  void put_many(std::span<const FlowEntry> flows, Millis ttl) override;
  void refresh(const rtce_flow_key& key, Millis ttl, DoneCallback done = {}) override;
  void get(const rtce_flow_key& key, GetCallback done) override;
  void del(const rtce_flow_key& key, DoneCallback done = {}) override;
  void restore(BatchCallback on_batch, DoneCallback done) override;

  bool connected() const override { return connection_->connected(); }
  const SyncCounters& counters() const override { return counters_; }
  size_t pending() const { return connection_->pending(); }
  const RedisSchema& schema() const { return schema_; }

 private:
  struct Restore;
  void scan_primary(std::shared_ptr<Restore> restore, size_t primary, std::string cursor);
  void read_page(const std::shared_ptr<Restore>& restore, const redisReply* keys);

  boost::asio::io_context& io_;
  FlowStoreOptions options_;
  RedisSchema schema_;
  SyncCounters counters_;
  bool cluster_;  // MGET only within a slot
  std::unique_ptr<RedisClient> connection_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
  // put_many's encoding buffers, reused across calls.
  std::string batch_;
  std::vector<size_t> batch_ends_;
  std::vector<size_t> batch_key_offsets_;
  std::vector<RedisBatchCommand> batch_commands_;
  std::string key_scratch_;
  std::string value_scratch_;
};

}  // namespace rtce
