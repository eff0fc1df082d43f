// config_validators.h — the value checks every rtcedge binary's config keys share:
// durations, socket addresses, Redis URLs, one-of choices, and the YAML spelling of values
// for --check-config. Each check throws a ConfigError that starts with `where` (the key and
// the layer its value came from), so every binary words the same mistake the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clock.h"
#include "net_address.h"

namespace rtce {

// "30s", "500ms", "2m", "1h", "10us"; a bare number is seconds. -1 when malformed.
Nanos parse_duration(std::string_view text);
// An exact spelling parse_duration reads back, in the largest of s, ms, us that divides it.
std::string format_duration(Nanos value);

struct AddressRule {
  bool need_port = false;  // port 0 is refused
  bool concrete = false;   // the wildcard address and port 0 are refused
};
SocketAddress check_socket_address(std::string_view text, const std::string& where, AddressRule rule = {});

// A concrete (not wildcard) IP address of the family (AF_INET or AF_INET6), without a port.
void check_concrete_ip(std::string_view text, const std::string& where, int family);

// "redis://[[user]:password@]host[:port][/db]" (db is ignored: one database).
struct RedisUrl {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  std::string username;
  std::string password;
};
std::optional<RedisUrl> parse_redis_url(std::string_view url);
// Empty is allowed (no Redis); anything else must parse.
void check_redis_url(std::string_view text, const std::string& where);
// The URL with its password replaced, for output that may be logged or shared.
std::string redact_redis_url(std::string_view text);

void check_one_of(std::string_view text, const std::string& where, const std::vector<std::string>& choices);

// A YAML double-quoted scalar; safe for any text.
std::string yaml_quote(std::string_view text);
// A YAML flow sequence of double-quoted scalars: ["a", "b"].
std::string yaml_string_list(const std::vector<std::string>& items);

inline constexpr std::string_view kRedacted = "<redacted>";

}  // namespace rtce
