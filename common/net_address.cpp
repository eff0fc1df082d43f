// net_address.cpp — see net_address.h.
#include "net_address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

#include "error.h"
#include "rtce_proxy_v2.h"

namespace rtce {

SocketAddress::SocketAddress() { storage_.ss_family = AF_UNSPEC; }

std::optional<SocketAddress> SocketAddress::parse(std::string_view text) {
  std::string_view host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return std::nullopt;
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) return std::nullopt;
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535 || port_text.empty())
    return std::nullopt;

  SocketAddress out;
  std::string host_str(host);
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET, host_str.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&out.storage_, &v4, sizeof v4);
    return out;
  }
  if (inet_pton(AF_INET6, host_str.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&out.storage_, &v6, sizeof v6);
    return out;
  }
  return std::nullopt;
}

SocketAddress SocketAddress::parse_or_throw(std::string_view text, std::string_view what) {
  auto parsed = parse(text);
  if (!parsed)
    throw ConfigError(std::string(what) + ": '" + std::string(text) +
                      "' is not an address:port (e.g. 198.18.0.1:3478 or [2001:db8::1]:3478)");
  return *parsed;
}

SocketAddress SocketAddress::from_sockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress out;
  if (len > sizeof(out.storage_)) len = sizeof(out.storage_);
  std::memcpy(&out.storage_, sa, len);
  return out;
}

SocketAddress SocketAddress::from_bytes(uint8_t family, const uint8_t* addr, uint16_t port) {
  SocketAddress out;
  if (family == RTCE_FAMILY_V4) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage_);
    v4->sin_family = AF_INET;
    std::memcpy(&v4->sin_addr, addr, 4);
    v4->sin_port = htons(port);
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage_);
    v6->sin6_family = AF_INET6;
    std::memcpy(&v6->sin6_addr, addr, 16);
    v6->sin6_port = htons(port);
  }
  return out;
}

uint16_t SocketAddress::port() const {
  if (is_v4()) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void SocketAddress::set_port(uint16_t port) {
  if (is_v4())
    reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  else if (family() == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

bool SocketAddress::is_unspecified() const {
  if (is_v4()) return reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr == 0;
  if (family() == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  return true;
}

uint8_t SocketAddress::to_bytes(uint8_t out[16]) const {
  std::memset(out, 0, 16);
  if (is_v4()) {
    std::memcpy(out, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, 4);
    return RTCE_FAMILY_V4;
  }
  std::memcpy(out, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, 16);
  return RTCE_FAMILY_V6;
}

sockaddr_in6 SocketAddress::to_v6_mapped() const {
  sockaddr_in6 out{};
  out.sin6_family = AF_INET6;
  if (is_v4()) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage_);
    out.sin6_port = v4->sin_port;
    out.sin6_addr.s6_addr[10] = 0xff;
    out.sin6_addr.s6_addr[11] = 0xff;
    std::memcpy(&out.sin6_addr.s6_addr[12], &v4->sin_addr, 4);
  } else {
    std::memcpy(&out, &storage_, sizeof out);
  }
  return out;
}

SocketAddress SocketAddress::unmapped() const {
  if (family() != AF_INET6) return *this;
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
  if (!IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) return *this;
  return from_bytes(RTCE_FAMILY_V4, &v6->sin6_addr.s6_addr[12], ntohs(v6->sin6_port));
}

std::string SocketAddress::ip_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_v4())
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof buf);
  else if (family() == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf, sizeof buf);
  else
    return "unspecified";
  return buf;
}

std::string SocketAddress::to_string() const {
  if (family() == AF_INET6) return "[" + ip_string() + "]:" + std::to_string(port());
  return ip_string() + ":" + std::to_string(port());
}

bool operator==(const SocketAddress& a, const SocketAddress& b) {
  if (a.family() != b.family()) return false;
  if (a.is_v4()) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(&a.storage_);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b.storage_);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a.family() == AF_INET6) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(&a.storage_);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(&b.storage_);
    return x->sin6_port == y->sin6_port && IN6_ARE_ADDR_EQUAL(&x->sin6_addr, &y->sin6_addr);
  }
  return true;
}

}  // namespace rtce

namespace rtce {

std::optional<IpPrefix> IpPrefix::parse(std::string_view text) {
  std::string ip(text);
  unsigned bits = 0;
  bool has_bits = false;
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    ip = std::string(text.substr(0, slash));
    auto digits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) return std::nullopt;
    has_bits = true;
  }
  IpPrefix p;
  if (inet_pton(AF_INET, ip.c_str(), p.bytes_) == 1) {
    p.family_ = AF_INET;
    p.bits_ = has_bits ? bits : 32;
    if (p.bits_ > 32) return std::nullopt;
  } else if (inet_pton(AF_INET6, ip.c_str(), p.bytes_) == 1) {
    p.family_ = AF_INET6;
    p.bits_ = has_bits ? bits : 128;
    if (p.bits_ > 128) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return p;
}

IpPrefix IpPrefix::parse_or_throw(std::string_view text, std::string_view what) {
  auto p = parse(text);
  if (!p)
    throw ConfigError(std::string(what) + ": '" + std::string(text) +
                      "' is not an address range (e.g. 198.18.0.0/15, fd00::/8, 127.0.0.1)");
  return *p;
}

bool IpPrefix::contains(const SocketAddress& address) const {
  const SocketAddress plain = address.unmapped();
  if (plain.family() != family_) return false;
  uint8_t bytes[16];
  plain.to_bytes(bytes);
  unsigned full = bits_ / 8;
  if (std::memcmp(bytes, bytes_, full) != 0) return false;
  unsigned rest = bits_ % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (bytes[full] & mask) == (bytes_[full] & mask);
}

std::string IpPrefix::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(family_, bytes_, buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(bits_);
}

}  // namespace rtce
