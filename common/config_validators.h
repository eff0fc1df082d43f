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

// A Redis URL (docs/redis.md, "Deployments"):
//   redis[s]://[[user]:password@]host[:port][/db]                  one server (db ignored)
//   redis[s]+sentinel://[[user]:password@]host[:port][,host[:port]…]/<master name>
//   redis[s]+cluster://[[user]:password@]host[:port][,host[:port]…]   seed nodes
// "rediss" is TLS (never a plaintext fallback). Query parameters: tls_ca_file,
// tls_cert_file, tls_key_file, tls_server_name (TLS only), password_file (read at every
// connect: wins over the URL's password), sentinel_username, sentinel_password (Sentinel).
struct RedisUrl {
  enum class Topology { kStandalone, kSentinel, kCluster };
  struct Node {
    std::string host;
    uint16_t port = 6379;
  };
  Topology topology = Topology::kStandalone;
  bool tls = false;
  std::vector<Node> nodes;         // never empty
  std::string host = "127.0.0.1";  // nodes[0]
  uint16_t port = 6379;
  std::string master_name;
  std::string username;
  std::string password;
  std::string password_file;
  std::string sentinel_username;
  std::string sentinel_password;
  std::string sentinel_password_file;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
};
// nullopt (and *error says why) for anything else.
std::optional<RedisUrl> parse_redis_url(std::string_view url, std::string* error = nullptr);
// Empty is allowed (no Redis); anything else must parse, and its files must be readable.
void check_redis_url(std::string_view text, const std::string& where);
// The URL with its passwords replaced, for output that may be logged or shared.
std::string redact_redis_url(std::string_view text);

void check_one_of(std::string_view text, const std::string& where, const std::vector<std::string>& choices);

// A YAML double-quoted scalar; safe for any text.
std::string yaml_quote(std::string_view text);
// A YAML flow sequence of double-quoted scalars: ["a", "b"].
std::string yaml_string_list(const std::vector<std::string>& items);

inline constexpr std::string_view kRedacted = "<redacted>";

}  // namespace rtce
