// schema.cpp — key names and flow key text of the Redis layout.
#include "schema.h"

#include <charconv>

namespace rtce {

RedisSchema::RedisSchema(uint8_t cluster) : prefix_("rtce:{c" + std::to_string(cluster) + "}:") {}

std::string RedisSchema::endpoint_key(EndpointId id) const { return endpoint_key_prefix() + std::to_string(id); }
std::string RedisSchema::endpoint_key_prefix() const { return prefix_ + "ep:"; }
std::string RedisSchema::endpoint_set_key() const { return prefix_ + "eps"; }
std::string RedisSchema::endpoint_ids_key() const { return prefix_ + "endpoint_ids"; }
std::string RedisSchema::events_channel() const { return prefix_ + "events"; }
std::string RedisSchema::flow_pattern() const { return prefix_ + "flow:*"; }

std::string RedisSchema::flow_key(const FlowKey& key) const {
  return prefix_ + "flow:" + key.client.to_string() + "|" + key.vip.to_string();
}

std::optional<FlowKey> RedisSchema::parse_flow_key(std::string_view redis_key) const {
  const std::string flow_prefix = prefix_ + "flow:";
  if (!redis_key.starts_with(flow_prefix)) return std::nullopt;
  redis_key.remove_prefix(flow_prefix.size());
  const auto bar = redis_key.find('|');
  if (bar == std::string_view::npos) return std::nullopt;
  auto client = SocketAddress::parse(redis_key.substr(0, bar));
  auto vip = SocketAddress::parse(redis_key.substr(bar + 1));
  if (!client || !vip) return std::nullopt;
  return FlowKey{*client, *vip};
}

std::optional<EndpointId> parse_endpoint_id(std::string_view text) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) return std::nullopt;
  return static_cast<EndpointId>(value);
}

}  // namespace rtce
