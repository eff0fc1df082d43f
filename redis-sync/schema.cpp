// schema.cpp — key names and flow key text of the Redis layout.
#include "schema.h"

#include <arpa/inet.h>

#include <charconv>

namespace rtce {

RedisSchema::RedisSchema(uint8_t cluster)
    : prefix_("rtce:{c" + std::to_string(cluster) + "}:"),
      flow_prefix_("rtce:c" + std::to_string(cluster) + ":flow:") {}

std::string RedisSchema::endpoint_key(EndpointId id) const {
  return endpoint_key_prefix() + std::to_string(id);
}
std::string RedisSchema::endpoint_key_prefix() const { return prefix_ + "ep:"; }
std::string RedisSchema::endpoint_set_key() const { return prefix_ + "eps"; }
std::string RedisSchema::endpoint_ids_key() const { return prefix_ + "endpoint_ids"; }
std::string RedisSchema::events_channel() const { return prefix_ + "events"; }
std::string RedisSchema::ingress_key() const { return prefix_ + "ingress"; }
std::string RedisSchema::key_calls_key(std::string_view principal) const {
  return prefix_ + "keycalls:" + std::string(principal);
}
std::string RedisSchema::provider_call_key(std::string_view provider,
                                           std::string_view provider_call_id) const {
  return prefix_ + "phonecall:" + std::string(provider) + ":" + std::string(provider_call_id);
}
std::string RedisSchema::flow_pattern() const { return flow_prefix_ + "*"; }

namespace {

// The text of SocketAddress::to_string ("a.b.c.d:port", "[v6]:port"), appended.
void append_address(const SocketAddress& address, std::string& out) {
  char buf[INET6_ADDRSTRLEN + 8];
  char* end = buf;
  if (address.is_v4()) {
    const auto* ip =
        reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(address.sa())->sin_addr);
    for (int i = 0; i < 4; ++i) {
      end = std::to_chars(end, buf + sizeof buf, ip[i]).ptr;
      *end++ = i < 3 ? '.' : ':';
    }
  } else {
    out += address.family() == AF_INET6 ? "[" + address.ip_string() + "]:" : address.ip_string() + ":";
  }
  end = std::to_chars(end, buf + sizeof buf, address.port()).ptr;
  out.append(buf, end);
}

}  // namespace

void RedisSchema::format_flow_key(const rtce_flow_key& key, std::string& out) const {
  out.assign(flow_prefix_);
  append_address(flow_client(key), out);
  out += '|';
  append_address(flow_vip(key), out);
}

std::string RedisSchema::flow_key(const rtce_flow_key& key) const {
  std::string out;
  format_flow_key(key, out);
  return out;
}

std::optional<rtce_flow_key> RedisSchema::parse_flow_key(std::string_view redis_key) const {
  if (!redis_key.starts_with(flow_prefix_)) return std::nullopt;
  redis_key.remove_prefix(flow_prefix_.size());
  const auto bar = redis_key.find('|');
  if (bar == std::string_view::npos) return std::nullopt;
  auto client = SocketAddress::parse(redis_key.substr(0, bar));
  auto vip = SocketAddress::parse(redis_key.substr(bar + 1));
  if (!client || !vip) return std::nullopt;
  return make_flow_key(*client, *vip);
}

std::optional<EndpointId> parse_endpoint_id(std::string_view text) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535)
    return std::nullopt;
  return static_cast<EndpointId>(value);
}

void append_flow_record(const FlowRecord& record, std::string& out) {
  char buf[8];
  char* p = buf;
  if (record.role == FlowRole::ingress) *p++ = 'c';
  if (record.role == FlowRole::owner) *p++ = 'o';
  p = std::to_chars(p, buf + sizeof buf, record.id).ptr;
  out.append(buf, p);
  if (record.role == FlowRole::owner) {
    out += '@';
    append_address(record.via, out);
  }
}

std::string format_flow_record(const FlowRecord& record) {
  std::string out;
  append_flow_record(record, out);
  return out;
}

std::optional<FlowRecord> parse_flow_record(std::string_view text) {
  if (text.starts_with('c')) {
    const auto cluster = parse_endpoint_id(text.substr(1));
    if (!cluster || *cluster > 255) return std::nullopt;
    return FlowRecord::peer_cluster(static_cast<uint8_t>(*cluster));
  }
  if (text.starts_with('o')) {
    const auto at = text.find('@');
    if (at == std::string_view::npos) return std::nullopt;
    const auto endpoint = parse_endpoint_id(text.substr(1, at - 1));
    const auto via = SocketAddress::parse(text.substr(at + 1));
    if (!endpoint || !via || via->port() == 0) return std::nullopt;
    return FlowRecord::owner(*endpoint, *via);
  }
  const auto endpoint = parse_endpoint_id(text);
  if (!endpoint) return std::nullopt;
  return FlowRecord(*endpoint);
}

}  // namespace rtce
