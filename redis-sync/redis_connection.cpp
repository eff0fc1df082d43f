// redis_connection.cpp — one Redis node over Asio TCP or TLS: connect (resolver, TLS
// handshake with the files read now), the prelude (AUTH, verify, SUBSCRIBE), RESP
// encoding, replies through hiredis's redisReader in send order, the bounded queue,
// command timeouts and reconnect with backoff.
#include "redis_connection.h"

#include <hiredis/read.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <vector>

#include "random.h"
#include "redis_protocol.h"

namespace rtce {

namespace asio = boost::asio;
using asio::ip::tcp;

// One transport: a TCP socket, or a TLS stream over one, and the reply parser. Replaced
// on every connect, so a late handler of an old link finds link_ changed and does nothing.
struct RedisConnection::Link {
  explicit Link(asio::io_context& io) : resolver(io), socket(io) {}
  ~Link() {
    if (reader != nullptr) redisReaderFree(reader);
  }
  tcp::socket& lowest() { return tls ? tls->next_layer() : socket; }
  void close() {
    boost::system::error_code ignored;
    resolver.cancel();
    lowest().close(ignored);
  }

  tcp::resolver resolver;
  tcp::socket socket;  // plaintext; with TLS the stream owns its own socket
  std::unique_ptr<asio::ssl::context> tls_context;
  std::unique_ptr<asio::ssl::stream<tcp::socket>> tls;
  redisReader* reader = make_bounded_redis_reader();
  std::array<char, 16384> read_buffer{};
  std::string writing;  // the bytes of the write in flight
  bool write_in_flight = false;
  bool handshaking = false;  // TLS: the handshake is under way
};

namespace {

Nanos to_nanos(Millis ms) { return static_cast<Nanos>(ms.count()) * 1'000'000; }

// The TLS context of one connect: files read now, so a rotated certificate or CA is used
// by the next connection without a restart.
std::unique_ptr<asio::ssl::context> make_tls_context(const RedisTlsOptions& tls, std::string& error) {
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  context->set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                           asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                       ec);
  context->set_verify_mode(asio::ssl::verify_peer, ec);
  if (tls.ca_file.empty()) {
    context->set_default_verify_paths(ec);
  } else {
    context->load_verify_file(tls.ca_file, ec);
  }
  if (ec) {
    error = "cannot load the CA file '" + tls.ca_file + "': " + ec.message();
    return nullptr;
  }
  if (!tls.cert_file.empty()) {
    context->use_certificate_chain_file(tls.cert_file, ec);
    if (!ec) context->use_private_key_file(tls.key_file, asio::ssl::context::pem, ec);
    if (ec) {
      error = "cannot load the client certificate '" + tls.cert_file + "' / key '" + tls.key_file +
              "': " + ec.message();
      return nullptr;
    }
  }
  return context;
}

}  // namespace

RedisConnection::RedisConnection(asio::io_context& io, RedisOptions options, SyncCounters& counters)
    : io_(io),
      options_(std::move(options)),
      counters_(counters),
      node_{options_.host, options_.port},
      tick_timer_(io),
      reconnect_timer_(io) {}

RedisConnection::~RedisConnection() {
  stopping_ = true;
  life_.reset();
  tick_timer_.cancel();
  reconnect_timer_.cancel();
  if (link_) link_->close();
  link_.reset();
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

void RedisConnection::verify_with(std::vector<std::string> args, ReplyCheck accept) {
  verify_args_ = std::move(args);
  verify_ = std::move(accept);
}

void RedisConnection::connect() {
  if (stopping_ || resolving_) return;
  connect_started_ = monotonic_now();
  if (!resolver_) {
    connect_to(RedisNode{options_.host, options_.port});
    return;
  }
  resolving_ = true;
  resolver_([this, life = std::weak_ptr<int>(life_)](std::optional<RedisNode> node) {
    if (life.expired() || stopping_) return;
    resolving_ = false;
    if (!node) {
      counters_.errors.add();
      schedule_reconnect();
      return;
    }
    connect_to(*node);
  });
}

void RedisConnection::connect_to(const RedisNode& node) {
  node_ = node;
  connect_started_ = monotonic_now();
  auto link = std::make_shared<Link>(io_);
  link_ = link;
  if (options_.tls.enabled) {
    std::string error;
    link->tls_context = make_tls_context(options_.tls, error);
    if (!link->tls_context) {
      fail_link(link, "TLS setup", error, true);
      return;
    }
    link->tls = std::make_unique<asio::ssl::stream<tcp::socket>>(io_, *link->tls_context);
  }
  const auto on_endpoints = [this, link, life = std::weak_ptr<int>(life_)](
                                const boost::system::error_code& ec,
                                const tcp::resolver::results_type& endpoints) {
    if (life.expired() || link != link_) return;
    if (ec) {
      fail_link(link, "resolve", ec.message());
      return;
    }
    asio::async_connect(
        link->lowest(), endpoints,
        [this, link, life](const boost::system::error_code& ec, const tcp::endpoint&) {
          if (life.expired() || link != link_) return;
          if (ec) {
            fail_link(link, "connect", ec.message());
            return;
          }
          boost::system::error_code ignored;
          link->lowest().set_option(tcp::no_delay(true), ignored);
          if (!link->tls) {
            on_transport_ready(link);
            return;
          }
          SSL* ssl = link->tls->native_handle();
          const std::string& name = options_.tls.server_name.empty() ? node_.host : options_.tls.server_name;
          boost::system::error_code not_ip;
          asio::ip::make_address(name, not_ip);
          X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
          if (!not_ip) {
            X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
          } else {
            // SNI carries names only (RFC 6066 §3).
            SSL_set_tlsext_host_name(ssl, name.c_str());
            X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
          }
          link->handshaking = true;
          link->tls->async_handshake(
              asio::ssl::stream_base::client, [this, link, life](const boost::system::error_code& ec) {
                if (life.expired() || link != link_) return;
                link->handshaking = false;
                if (ec) {
                  std::string why = ec.message();
                  const long verify = SSL_get_verify_result(link->tls->native_handle());
                  if (verify != X509_V_OK)
                    why += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
                  fail_link(link, "TLS handshake", why, true);
                  return;
                }
                on_transport_ready(link);
              });
        });
  };
  link->resolver.async_resolve(node.host, std::to_string(node.port), tcp::resolver::numeric_service,
                               on_endpoints);
}

void RedisConnection::fail_link(const std::shared_ptr<Link>& link, std::string_view what,
                                const std::string& why, bool tls_error) {
  if (link != link_) return;
  counters_.errors.add();
  if (tls_error) counters_.tls_errors.add();
  std::string failure = std::string(what) + " " + node_.to_string() + ": " + why;
  if (failure != last_failure_) {  // once per distinct failure, not once per retry
    spdlog::warn("redis: {} to {} failed: {}", what, node_.to_string(), why);
    last_failure_ = std::move(failure);
  }
  reset_connection();
}

void RedisConnection::on_transport_ready(const std::shared_ptr<Link>& link) {
  last_failure_.clear();
  start_read(link);
  const std::string password = options_.current_password();
  if (!password.empty()) {
    std::array<std::string_view, 3> auth{"AUTH", options_.username, password};
    size_t argc = 3;
    if (options_.username.empty()) {
      auth[1] = password;
      argc = 2;
    }
    write_prelude(std::span<const std::string_view>(auth.data(), argc), [this](const redisReply* reply) {
      if (reply->type == REDIS_REPLY_ERROR) fail_link(link_, "AUTH", std::string(reply_string(reply)));
    });
  }
  if (verify_) {
    std::vector<std::string_view> args(verify_args_.begin(), verify_args_.end());
    write_prelude(args, [this](const redisReply* reply) {
      if (!verify_(reply)) {
        counters_.errors.add();
        spdlog::info("redis: {} is not the node wanted now ({}); connecting again", node_.to_string(),
                     reply->type == REDIS_REPLY_ERROR ? reply_string(reply) : "check failed");
        reset_connection();
        return;
      }
      become_connected();
    });
  }
  if (!channel_.empty()) {
    const std::array<std::string_view, 2> sub{"SUBSCRIBE", channel_};
    write_prelude(sub, [this](const redisReply* reply) {
      if (reply->type == REDIS_REPLY_ERROR) {
        fail_link(link_, "SUBSCRIBE", std::string(reply_string(reply)));
        return;
      }
      // (Re)subscribed: messages may have been missed while the link was down.
      if (on_message_) on_message_({});
    });
  }
  if (!verify_) become_connected();
}

void RedisConnection::become_connected() {
  connected_ = true;
  backoff_ = Millis{0};
  if (ever_connected_) counters_.reconnects.add();
  ever_connected_ = true;
  while (!queued_.empty() && link_ != nullptr) {
    Queued queued = std::move(queued_.front());
    queued_.pop_front();
    send_formatted(std::move(queued));
  }
  if (on_connected_) on_connected_();
}

void RedisConnection::reconnect() {
  if (link_ == nullptr) return;
  reset_connection();
}

void RedisConnection::reset_connection() {
  if (link_) link_->close();
  link_.reset();
  connected_ = false;
  prelude_.clear();
  out_.clear();
  if (stopping_) return;
  fail_inflight(SyncStatus::kDisconnected, counters_.errors);
  schedule_reconnect();
}

void RedisConnection::schedule_reconnect() {
  if (stopping_) return;
  backoff_ = backoff_.count() == 0 ? options_.backoff_initial : std::min(backoff_ * 2, options_.backoff_max);
  // Half to all of the backoff: a fleet that lost Redis together does not come back in step.
  uint16_t spread = 0;
  fill_random(&spread, sizeof spread);
  const auto wait = backoff_ / 2 + backoff_ * spread / 2 / 65535;
  reconnect_timer_.expires_after(wait);
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
  if (link_ != nullptr && !connected_ && now - connect_started_ > to_nanos(options_.connect_timeout)) {
    counters_.timeouts.add();
    const std::string waited = std::to_string(options_.connect_timeout.count()) + " ms";
    if (link_->handshaking) {
      // A plaintext server reads the ClientHello as a command and waits for more.
      fail_link(link_, "TLS handshake", "no answer within " + waited + " (is the server speaking TLS?)",
                true);
    } else {
      fail_link(link_, "connect", "no connection within " + waited);
    }
  }
}

void RedisConnection::start_read(const std::shared_ptr<Link>& link) {
  const auto on_read = [this, link, life = std::weak_ptr<int>(life_)](const boost::system::error_code& ec,
                                                                      size_t bytes) {
    if (life.expired() || link != link_) return;
    if (ec) {
      fail_link(link, "read", ec == asio::error::eof ? "the server closed the connection" : ec.message());
      return;
    }
    if (redisReaderFeed(link->reader, link->read_buffer.data(), bytes) != REDIS_OK) {
      fail_link(link, "read", "cannot parse the reply");
      return;
    }
    while (link == link_) {
      void* reply = nullptr;
      if (redisReaderGetReply(link->reader, &reply) != REDIS_OK) {
        fail_link(link, "read", std::string("protocol error: ") + link->reader->errstr);
        return;
      }
      if (reply == nullptr) break;
      on_reply(static_cast<redisReply*>(reply));
    }
    if (link == link_) start_read(link);
  };
  const auto buffer = asio::buffer(link->read_buffer);
  if (link->tls) {
    link->tls->async_read_some(buffer, on_read);
  } else {
    link->socket.async_read_some(buffer, on_read);
  }
}

void RedisConnection::on_reply(redisReply* reply) {
  const std::unique_ptr<redisReply, void (*)(void*)> owned(reply, freeReplyObject);
  counters_.replies.add();
  if (!prelude_.empty()) {
    PreludeHandler handler = std::move(prelude_.front());
    prelude_.pop_front();
    handler(reply);
    return;
  }
  if (!channel_.empty()) {
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 || !on_message_) return;
    const std::string_view kind = reply_string(reply->element[0]);
    if (kind == "message") {
      on_message_(reply_string(reply->element[2]));
    } else if (kind == "subscribe") {
      on_message_({});
    }
    return;
  }
  complete(reply);
}

void RedisConnection::write_prelude(std::span<const std::string_view> args, PreludeHandler handler) {
  encode_redis_command(args, out_);
  prelude_.push_back(std::move(handler));
  counters_.commands_sent.add();
  flush_soon();
}

void RedisConnection::append_command(std::span<const std::string_view> args) {
  encode_redis_command(args, out_);
  flush_soon();
}

// Everything encoded in one turn of the io_context goes out in one write.
void RedisConnection::flush_soon() {
  if (flush_posted_) return;
  flush_posted_ = true;
  asio::post(io_, [this, life = std::weak_ptr<int>(life_)] {
    if (life.expired()) return;
    flush_posted_ = false;
    flush();
  });
}

void RedisConnection::flush() {
  const auto link = link_;
  if (link == nullptr || link->write_in_flight || out_.empty()) return;
  link->writing.swap(out_);
  out_.clear();
  link->write_in_flight = true;
  const auto on_written = [this, link, life = std::weak_ptr<int>(life_)](const boost::system::error_code& ec,
                                                                         size_t) {
    if (life.expired() || link != link_) return;
    link->write_in_flight = false;
    link->writing.clear();
    if (ec) {
      fail_link(link, "write", ec.message());
      return;
    }
    flush();
  };
  if (link->tls) {
    asio::async_write(*link->tls, asio::buffer(link->writing), on_written);
  } else {
    asio::async_write(link->socket, asio::buffer(link->writing), on_written);
  }
}

bool RedisConnection::command(std::span<const std::string_view> args, ReplyHandler handler) {
  if (pending() >= options_.max_pending) {
    counters_.dropped.add();
    fail_later(std::move(handler), SyncStatus::kDropped);
    return false;
  }
  const Nanos deadline = monotonic_now() + to_nanos(options_.command_timeout);
  if (connected_ && queued_.empty()) {
    append_command(args);
    counters_.commands_sent.add();
    inflight_.push_back(Inflight{deadline, std::move(handler)});
    ++inflight_commands_;
    return true;
  }
  Queued queued{std::string(), deadline, std::move(handler)};
  encode_redis_command(args, queued.formatted);
  queued_.push_back(std::move(queued));
  return true;
}

size_t RedisConnection::send_batch(std::span<const RedisBatchCommand> commands) {
  const size_t room = options_.max_pending - std::min(options_.max_pending, pending());
  const size_t accepted = std::min(room, commands.size());
  if (accepted < commands.size()) counters_.dropped.add(commands.size() - accepted);
  if (accepted == 0) return 0;
  const Nanos deadline = monotonic_now() + to_nanos(options_.command_timeout);
  if (!connected_ || !queued_.empty()) {
    for (size_t i = 0; i < accepted; ++i)
      queued_.push_back(Queued{std::string(commands[i].resp), deadline, {}});
    return accepted;
  }
  // One in-flight entry stands for the lot; complete() retires it after its last reply.
  for (size_t i = 0; i < accepted; ++i) out_.append(commands[i].resp);
  flush_soon();
  counters_.commands_sent.add(accepted);
  inflight_.push_back(Inflight{deadline, {}, accepted});
  inflight_commands_ += accepted;
  return accepted;
}

void RedisConnection::send_formatted(Queued&& queued) {
  out_.append(queued.formatted);
  flush_soon();
  counters_.commands_sent.add();
  inflight_.push_back(Inflight{queued.deadline, std::move(queued.handler)});
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

void RedisConnection::complete(const redisReply* reply) {
  if (inflight_.empty()) return;  // a reply after its command timed out and the link was reset: not this link
  --inflight_commands_;
  SyncStatus status = SyncStatus::kOk;
  if (reply->type == REDIS_REPLY_ERROR) {
    status = SyncStatus::kError;
    // A Redis Cluster redirect is routing, not a failure: the cluster client follows it
    // and counts it in `redirects`.
    const std::string_view text = reply_string(reply);
    if (!text.starts_with("MOVED ") && !text.starts_with("ASK ")) counters_.errors.add();
  }
  if (--inflight_.front().remaining > 0) return;  // a batch: more replies due, no handler
  Inflight entry = std::move(inflight_.front());
  inflight_.pop_front();
  if (entry.handler) entry.handler(status, reply);
}

}  // namespace rtce
