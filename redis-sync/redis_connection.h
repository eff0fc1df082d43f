// redis_connection.h — one hiredis asynchronous connection driven by a Boost.Asio
// io_context (hiredis ships no Asio adapter; ours maps its read/write hooks onto
// stream_descriptor::async_wait). It owns what every Redis client of rtcedge needs and
// hiredis 0.14 lacks: a bounded queue while disconnected, per-command timeouts,
// reconnect with exponential backoff, and the SyncCounters.
#pragma once

#include <hiredis/async.h>
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
#include "sync_types.h"

namespace rtce {

struct RedisOptions {
  std::string host = "127.0.0.1";  // an IP address: a name is resolved with a blocking lookup
  uint16_t port = 6379;
  std::string username;  // ACL user (AUTH user password); empty: the default user
  std::string password;  // AUTH before anything else when set
  Millis connect_timeout{1000};
  Millis command_timeout{1000};  // a command without reply by then fails, and the connection is reset
  Millis backoff_initial{50};
  Millis backoff_max{2000};
  size_t max_pending = 200000;  // queued + in flight; beyond it commands are dropped (counted)

  // "redis://[[user]:password@]host[:port][/db]" (db is ignored: one database).
  static std::optional<RedisOptions> from_url(std::string_view url);
};

class RedisConnection {
 public:
  // reply is non-null only for kOk and kError (an error reply from the server).
  using ReplyHandler = std::function<void(SyncStatus status, const redisReply* reply)>;
  using MessageHandler = std::function<void(std::string_view payload)>;

  RedisConnection(boost::asio::io_context& io, RedisOptions options, SyncCounters& counters);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  void start();
  bool connected() const { return connected_; }
  size_t pending() const { return queued_.size() + inflight_commands_; }

  // Sends now when connected (hiredis buffers, so a burst goes out in one write), queues
  // while connecting. false when dropped; the handler then gets kDropped later.
  bool command(std::span<const std::string_view> args, ReplyHandler handler);
  // The write path of put_many: complete RESP commands (views into one buffer the caller
  // encoded), without reply handlers. Connected, the lot shares one deadline and one
  // in-flight entry; otherwise they queue one by one as command() would. Returns how many
  // were accepted; the rest were dropped (counted) because the pending bound was reached.
  size_t send_batch(std::span<const std::string_view> commands);
  // Runs after every successful connect, after the queued commands were written.
  void on_connected(std::function<void()> hook) { on_connected_ = std::move(hook); }
  // Makes this a subscriber connection: SUBSCRIBE after every connect; the handler gets
  // each message's payload, and an empty payload when the subscription is (re)established.
  void subscribe(std::string channel, MessageHandler on_message);

 private:
  class Adapter;
  struct Inflight {
    uint64_t seq;
    Nanos deadline;
    ReplyHandler handler;
    size_t remaining = 1;  // replies still due: a send_batch entry stands for many commands
  };
  struct Queued {
    std::string formatted;
    Nanos deadline;
    ReplyHandler handler;
  };

  static void on_reply(redisAsyncContext* context, void* reply, void* privdata);
  static void on_subscription(redisAsyncContext* context, void* reply, void* privdata);
  static void on_connect(const redisAsyncContext* context, int status);
  static void on_disconnect(const redisAsyncContext* context, int status);

  void connect();
  void context_freed();
  void reset_connection();
  void schedule_reconnect();
  void tick();
  void arm_tick();
  void complete(uint64_t seq, const redisReply* reply);
  void send_formatted(Queued&& queued);
  void fail_later(ReplyHandler handler, SyncStatus status);
  void fail_inflight(SyncStatus status, RelaxedCounter& counter);

  boost::asio::io_context& io_;
  RedisOptions options_;
  SyncCounters& counters_;
  redisAsyncContext* context_ = nullptr;
  std::shared_ptr<Adapter> adapter_;
  bool started_ = false;
  bool connected_ = false;
  bool ever_connected_ = false;
  bool stopping_ = false;
  Nanos connect_started_ = 0;
  Millis backoff_{0};
  uint64_t next_seq_ = 1;
  std::deque<Inflight> inflight_;
  size_t inflight_commands_ = 0;  // the sum of inflight_[i].remaining
  std::deque<Queued> queued_;
  std::function<void()> on_connected_;
  std::string channel_;
  MessageHandler on_message_;
  std::string scratch_;  // reused command encoding buffer
  boost::asio::steady_timer tick_timer_;
  boost::asio::steady_timer reconnect_timer_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  // handlers hold a weak_ptr to it
};

// Helpers for reading replies.
std::string_view reply_string(const redisReply* reply);

}  // namespace rtce
