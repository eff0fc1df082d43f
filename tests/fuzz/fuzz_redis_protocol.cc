// fuzz_redis_protocol.cc — libFuzzer target for what the Redis clients read
// (redis-sync/redis_protocol.h): the input as an error reply (MOVED / ASK), as a RESP
// command read back, as replies through hiredis's redisReader each read as a CLUSTER SLOTS
// map (the connection's bounded reader: an array's element count is capped), and as a
// key. Invariants: nothing crashes; a redirect names a slot < 16384 and a
// port; a command read back encodes to the same text; a slot map's ranges are ordered slots
// with a master's port; every key's slot is < 16384.
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis_protocol.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (const auto redirect = rtce::parse_redis_redirect(text)) {
    require(redirect->slot < rtce::kRedisClusterSlots, "a redirect's slot");
    require(redirect->node.port != 0, "a redirect's port");
  }

  std::vector<std::string_view> args;
  if (rtce::decode_redis_command(text, args)) {
    std::string again;
    rtce::encode_redis_command(args, again);
    require(again == text, "a command read back encodes to its text");
  }

  require(rtce::redis_key_slot(text) < rtce::kRedisClusterSlots, "a key's slot");

  const std::unique_ptr<redisReader, void (*)(redisReader*)> reader(rtce::make_bounded_redis_reader(),
                                                                    redisReaderFree);
  if (redisReaderFeed(reader.get(), text.data(), text.size()) != REDIS_OK) return 0;
  for (int i = 0; i < 64; ++i) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK || raw == nullptr) break;
    const std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw), freeReplyObject);
    if (const auto ranges = rtce::parse_cluster_slots(reply.get(), "127.0.0.1")) {
      for (const auto& range : *ranges) {
        require(range.first <= range.last && range.last < rtce::kRedisClusterSlots, "a slot range");
        require(range.master.port != 0 && !range.master.host.empty(), "a range's master");
      }
    }
    if (reply->type == REDIS_REPLY_ERROR) (void)rtce::parse_redis_redirect(rtce::reply_string(reply.get()));
  }
  return 0;
}
