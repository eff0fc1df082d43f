// redis_flow_store.h — FlowStore on Redis: one string key per flow holding its record
// (format_flow_record), with a PX TTL; restore() walks the cluster's flow keys with SCAN and reads each
// page with one MGET, the MGETs pipelined behind the SCANs.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flow_store.h"
#include "redis_connection.h"
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
  void scan_page(std::shared_ptr<Restore> restore);

  boost::asio::io_context& io_;
  FlowStoreOptions options_;
  RedisSchema schema_;
  SyncCounters counters_;
  std::unique_ptr<RedisConnection> connection_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
  // put_many's encoding buffers, reused across calls.
  std::string batch_;
  std::vector<size_t> batch_ends_;
  std::vector<std::string_view> batch_commands_;
  std::string key_scratch_;
  std::string value_scratch_;
};

}  // namespace rtce
