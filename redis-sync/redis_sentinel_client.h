// redis_sentinel_client.h — the master of a Sentinel-monitored group: every connect asks
// the sentinels (in turn, the next one when one does not answer) for the master's address
// and checks with ROLE that the node found is a master; a `+switch-master` from a sentinel
// moves the connection at once instead of waiting for the old master's timeout.
#pragma once

#include <memory>
#include <optional>

#include "redis_client.h"
#include "redis_connection.h"

namespace rtce {

class RedisSentinelClient final : public RedisClient {
 public:
  // options.nodes: the sentinels; options.master_name: the group.
  RedisSentinelClient(boost::asio::io_context& io, RedisOptions options, SyncCounters& counters);
  ~RedisSentinelClient() override;

  void start() override;
  bool connected() const override { return data_->connected(); }
  size_t pending() const override { return data_->pending(); }
  bool command(std::span<const std::string_view> args, ReplyHandler handler) override {
    return data_->command(args, std::move(handler));
  }
  size_t send_batch(std::span<const RedisBatchCommand> commands) override {
    return data_->send_batch(commands);
  }
  void on_connected(std::function<void()> hook) override { data_->on_connected(std::move(hook)); }
  void subscribe(std::string channel, MessageHandler on_message) override {
    data_->subscribe(std::move(channel), std::move(on_message));
  }
  size_t primaries() const override { return 1; }
  bool command_on_primary(size_t, std::span<const std::string_view> args, ReplyHandler handler) override {
    return data_->command(args, std::move(handler));
  }

  // The master the sentinels named last (tests, logs).
  const std::optional<RedisNode>& master() const { return master_; }

 private:
  RedisOptions sentinel_options() const;
  void ask_for_master(std::function<void(std::optional<RedisNode>)> answer);
  void on_sentinel_event(std::string_view payload);
  void next_sentinel(std::function<void(std::optional<RedisNode>)> answer);

  RedisOptions options_;
  SyncCounters& counters_;
  SyncCounters sentinel_counters_;  // the sentinels' traffic is not the store's
  size_t next_sentinel_ = 0;
  std::optional<RedisNode> master_;
  std::unique_ptr<RedisConnection> query_;   // SENTINEL get-master-addr-by-name
  std::unique_ptr<RedisConnection> events_;  // SUBSCRIBE +switch-master
  std::unique_ptr<RedisConnection> data_;    // the master
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace rtce
