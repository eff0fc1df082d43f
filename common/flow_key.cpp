// flow_key.cpp — see flow_key.h.
#include "flow_key.h"

#include <cstring>

namespace rtce {

namespace {

uint8_t set_side(const sockaddr* sa, uint8_t addr[16], uint16_t& port_be) {
  std::memset(addr, 0, 16);
  if (sa->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(addr, &v4->sin_addr, 4);
    port_be = v4->sin_port;
    return RTCE_FAMILY_V4;
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(sa);
  std::memcpy(addr, &v6->sin6_addr, 16);
  port_be = v6->sin6_port;
  return RTCE_FAMILY_V6;
}

socklen_t side_sockaddr(uint8_t family, const uint8_t addr[16], uint16_t port_be, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  if (family == RTCE_FAMILY_V4) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
    v4->sin_family = AF_INET;
    std::memcpy(&v4->sin_addr, addr, 4);
    v4->sin_port = port_be;
    return sizeof(sockaddr_in);
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  v6->sin6_family = AF_INET6;
  std::memcpy(&v6->sin6_addr, addr, 16);
  v6->sin6_port = port_be;
  return sizeof(sockaddr_in6);
}

}  // namespace

void set_flow_client(rtce_flow_key& key, const sockaddr* client) {
  key.family = set_side(client, key.client_addr, key.client_port_be);
}

void set_flow_vip(rtce_flow_key& key, const sockaddr* vip) {
  key.family = set_side(vip, key.vip_addr, key.vip_port_be);
}

socklen_t flow_client_sockaddr(const rtce_flow_key& key, sockaddr_storage& out) {
  return side_sockaddr(key.family, key.client_addr, key.client_port_be, out);
}

socklen_t flow_vip_sockaddr(const rtce_flow_key& key, sockaddr_storage& out) {
  return side_sockaddr(key.family, key.vip_addr, key.vip_port_be, out);
}

rtce_flow_key make_flow_key(const SocketAddress& client, const SocketAddress& vip) {
  rtce_flow_key key{};
  set_flow_vip(key, vip.sa());
  set_flow_client(key, client.sa());  // the client's family names the key
  return key;
}

SocketAddress flow_client(const rtce_flow_key& key) {
  sockaddr_storage sa;
  const socklen_t len = flow_client_sockaddr(key, sa);
  return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&sa), len);
}

SocketAddress flow_vip(const rtce_flow_key& key) {
  sockaddr_storage sa;
  const socklen_t len = flow_vip_sockaddr(key, sa);
  return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&sa), len);
}

}  // namespace rtce
