// redis_sentinel_client.cpp — finding the master through the sentinels and following it.
#include "redis_sentinel_client.h"

#include <spdlog/spdlog.h>

#include <array>
#include <charconv>

namespace rtce {

RedisSentinelClient::RedisSentinelClient(boost::asio::io_context& io, RedisOptions options,
                                         SyncCounters& counters)
    : options_(std::move(options)), counters_(counters) {
  // Both sentinel connections take the next sentinel of the list on every connect, so a
  // dead sentinel costs one connect timeout, not the group.
  query_ = std::make_unique<RedisConnection>(io, sentinel_options(), sentinel_counters_);
  query_->resolve_with([this](auto answer) { next_sentinel(std::move(answer)); });
  events_ = std::make_unique<RedisConnection>(io, sentinel_options(), sentinel_counters_);
  events_->resolve_with([this](auto answer) { next_sentinel(std::move(answer)); });
  events_->subscribe("+switch-master", [this](std::string_view payload) { on_sentinel_event(payload); });

  data_ = std::make_unique<RedisConnection>(io, options_.for_node(options_.nodes.front()), counters_);
  data_->resolve_with([this](auto answer) { ask_for_master(std::move(answer)); });
  // A sentinel's answer can be stale (it has not seen the failover yet, or it is the old
  // master back as a replica): only a node that says it is the master is used.
  data_->verify_with({"ROLE"}, [](const redisReply* reply) {
    return reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
           reply_string(reply->element[0]) == "master";
  });
}

RedisSentinelClient::~RedisSentinelClient() { life_.reset(); }

void RedisSentinelClient::start() {
  query_->start();
  events_->start();
  data_->start();
}

RedisOptions RedisSentinelClient::sentinel_options() const {
  RedisOptions options = options_.for_node(options_.nodes.front());
  options.username = options_.sentinel_username;
  options.password = options_.sentinel_password;
  options.password_file = options_.sentinel_password_file;  // re-read at every connect, as the data nodes' is
  return options;
}

void RedisSentinelClient::next_sentinel(std::function<void(std::optional<RedisNode>)> answer) {
  const RedisNode node = options_.nodes[next_sentinel_ % options_.nodes.size()];
  ++next_sentinel_;
  answer(node);
}

void RedisSentinelClient::ask_for_master(std::function<void(std::optional<RedisNode>)> answer) {
  const std::array<std::string_view, 3> args{"SENTINEL", "get-master-addr-by-name", options_.master_name};
  query_->command(args, [this, answer = std::move(answer), life = std::weak_ptr<int>(life_)](
                            SyncStatus status, const redisReply* reply) {
    if (life.expired()) return;
    unsigned port = 0;
    if (status == SyncStatus::kOk && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2) {
      const std::string_view host = reply_string(reply->element[0]);
      const std::string_view port_text = reply_string(reply->element[1]);
      const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
      if (!host.empty() && ec == std::errc{} && end == port_text.data() + port_text.size() && port > 0 &&
          port < 65536) {
        RedisNode master{std::string(host), static_cast<uint16_t>(port)};
        if (master_ && *master_ != master) {
          counters_.master_changes.add();
          spdlog::warn("redis: sentinel names a new master for '{}': {} (was {})", options_.master_name,
                       master.to_string(), master_->to_string());
        }
        master_ = master;
        answer(std::move(master));
        return;
      }
    }
    // This sentinel does not know the group (or did not answer): ask the next one next time.
    if (status == SyncStatus::kOk) query_->reconnect();
    answer(std::nullopt);
  });
}

void RedisSentinelClient::on_sentinel_event(std::string_view payload) {
  // "<master name> <old ip> <old port> <new ip> <new port>"; empty: (re)subscribed.
  if (payload.empty()) return;
  const auto space = payload.find(' ');
  if (payload.substr(0, space) != options_.master_name) return;
  spdlog::info("redis: sentinel reports +switch-master {}", payload);
  data_->reconnect();
}

}  // namespace rtce
