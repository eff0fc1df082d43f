// redis_connection.h — one connection to one Redis node on a Boost.Asio io_context: TCP,
// or TLS over it (Asio's OpenSSL stream), with hiredis's reply parser (redisReader) and
// our own RESP encoding. Debian's hiredis 0.14 has no TLS, so its async context is not
// used. It owns what every Redis client of rtcedge needs: a bounded queue while
// disconnected, per-command timeouts, reconnect with exponential backoff, AUTH with a
// password file read at every connect, and the SyncCounters.
#pragma once

#include <hiredis/hiredis.h>

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

#include "clock.h"
#include "redis_client.h"
#include "sync_types.h"

namespace rtce {

class RedisConnection final : public RedisClient {
 public:
  RedisConnection(boost::asio::io_context& io, RedisOptions options, SyncCounters& counters);
  ~RedisConnection() override;
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  void start() override;
  bool connected() const override { return connected_; }
  size_t pending() const override { return queued_.size() + inflight_commands_; }

  // Sends now when connected (written with the other commands of this turn in one write),
  // queues while connecting. false when dropped; the handler then gets kDropped later.
  bool command(std::span<const std::string_view> args, ReplyHandler handler) override;
  // The write path of put_many: complete RESP commands (views into one buffer the caller
  // encoded), without reply handlers. Connected, the lot shares one deadline and one
  // in-flight entry; otherwise they queue one by one as command() would. Returns how many
  // were accepted; the rest were dropped (counted) because the pending bound was reached.
  size_t send_batch(std::span<const RedisBatchCommand> commands) override;
  // Runs after every successful connect, after the queued commands were written.
  void on_connected(std::function<void()> hook) override { on_connected_ = std::move(hook); }
  void subscribe(std::string channel, MessageHandler on_message) override;
  size_t primaries() const override { return 1; }
  bool command_on_primary(size_t, std::span<const std::string_view> args, ReplyHandler handler) override {
    return command(args, std::move(handler));
  }

  // Where to connect, asked before every connect (Sentinel: the master the sentinels name
  // now); the answer nullopt retries after the backoff. Without one: options.host:port.
  using NodeResolver = std::function<void(std::function<void(std::optional<RedisNode>)> answer)>;
  void resolve_with(NodeResolver resolver) { resolver_ = std::move(resolver); }
  // A command sent first on every connection (after AUTH), before anything queued; a
  // connection whose reply `accept` refuses is reset (Sentinel: ROLE must say master).
  using ReplyCheck = std::function<bool(const redisReply* reply)>;
  void verify_with(std::vector<std::string> args, ReplyCheck accept);
  // Drops the connection now (what is in flight fails kDisconnected) and connects again
  // after the backoff: a master switch, a node that left the cluster.
  void reconnect();
  // The node of the current (or last) connection.
  const RedisNode& node() const { return node_; }

 private:
  struct Link;
  struct Inflight {
    Nanos deadline;
    ReplyHandler handler;
    size_t remaining = 1;  // replies still due: a send_batch entry stands for many commands
  };
  struct Queued {
    std::string formatted;
    Nanos deadline;
    ReplyHandler handler;
  };
  // A reply the connection itself asked for (AUTH, the verify command, SUBSCRIBE): they are
  // written first on every link, so their replies come before any command's.
  using PreludeHandler = std::function<void(const redisReply* reply)>;

  void connect();
  void connect_to(const RedisNode& node);
  void on_transport_ready(const std::shared_ptr<Link>& link);
  void become_connected();
  void fail_link(const std::shared_ptr<Link>& link, std::string_view what, const std::string& why,
                 bool tls_error = false);
  void reset_connection();
  void schedule_reconnect();
  void tick();
  void arm_tick();
  void start_read(const std::shared_ptr<Link>& link);
  void on_reply(redisReply* reply);
  void complete(const redisReply* reply);
  void write_prelude(std::span<const std::string_view> args, PreludeHandler handler);
  void append_command(std::span<const std::string_view> args);
  void flush_soon();
  void flush();
  void send_formatted(Queued&& queued);
  void fail_later(ReplyHandler handler, SyncStatus status);
  void fail_inflight(SyncStatus status, RelaxedCounter& counter);

  boost::asio::io_context& io_;
  RedisOptions options_;
  SyncCounters& counters_;
  std::shared_ptr<Link> link_;
  RedisNode node_;
  NodeResolver resolver_;
  std::vector<std::string> verify_args_;
  ReplyCheck verify_;
  bool started_ = false;
  bool connected_ = false;
  bool ever_connected_ = false;
  bool stopping_ = false;
  bool resolving_ = false;
  bool flush_posted_ = false;
  std::string last_failure_;  // logged once per distinct failure, not on every retry
  Nanos connect_started_ = 0;
  Millis backoff_{0};
  std::deque<PreludeHandler> prelude_;
  std::deque<Inflight> inflight_;
  size_t inflight_commands_ = 0;  // the sum of inflight_[i].remaining
  std::deque<Queued> queued_;
  std::function<void()> on_connected_;
  std::string channel_;
  MessageHandler on_message_;
  std::string out_;  // encoded commands not yet handed to the socket
  boost::asio::steady_timer tick_timer_;
  boost::asio::steady_timer reconnect_timer_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  // handlers hold a weak_ptr to it
};

}  // namespace rtce
