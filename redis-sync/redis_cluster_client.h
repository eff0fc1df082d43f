// redis_cluster_client.h — RedisClient for a Redis Cluster: the slot map (CLUSTER SLOTS),
// one RedisConnection per master, commands routed by their key's slot, MOVED / ASK /
// TRYAGAIN / CLUSTERDOWN followed, a subscriber that moves to another node when its node
// dies, and the map kept fresh (MOVED, a master that cannot be reached, a periodic reload).
// The replies it reads are parsed by redis_protocol.h.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "clock.h"
#include "redis_client.h"
#include "redis_connection.h"
#include "redis_protocol.h"
#include "sync_types.h"

namespace rtce {

class RedisClusterClient final : public RedisClient {
 public:
  // options.nodes: the seeds. Every node connection is options.for_node(node).
  RedisClusterClient(boost::asio::io_context& io, RedisOptions options, SyncCounters& counters);
  ~RedisClusterClient() override;
  RedisClusterClient(const RedisClusterClient&) = delete;
  RedisClusterClient& operator=(const RedisClusterClient&) = delete;

  void start() override;
  // The slot map is known and at least one master's connection is up. Not "every master":
  // during a failover most keys still work, and the registry/flow store read connected()
  // as "worth sending", not as "every slot answers" (a command to a master that is down
  // waits for the new map, bounded by the command timeout).
  bool connected() const override;
  // Commands waiting here (no map yet, or their master's connection is down) plus what
  // every node connection has queued or in flight.
  size_t pending() const override;

  // Routed by routing_key(args) via redis_key_slot; keyless commands go to any connected
  // master. Redirects are followed (at most kMaxRedirects per command).
  bool command(std::span<const std::string_view> args, ReplyHandler handler) override;
  // Each entry is sent on its own with an internal handler that follows redirects (see the
  // .cpp for why not the node's send_batch).
  size_t send_batch(std::span<const RedisBatchCommand> commands) override;
  // Runs after a slot map that changed the masters or the slot owners (the first one
  // included) and whenever a master's connection connects.
  void on_connected(std::function<void()> hook) override { on_connected_ = std::move(hook); }
  // One subscriber connection (cluster pub/sub reaches every node), on a master whose
  // connection is up; when its node fails it moves to another node, and the handler gets
  // the empty payload of the new subscription.
  void subscribe(std::string channel, MessageHandler on_message) override;

  // The masters of the current map, sorted by address (host, then port).
  size_t primaries() const override { return sorted_primaries_.size(); }
  // `args` on master `index` as it is now, no redirect followed (node-local commands:
  // SCAN). An index out of range: false, and the handler gets kDisconnected later.
  bool command_on_primary(size_t index, std::span<const std::string_view> args,
                          ReplyHandler handler) override;

  // Introspection for tests and metrics.
  bool map_known() const { return map_known_; }
  // The master the map says owns `slot`, nullopt when unknown.
  std::optional<RedisNode> owner_of_slot(uint16_t slot) const;
  uint64_t map_loads() const { return map_loads_; }
  // The node the subscriber connection is on (or last tried), nullopt without one.
  std::optional<RedisNode> subscriber_node() const;

  static constexpr int kMaxRedirects = 5;

 private:
  struct Node {
    RedisNode address;
    std::unique_ptr<RedisConnection> connection;
    bool primary = false;  // a master in the last map (a MOVED target counts until the next map)
    Nanos down_since = 0;  // when its connection was last seen down (0: up, or never checked)
  };
  // A command as this client keeps it until its final reply: the RESP text (resent on a
  // redirect) and the caller's handler (empty for a send_batch entry).
  struct Request {
    std::string resp;
    ReplyHandler handler;
    Nanos deadline = 0;    // waiting here: fails kTimeout after it
    int32_t slot = -1;     // -1: keyless
    uint8_t attempts = 0;  // redirects and retries so far
  };

  Node* find_node(const RedisNode& address) const;
  Node& ensure_node(const RedisNode& address);
  std::unique_ptr<RedisConnection> make_connection(const RedisNode& address);
  void retire(std::unique_ptr<RedisConnection> connection);
  Node* target_of(int32_t slot) const;
  Node* any_connected_primary() const;

  bool accept_one(ReplyHandler& handler);
  void dispatch(Request&& request);
  void send_to(Node& node, Request&& request, bool asking);
  void on_reply(Request&& request, const RedisNode& from, SyncStatus status, const redisReply* reply);
  void retry_later(Request&& request);
  void flush_waiting();
  void expire_waiting(Nanos now);
  void fail_later(ReplyHandler handler, SyncStatus status);

  void request_refresh();
  void start_refresh();
  void apply_map(std::vector<RedisSlotRange> ranges);
  RedisConnection& probe();
  std::vector<RedisNode> candidates() const;

  void ensure_subscriber();
  void resolve_subscriber(std::function<void(std::optional<RedisNode>)> answer);

  void arm_tick();
  void tick();
  void node_connected(RedisConnection* connection);

  boost::asio::io_context& io_;
  RedisOptions options_;
  SyncCounters& counters_;
  bool started_ = false;

  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Node*> sorted_primaries_;
  std::array<uint16_t, kRedisClusterSlots> slots_{};  // index into nodes_, kNoNode when unknown
  std::vector<RedisNode> known_nodes_;                // masters then replicas of the last map
  bool map_known_ = false;
  uint64_t map_loads_ = 0;
  size_t rotation_ = 0;  // spreads keyless commands and map reads over the masters

  std::deque<Request> waiting_;
  size_t retrying_ = 0;    // requests on a TRYAGAIN / CLUSTERDOWN retry timer
  std::string send_text_;  // reused: the text args_scratch_ points into
  std::vector<std::string_view> args_scratch_;

  // Slot map reads: at most one in flight, at least kMinRefreshGap apart.
  bool refresh_in_flight_ = false;
  bool refresh_again_ = false;
  bool refresh_timer_armed_ = false;
  Nanos last_refresh_ = 0;
  std::unique_ptr<RedisConnection> probe_;  // reads the map when no master is connected
  size_t probe_rotation_ = 0;

  std::vector<std::unique_ptr<RedisConnection>> retired_;  // kept until their pending drain

  std::string channel_;
  MessageHandler on_message_;
  std::unique_ptr<RedisConnection> subscriber_;
  std::optional<RedisNode> subscriber_node_;
  size_t subscriber_rotation_ = 0;

  std::function<void()> on_connected_;
  boost::asio::steady_timer tick_timer_;
  boost::asio::steady_timer refresh_timer_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace rtce
