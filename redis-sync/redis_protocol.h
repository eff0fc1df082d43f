// redis_protocol.h — RESP as the clients write and read it, without sockets (so it is
// unit-tested and fuzzed on its own, tests/fuzz/fuzz_redis_protocol.cc): a command's text
// and back, redirects (MOVED / ASK), the CLUSTER SLOTS map, and the key slot. Replies
// themselves are parsed by hiredis's redisReader.
#pragma once

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis_client.h"

namespace rtce {

inline constexpr uint16_t kRedisClusterSlots = 16384;

// An error reply that sends a command elsewhere: "MOVED <slot> <host>:<port>" (the slot has
// a new owner) or "ASK <slot> <host>:<port>" (this one key is being migrated there).
struct RedisRedirect {
  enum class Kind { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  uint16_t slot = 0;
  RedisNode node;
  friend bool operator==(const RedisRedirect&, const RedisRedirect&) = default;
};
// nullopt for any other error (and for a malformed redirect). An empty host (Redis 7 with
// an unknown endpoint sends ":<port>") is returned as such: the caller substitutes the
// host of the node that answered.
std::optional<RedisRedirect> parse_redis_redirect(std::string_view error);

// One master's slot ranges, from CLUSTER SLOTS.
struct RedisSlotRange {
  uint16_t first = 0;
  uint16_t last = 0;
  RedisNode master;
  std::vector<RedisNode> replicas;
};
// The CLUSTER SLOTS reply as ranges; nullopt when it is not one. An empty or "?" address
// (the node does not know its own) becomes `answered_by`'s host.
std::optional<std::vector<RedisSlotRange>> parse_cluster_slots(const redisReply* reply,
                                                               const std::string& answered_by);

// The inverse, views into `resp`; false when it is not exactly one such command.
bool decode_redis_command(std::string_view resp, std::vector<std::string_view>& args);

// hiredis's reply reader with a bound on the elements of one array: hiredis 0.14 allocates
// an array's element table before its elements arrive, so a "*800000000" from a broken or
// hostile server would allocate gigabytes. Beyond the bound the reader fails (a protocol
// error: the connection is reset). Free with redisReaderFree.
inline constexpr int kRedisMaxArrayElements = 1 << 20;
redisReader* make_bounded_redis_reader();

}  // namespace rtce
