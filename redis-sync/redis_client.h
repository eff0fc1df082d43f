// redis_client.h — what the registry and the flow store ask of Redis, whatever the
// deployment behind the URL: one node (RedisConnection), a master found through Sentinel
// (RedisSentinelClient), or a Redis Cluster whose commands go to the node owning their
// key's slot (RedisClusterClient). Also the options every client shares (docs/redis.md,
// "Deployments").
#pragma once

#include <hiredis/hiredis.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sync_types.h"

namespace rtce {

enum class RedisTopology { kStandalone, kSentinel, kCluster };

struct RedisNode {
  std::string host;  // an IP address: a name is resolved with a blocking lookup
  uint16_t port = 6379;
  std::string to_string() const;  // "host:port", "[v6]:port"
  friend bool operator==(const RedisNode&, const RedisNode&) = default;
};

struct RedisTlsOptions {
  bool enabled = false;   // rediss://…: never falls back to plaintext
  std::string ca_file;    // trust anchors; empty: the system's default paths
  std::string cert_file;  // client certificate (mutual TLS), with key_file
  std::string key_file;
  std::string server_name;  // SNI and the name checked in the server's certificate; empty: the host
};

struct RedisOptions {
  RedisTopology topology = RedisTopology::kStandalone;
  // The node this connection talks to (a standalone server, a cluster node, a sentinel).
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  // Sentinel: the sentinels; Cluster: the seed nodes; standalone: {host:port}.
  std::vector<RedisNode> nodes;
  std::string master_name;    // Sentinel: the monitored master's name
  std::string username;       // ACL user (AUTH user password); empty: the default user
  std::string password;       // AUTH before anything else when set
  std::string password_file;  // read at every connect (a rotated Secret needs no restart); wins over password
  std::string sentinel_username;  // Sentinel's own ACL user and password (sentinel_password=…)
  std::string sentinel_password;
  std::string sentinel_password_file;  // like password_file, for the sentinels; wins over sentinel_password
  RedisTlsOptions tls;
  Millis connect_timeout{1000};
  Millis command_timeout{1000};  // a command without reply by then fails, and the connection is reset
  Millis backoff_initial{50};
  Millis backoff_max{2000};
  size_t max_pending = 200000;  // queued + in flight; beyond it commands are dropped (counted)

  // Any URL common/config_validators.h's parse_redis_url reads: redis://, rediss://,
  // redis+sentinel://, rediss+sentinel://, redis+cluster://, rediss+cluster://.
  static std::optional<RedisOptions> from_url(std::string_view url);
  // The options of one connection to `node` (a cluster node, a sentinel, the found master).
  RedisOptions for_node(const RedisNode& node) const;
  // The password to send now: password_file's content (trailing newline dropped) when set.
  std::string current_password() const;
  // For logs, without secrets: "127.0.0.1:6379", "Sentinel master 'rtce' via 10.0.0.1:26379,…",
  // "Redis Cluster via 10.0.0.1:6379,…", with " (TLS)".
  std::string describe() const;
};

// One command of a pre-encoded batch: its RESP text and the key that routes it.
struct RedisBatchCommand {
  std::string_view resp;
  std::string_view key;
};

class RedisClient {
 public:
  // reply is non-null only for kOk and kError (an error reply from the server).
  using ReplyHandler = std::function<void(SyncStatus status, const redisReply* reply)>;
  using MessageHandler = std::function<void(std::string_view payload)>;

  virtual ~RedisClient() = default;

  virtual void start() = 0;
  // Commands can be sent now (cluster: the slot map is known and a node answers).
  virtual bool connected() const = 0;
  virtual size_t pending() const = 0;

  // Sends now when connected, queues while connecting (bounded). Routed by routing_key(args).
  // false when dropped; the handler then gets kDropped later.
  virtual bool command(std::span<const std::string_view> args, ReplyHandler handler) = 0;
  // Handler-less writes (put_many), each a complete RESP command routed by its key. Returns
  // how many were accepted; the rest were dropped (counted).
  virtual size_t send_batch(std::span<const RedisBatchCommand> commands) = 0;
  // Runs after every successful connect (cluster: after every slot map that changed the nodes).
  virtual void on_connected(std::function<void()> hook) = 0;
  // Makes this a subscriber: SUBSCRIBE after every connect; the handler gets each message's
  // payload, and an empty payload when the subscription is (re)established.
  virtual void subscribe(std::string channel, MessageHandler on_message) = 0;

  // Node-local commands (SCAN): how many primaries hold data (one unless a cluster), and
  // `args` sent to primary `index` of them as they are now.
  virtual size_t primaries() const = 0;
  virtual bool command_on_primary(size_t index, std::span<const std::string_view> args,
                                  ReplyHandler handler) = 0;
};

// The client for options.topology; the caller subscribes (if it will) and starts it.
std::unique_ptr<RedisClient> make_redis_client(boost::asio::io_context& io, RedisOptions options,
                                               SyncCounters& counters);

// The key a command is routed by: args[1], the first key of EVAL/EVALSHA, none ("") for
// commands without one (PING, PUBLISH, SCAN, SUBSCRIBE, ASKING, CLUSTER, SENTINEL, ROLE).
std::string_view routing_key(std::span<const std::string_view> args);
// The Redis Cluster slot of a key (CRC16/XMODEM of its hash tag, or of the key, mod 16384).
uint16_t redis_key_slot(std::string_view key);

std::string_view reply_string(const redisReply* reply);
// RESP multi-bulk text of a command ("*<n>\r\n$<len>\r\n<arg>\r\n..."), appended to out.
void encode_redis_command(std::span<const std::string_view> args, std::string& out);

}  // namespace rtce
