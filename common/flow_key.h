// flow_key.h — the C++ side of the one flow key (wire/rtce_flow.h) and the role a relay
// plays for a flow: what the userspace relay, the XDP loader and the flow store share.
//
// A key is filled from the socket addresses a datagram came with, or read from a PROXY v2
// header (rtce_pp2_parse_key), once per datagram; the helpers here write its sides from and
// into sockaddrs without a SocketAddress in between. SocketAddress forms are for the
// colder paths (the flow store's text keys, logs, tests).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

#include "net_address.h"
#include "rtce_flow.h"
#include "rtce_relay_vocab.h"
#include "vocab.h"

namespace rtce {

// wire/rtce_relay_vocab.h RTCE_RELAY_FLOW_ROLES: local (this cluster's transceiver),
// ingress (another cluster's relay owns the flow), owner (a peer's ingress forwards it).
#define RTCE_FLOW_ROLE_(E, name) name = RTCE_RELAY_ROLE_##E,
enum class FlowRole : uint8_t { RTCE_RELAY_FLOW_ROLES(RTCE_FLOW_ROLE_) count = RTCE_RELAY_ROLE_COUNT };
#undef RTCE_FLOW_ROLE_
#define RTCE_VOCAB_VALUE_(E, name) FlowRole::name,
inline constexpr FlowRole kFlowRoles[] = {RTCE_RELAY_FLOW_ROLES(RTCE_VOCAB_VALUE_)};
#undef RTCE_VOCAB_VALUE_
inline const char* flow_role_name(FlowRole r) { return vocab_name(rtce_relay_flow_role_names, r); }

// Writes the client's (or the VIP's) side of `key` from a sockaddr_in or sockaddr_in6, its
// port as it is (network order), and the key's family from it.
void set_flow_client(rtce_flow_key& key, const sockaddr* client);
void set_flow_vip(rtce_flow_key& key, const sockaddr* vip);
// The client's (the VIP's) side of `key` as a sockaddr; returns its length.
socklen_t flow_client_sockaddr(const rtce_flow_key& key, sockaddr_storage& out);
socklen_t flow_vip_sockaddr(const rtce_flow_key& key, sockaddr_storage& out);

// A UDP flow's key from two addresses of one family.
rtce_flow_key make_flow_key(const SocketAddress& client, const SocketAddress& vip);
SocketAddress flow_client(const rtce_flow_key& key);
SocketAddress flow_vip(const rtce_flow_key& key);

}  // namespace rtce
