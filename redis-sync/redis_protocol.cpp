// redis_protocol.cpp — see redis_protocol.h.
#include "redis_protocol.h"

#include <array>
#include <charconv>

namespace rtce {

namespace {

constexpr std::array<uint16_t, 256> make_crc16_table() {
  std::array<uint16_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    table[i] = crc;
  }
  return table;
}
constexpr auto kCrc16Table = make_crc16_table();

uint16_t crc16(std::string_view data) {
  uint16_t crc = 0;
  for (const char c : data)
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ static_cast<uint8_t>(c)) & 0xFF]);
  return crc;
}
static_assert(kCrc16Table[1] == 0x1021);

bool parse_u64(std::string_view text, uint64_t& value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

uint16_t redis_key_slot(std::string_view key) {
  // Only the hash tag counts when the key has one: the first '{', the first '}' after it,
  // and something between them (Redis's keyHashSlot).
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) & (kRedisClusterSlots - 1);
}

std::optional<RedisRedirect> parse_redis_redirect(std::string_view error) {
  RedisRedirect redirect;
  if (error.starts_with("MOVED ")) {
    redirect.kind = RedisRedirect::Kind::kMoved;
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    redirect.kind = RedisRedirect::Kind::kAsk;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  uint64_t slot = 0;
  if (!parse_u64(error.substr(0, space), slot) || slot >= kRedisClusterSlots) return std::nullopt;
  std::string_view address = error.substr(space + 1);
  const size_t colon = address.rfind(':');
  uint64_t port = 0;
  if (colon == std::string_view::npos || !parse_u64(address.substr(colon + 1), port) || port == 0 ||
      port > 65535)
    return std::nullopt;
  std::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  redirect.slot = static_cast<uint16_t>(slot);
  redirect.node = RedisNode{std::string(host), static_cast<uint16_t>(port)};
  return redirect;
}

std::optional<std::vector<RedisSlotRange>> parse_cluster_slots(const redisReply* reply,
                                                               const std::string& answered_by) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) return std::nullopt;
  const auto node_of = [&](const redisReply* entry) -> std::optional<RedisNode> {
    if (entry == nullptr || entry->type != REDIS_REPLY_ARRAY || entry->elements < 2) return std::nullopt;
    const redisReply* ip = entry->element[0];
    const redisReply* port = entry->element[1];
    if (ip->type != REDIS_REPLY_STRING || port->type != REDIS_REPLY_INTEGER || port->integer <= 0 ||
        port->integer > 65535)
      return std::nullopt;
    std::string host(reply_string(ip));
    if (host.empty() || host == "?") host = answered_by;  // the node does not know its own address
    return RedisNode{std::move(host), static_cast<uint16_t>(port->integer)};
  };
  std::vector<RedisSlotRange> ranges;
  ranges.reserve(reply->elements);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* entry = reply->element[i];
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements < 3) return std::nullopt;
    const redisReply* first = entry->element[0];
    const redisReply* last = entry->element[1];
    if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER || first->integer < 0 ||
        last->integer < first->integer || last->integer >= kRedisClusterSlots)
      return std::nullopt;
    auto master = node_of(entry->element[2]);
    if (!master) return std::nullopt;
    RedisSlotRange range{
        static_cast<uint16_t>(first->integer), static_cast<uint16_t>(last->integer), std::move(*master), {}};
    for (size_t r = 3; r < entry->elements; ++r) {
      if (auto replica = node_of(entry->element[r])) range.replicas.push_back(std::move(*replica));
    }
    ranges.push_back(std::move(range));
  }
  return ranges;
}

void encode_redis_command(std::span<const std::string_view> args, std::string& out) {
  char number[24];
  const auto append_count = [&](char tag, size_t value) {
    out += tag;
    out.append(number, std::to_chars(number, number + sizeof number, value).ptr);
    out += "\r\n";
  };
  append_count('*', args.size());
  for (const auto arg : args) {
    append_count('$', arg.size());
    out.append(arg);
    out += "\r\n";
  }
}

std::string_view reply_string(const redisReply* reply) {
  if (reply == nullptr || reply->str == nullptr) return {};
  return {reply->str, reply->len};
}

namespace {

// hiredis's own functions (static in hiredis.c), read off a default reader once.
const redisReplyObjectFunctions& default_reply_functions() {
  static const redisReplyObjectFunctions functions = [] {
    redisReader* reader = redisReaderCreate();
    const redisReplyObjectFunctions copy = *reader->fn;
    redisReaderFree(reader);
    return copy;
  }();
  return functions;
}

void* create_bounded_array(const redisReadTask* task, int elements) {
  if (elements < 0 || elements > kRedisMaxArrayElements) return nullptr;  // the reader reports OOM
  return default_reply_functions().createArray(task, elements);
}

redisReplyObjectFunctions bounded_reply_functions() {
  redisReplyObjectFunctions functions = default_reply_functions();
  functions.createArray = create_bounded_array;
  return functions;
}

}  // namespace

redisReader* make_bounded_redis_reader() {
  static redisReplyObjectFunctions functions = bounded_reply_functions();
  return redisReaderCreateWithFunctions(&functions);
}

bool decode_redis_command(std::string_view resp, std::vector<std::string_view>& args) {
  args.clear();
  size_t at = 0;
  const auto read_count = [&](char tag, uint64_t& value) {
    if (at >= resp.size() || resp[at] != tag) return false;
    const size_t end = resp.find("\r\n", at + 1);
    if (end == std::string_view::npos) return false;
    const std::string_view digits = resp.substr(at + 1, end - at - 1);
    // The canonical form only (what encode_redis_command writes): no leading zeros.
    if (!parse_u64(digits, value) || (digits.size() > 1 && digits[0] == '0')) return false;
    at = end + 2;
    return true;
  };
  uint64_t count = 0;
  if (!read_count('*', count) || count == 0 || count > resp.size()) return false;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t length = 0;
    if (!read_count('$', length) || length > resp.size() - at || resp.size() - at - length < 2) return false;
    args.push_back(resp.substr(at, length));
    at += length;
    if (resp.compare(at, 2, "\r\n") != 0) return false;
    at += 2;
  }
  return at == resp.size();
}

}  // namespace rtce
