// redis_connection.cpp — hiredis async on Boost.Asio: the event adapter, the bounded
// queue, command timeouts and reconnect with backoff.
#include "redis_connection.h"

#include <algorithm>
#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <vector>

#include "config_validators.h"

namespace rtce {

namespace asio = boost::asio;

// Maps hiredis's event hooks onto async_wait. The descriptor belongs to hiredis: the
// adapter releases it (never closes it) when hiredis frees the context. Wait handlers
// hold a shared_ptr, so the adapter outlives every wait it started.
class RedisConnection::Adapter : public std::enable_shared_from_this<Adapter> {
 public:
  Adapter(asio::io_context& io, redisAsyncContext* context, RedisConnection* owner)
      : descriptor_(io, context->c.fd), context_(context), owner_(owner) {}
  ~Adapter() {
    if (descriptor_.is_open()) descriptor_.release();
  }

  void attach() {
    context_->ev.data = this;
    context_->ev.addRead = &Adapter::add_read;
    context_->ev.delRead = &Adapter::del_read;
    context_->ev.addWrite = &Adapter::add_write;
    context_->ev.delWrite = &Adapter::del_write;
    context_->ev.cleanup = &Adapter::cleanup;
  }

  // hiredis 0.14 reports the connect on the first writable event, but only asks for one
  // when a command is queued: ask for it ourselves.
  void watch_connect() { add_write(this); }

 private:
  static void add_read(void* data) {
    auto* self = static_cast<Adapter*>(data);
    self->want_read_ = true;
    self->arm_read();
  }
  static void del_read(void* data) { static_cast<Adapter*>(data)->want_read_ = false; }
  static void add_write(void* data) {
    auto* self = static_cast<Adapter*>(data);
    self->want_write_ = true;
    self->arm_write();
  }
  static void del_write(void* data) { static_cast<Adapter*>(data)->want_write_ = false; }
  static void cleanup(void* data) {
    auto* self = static_cast<Adapter*>(data);
    const auto keep_alive = self->shared_from_this();
    self->context_ = nullptr;
    self->want_read_ = self->want_write_ = false;
    if (self->descriptor_.is_open()) self->descriptor_.release();  // cancels the waits
    self->owner_->context_freed();
  }

  void arm_read() {
    if (context_ == nullptr || !want_read_ || read_armed_) return;
    read_armed_ = true;
    descriptor_.async_wait(asio::posix::descriptor_base::wait_read,
                           [self = shared_from_this()](const boost::system::error_code& ec) {
                             self->read_armed_ = false;
                             if (ec || self->context_ == nullptr || !self->want_read_) return;
                             redisAsyncHandleRead(self->context_);
                             self->arm_read();
                           });
  }
  void arm_write() {
    if (context_ == nullptr || !want_write_ || write_armed_) return;
    write_armed_ = true;
    descriptor_.async_wait(asio::posix::descriptor_base::wait_write,
                           [self = shared_from_this()](const boost::system::error_code& ec) {
                             self->write_armed_ = false;
                             if (ec || self->context_ == nullptr || !self->want_write_) return;
                             redisAsyncHandleWrite(self->context_);
                             self->arm_write();
                           });
  }

  asio::posix::stream_descriptor descriptor_;
  redisAsyncContext* context_;
  RedisConnection* owner_;
  bool want_read_ = false;
  bool want_write_ = false;
  bool read_armed_ = false;
  bool write_armed_ = false;
};

namespace {

Nanos to_nanos(Millis ms) { return static_cast<Nanos>(ms.count()) * 1'000'000; }

// argv/argvlen arrays for hiredis without a heap allocation for short commands.
class ArgvBuffer {
 public:
  explicit ArgvBuffer(std::span<const std::string_view> args) : size_(args.size()) {
    if (size_ > kInline) {
      heap_ptrs_.resize(size_);
      heap_lens_.resize(size_);
    }
    const char** ptrs = size_ > kInline ? heap_ptrs_.data() : inline_ptrs_;
    size_t* lens = size_ > kInline ? heap_lens_.data() : inline_lens_;
    for (size_t i = 0; i < size_; ++i) {
      ptrs[i] = args[i].data();
      lens[i] = args[i].size();
    }
  }
  int argc() const { return static_cast<int>(size_); }
  const char** argv() { return size_ > kInline ? heap_ptrs_.data() : inline_ptrs_; }
  const size_t* lens() const { return size_ > kInline ? heap_lens_.data() : inline_lens_; }

 private:
  static constexpr size_t kInline = 16;
  size_t size_;
  const char* inline_ptrs_[kInline]{};
  size_t inline_lens_[kInline]{};
  std::vector<const char*> heap_ptrs_;
  std::vector<size_t> heap_lens_;
};

}  // namespace

std::optional<RedisOptions> RedisOptions::from_url(std::string_view url) {
  // The grammar lives with the config validators, which check the same URLs at start.
  const auto parsed = parse_redis_url(url);
  if (!parsed) return std::nullopt;
  RedisOptions options;
  options.host = parsed->host;
  options.port = parsed->port;
  options.username = parsed->username;
  options.password = parsed->password;
  return options;
}

std::string_view reply_string(const redisReply* reply) {
  if (reply == nullptr || reply->str == nullptr) return {};
  return {reply->str, reply->len};
}

RedisConnection::RedisConnection(asio::io_context& io, RedisOptions options, SyncCounters& counters)
    : io_(io), options_(std::move(options)), counters_(counters), tick_timer_(io), reconnect_timer_(io) {}

RedisConnection::~RedisConnection() {
  stopping_ = true;
  life_.reset();
  tick_timer_.cancel();
  reconnect_timer_.cancel();
  if (context_ != nullptr) redisAsyncFree(context_);  // replies come back null; ignored
  queued_.clear();
  inflight_.clear();
  inflight_commands_ = 0;
}

void RedisConnection::start() {
  if (started_) return;
  started_ = true;
  connect();
  arm_tick();
}

void RedisConnection::subscribe(std::string channel, MessageHandler on_message) {
  channel_ = std::move(channel);
  on_message_ = std::move(on_message);
}

void RedisConnection::connect() {
  if (stopping_) return;
  redisAsyncContext* context = redisAsyncConnect(options_.host.c_str(), options_.port);
  if (context == nullptr || context->err != 0) {
    counters_.errors.add();
    if (context != nullptr) redisAsyncFree(context);
    schedule_reconnect();
    return;
  }
  context->data = this;
  redisAsyncSetConnectCallback(context, &RedisConnection::on_connect);
  redisAsyncSetDisconnectCallback(context, &RedisConnection::on_disconnect);
  context_ = context;
  connect_started_ = monotonic_now();
  adapter_ = std::make_shared<Adapter>(io_, context, this);
  adapter_->attach();
  adapter_->watch_connect();
}

void RedisConnection::on_connect(const redisAsyncContext* context, int status) {
  auto* self = static_cast<RedisConnection*>(context->data);
  if (self == nullptr || self->stopping_) return;
  if (status != REDIS_OK) {
    self->counters_.errors.add();  // hiredis frees the context next; cleanup reconnects
    return;
  }
  self->connected_ = true;
  self->backoff_ = Millis{0};
  if (self->ever_connected_) self->counters_.reconnects.add();
  self->ever_connected_ = true;
  if (!self->options_.password.empty()) {
    std::array<std::string_view, 3> auth{"AUTH", self->options_.username, self->options_.password};
    const size_t argc = self->options_.username.empty() ? 2 : 3;
    if (argc == 2) auth[1] = self->options_.password;
    ArgvBuffer argv(std::span<const std::string_view>(auth.data(), argc));
    // Written before anything queued; an error reply fails the commands behind it anyway.
    redisAsyncCommandArgv(self->context_, nullptr, nullptr, argv.argc(), argv.argv(), argv.lens());
  }
  if (!self->channel_.empty()) {
    const std::array<std::string_view, 2> sub{"SUBSCRIBE", self->channel_};
    ArgvBuffer argv(sub);
    redisAsyncCommandArgv(self->context_, &RedisConnection::on_subscription, nullptr, argv.argc(),
                          argv.argv(), argv.lens());
  }
  while (!self->queued_.empty() && self->context_ != nullptr) {
    Queued queued = std::move(self->queued_.front());
    self->queued_.pop_front();
    self->send_formatted(std::move(queued));
  }
  if (self->on_connected_) self->on_connected_();
}

void RedisConnection::on_disconnect(const redisAsyncContext* context, int status) {
  auto* self = static_cast<RedisConnection*>(context->data);
  if (self == nullptr || self->stopping_) return;
  if (status != REDIS_OK) self->counters_.errors.add();
}

void RedisConnection::context_freed() {
  context_ = nullptr;
  adapter_.reset();
  connected_ = false;
  if (stopping_) return;
  // hiredis has already failed every callback it held; anything left is ours to fail.
  fail_inflight(SyncStatus::kDisconnected, counters_.errors);
  schedule_reconnect();
}

void RedisConnection::reset_connection() {
  if (context_ != nullptr) redisAsyncFree(context_);  // -> cleanup -> context_freed
}

void RedisConnection::schedule_reconnect() {
  if (stopping_) return;
  backoff_ = backoff_.count() == 0 ? options_.backoff_initial : std::min(backoff_ * 2, options_.backoff_max);
  reconnect_timer_.expires_after(backoff_);
  reconnect_timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const boost::system::error_code& ec) {
    if (ec || life.expired()) return;
    connect();
  });
}

void RedisConnection::arm_tick() {
  const Millis period = std::clamp(options_.command_timeout / 4, Millis{5}, Millis{250});
  tick_timer_.expires_after(period);
  tick_timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const boost::system::error_code& ec) {
    if (ec || life.expired()) return;
    tick();
    if (!life.expired()) arm_tick();
  });
}

void RedisConnection::tick() {
  const Nanos now = monotonic_now();
  // Every command gets the same timeout, so both queues are ordered by deadline.
  while (!queued_.empty() && queued_.front().deadline <= now) {
    Queued expired = std::move(queued_.front());
    queued_.pop_front();
    counters_.timeouts.add();
    if (expired.handler) expired.handler(SyncStatus::kTimeout, nullptr);
  }
  if (!inflight_.empty() && inflight_.front().deadline <= now) {
    // Replies arrive in order: a stuck head means a stuck connection. Fail what is in
    // flight and start over rather than wait on a server that may never answer.
    fail_inflight(SyncStatus::kTimeout, counters_.timeouts);
    reset_connection();
    return;
  }
  if (context_ != nullptr && !connected_ && now - connect_started_ > to_nanos(options_.connect_timeout)) {
    counters_.timeouts.add();
    reset_connection();
  }
}

namespace {

// RESP multi-bulk encoding, done here rather than by hiredis's printf-style formatter:
// the write path encodes one command per new flow.
void format_command(std::span<const std::string_view> args, std::string& out) {
  char number[24];
  const auto append_count = [&](char tag, size_t value) {
    out += tag;
    out.append(number, std::to_chars(number, number + sizeof number, value).ptr);
    out += "\r\n";
  };
  out.clear();
  append_count('*', args.size());
  for (const auto arg : args) {
    append_count('$', arg.size());
    out.append(arg);
    out += "\r\n";
  }
}

}  // namespace

bool RedisConnection::command(std::span<const std::string_view> args, ReplyHandler handler) {
  if (pending() >= options_.max_pending) {
    counters_.dropped.add();
    fail_later(std::move(handler), SyncStatus::kDropped);
    return false;
  }
  const Nanos deadline = monotonic_now() + to_nanos(options_.command_timeout);
  if (connected_ && context_ != nullptr && queued_.empty()) {
    format_command(args, scratch_);
    const uint64_t seq = next_seq_++;
    if (redisAsyncFormattedCommand(context_, &RedisConnection::on_reply, reinterpret_cast<void*>(seq),
                                   scratch_.data(), scratch_.size()) != REDIS_OK) {
      counters_.errors.add();
      fail_later(std::move(handler), SyncStatus::kDisconnected);
      return true;
    }
    counters_.commands_sent.add();
    inflight_.push_back(Inflight{seq, deadline, std::move(handler)});
    ++inflight_commands_;
    return true;
  }
  Queued queued{std::string(), deadline, std::move(handler)};
  format_command(args, queued.formatted);
  queued_.push_back(std::move(queued));
  return true;
}

size_t RedisConnection::send_batch(std::span<const std::string_view> commands) {
  const size_t room = options_.max_pending - std::min(options_.max_pending, pending());
  const size_t accepted = std::min(room, commands.size());
  if (accepted < commands.size()) counters_.dropped.add(commands.size() - accepted);
  if (accepted == 0) return 0;
  const Nanos deadline = monotonic_now() + to_nanos(options_.command_timeout);
  if (!connected_ || context_ == nullptr || !queued_.empty()) {
    for (size_t i = 0; i < accepted; ++i) queued_.push_back(Queued{std::string(commands[i]), deadline, {}});
    return accepted;
  }
  // hiredis still wants one callback per reply; they all carry the batch's sequence number,
  // and complete() retires the entry after its last reply.
  const uint64_t seq = next_seq_++;
  size_t sent = 0;
  while (sent < accepted &&
         redisAsyncFormattedCommand(context_, &RedisConnection::on_reply, reinterpret_cast<void*>(seq),
                                    commands[sent].data(), commands[sent].size()) == REDIS_OK) {
    ++sent;
  }
  if (sent < accepted) counters_.errors.add(accepted - sent);  // hiredis is tearing the context down
  if (sent > 0) {
    counters_.commands_sent.add(sent);
    inflight_.push_back(Inflight{seq, deadline, {}, sent});
    inflight_commands_ += sent;
  }
  return accepted;
}

void RedisConnection::send_formatted(Queued&& queued) {
  const uint64_t seq = next_seq_++;
  if (redisAsyncFormattedCommand(context_, &RedisConnection::on_reply, reinterpret_cast<void*>(seq),
                                 queued.formatted.data(), queued.formatted.size()) != REDIS_OK) {
    counters_.errors.add();
    fail_later(std::move(queued.handler), SyncStatus::kDisconnected);
    return;
  }
  counters_.commands_sent.add();
  inflight_.push_back(Inflight{seq, queued.deadline, std::move(queued.handler)});
  ++inflight_commands_;
}

void RedisConnection::fail_inflight(SyncStatus status, RelaxedCounter& counter) {
  std::deque<Inflight> failed;
  failed.swap(inflight_);
  inflight_commands_ = 0;
  for (auto& entry : failed) {
    counter.add(entry.remaining);
    if (entry.handler) entry.handler(status, nullptr);
  }
}

void RedisConnection::fail_later(ReplyHandler handler, SyncStatus status) {
  if (!handler) return;
  asio::post(io_, [handler = std::move(handler), status, life = std::weak_ptr<int>(life_)] {
    if (!life.expired()) handler(status, nullptr);
  });
}

void RedisConnection::on_reply(redisAsyncContext* context, void* reply, void* privdata) {
  auto* self = static_cast<RedisConnection*>(context->data);
  if (self == nullptr || self->stopping_) return;
  self->complete(reinterpret_cast<uint64_t>(privdata), static_cast<const redisReply*>(reply));
}

void RedisConnection::complete(uint64_t seq, const redisReply* reply) {
  if (reply != nullptr) counters_.replies.add();
  // A timed-out command was already failed; its late reply (or null) is ignored.
  if (inflight_.empty() || inflight_.front().seq != seq) return;
  --inflight_commands_;
  SyncStatus status = SyncStatus::kOk;
  if (reply == nullptr) {
    status = SyncStatus::kDisconnected;
    counters_.errors.add();
  } else if (reply->type == REDIS_REPLY_ERROR) {
    status = SyncStatus::kError;
    counters_.errors.add();
  }
  if (--inflight_.front().remaining > 0) return;  // a batch: more replies due, no handler
  Inflight entry = std::move(inflight_.front());
  inflight_.pop_front();
  if (entry.handler) entry.handler(status, reply);
}

void RedisConnection::on_subscription(redisAsyncContext* context, void* reply_data, void*) {
  auto* self = static_cast<RedisConnection*>(context->data);
  const auto* reply = static_cast<const redisReply*>(reply_data);
  if (self == nullptr || self->stopping_ || reply == nullptr) return;
  self->counters_.replies.add();
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 || !self->on_message_) return;
  const std::string_view kind = reply_string(reply->element[0]);
  if (kind == "message") {
    self->on_message_(reply_string(reply->element[2]));
  } else if (kind == "subscribe") {
    self->on_message_({});
  }
}

}  // namespace rtce
