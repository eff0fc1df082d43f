// net_address.h — IP address:port values: parsing operator text ("198.18.0.1:3478",
// "[2001:db8::1]:3478"), formatting, and the conversions between sockaddr and the
// wire-format address bytes of the PROXY v2 framing.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rtce {

class SocketAddress {
 public:
  SocketAddress();
  static std::optional<SocketAddress> parse(std::string_view text);
  // Throws ConfigError naming `what` when text is not a valid address:port.
  static SocketAddress parse_or_throw(std::string_view text, std::string_view what);
  static SocketAddress from_sockaddr(const sockaddr* sa, socklen_t len);
  // family is RTCE_FAMILY_V4 or RTCE_FAMILY_V6; addr is 4 or 16 bytes in network order.
  static SocketAddress from_bytes(uint8_t family, const uint8_t* addr, uint16_t port);

  int family() const { return storage_.ss_family; }
  bool is_v4() const { return family() == AF_INET; }
  uint16_t port() const;
  void set_port(uint16_t port);
  bool is_unspecified() const;
  // Writes the address bytes (4 or 16) into out[16]; returns RTCE_FAMILY_V4/V6.
  uint8_t to_bytes(uint8_t out[16]) const;
  // The same endpoint as an AF_INET6 address (IPv4 as ::ffff:a.b.c.d), the form a
  // dual-stack socket sends to and receives from.
  sockaddr_in6 to_v6_mapped() const;
  // Undoes to_v6_mapped: ::ffff:a.b.c.d becomes a.b.c.d.
  SocketAddress unmapped() const;

  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t len() const { return is_v4() ? sizeof(sockaddr_in) : sizeof(sockaddr_in6); }
  std::string to_string() const;
  std::string ip_string() const;

  friend bool operator==(const SocketAddress& a, const SocketAddress& b);

 private:
  sockaddr_storage storage_{};
};

// Same address and port (IPv4 as v4-mapped), whatever else the sockaddr_in6 holds.
inline bool same_endpoint(const sockaddr_in6& a, const sockaddr_in6& b) {
  return a.sin6_port == b.sin6_port && IN6_ARE_ADDR_EQUAL(&a.sin6_addr, &b.sin6_addr);
}

}  // namespace rtce

namespace rtce {

// An address range ("198.18.0.0/15", "::1/128", a bare address = one host), for the
// transceiver's list of relays it accepts framed datagrams from.
class IpPrefix {
 public:
  static std::optional<IpPrefix> parse(std::string_view text);
  static IpPrefix parse_or_throw(std::string_view text, std::string_view what);
  // IPv4-mapped IPv6 addresses match IPv4 prefixes.
  bool contains(const SocketAddress& address) const;
  std::string to_string() const;
  int family() const { return family_; }
  const uint8_t* bytes() const { return bytes_; }  // network order; IPv4 in the first 4
  unsigned bits() const { return bits_; }

 private:
  int family_ = AF_INET;
  uint8_t bytes_[16]{};
  unsigned bits_ = 0;
};

}  // namespace rtce
