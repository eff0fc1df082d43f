/* rtce_flow.h — the flow key: what identifies one client's flow at a relay. The one key of
 * every flow table: the userspace relay's (loader/core/flow_table.h), the XDP program's
 * `flows` and `owner_via` maps, the flow recovery's waiting room and the Redis flow store
 * (docs/wire-format.md, "The flow key").
 *
 * A flow is the full (client addr:port, VIP addr:port, transport) triple, so two VIPs or
 * two clients behind one NAT address never share a flow. Ports are in network byte order,
 * as they sit in the packet, so the XDP program fills the key without conversions, and the
 * PROXY v2 header is read into it (rtce_pp2_parse_key, rtce_proxy_v2.h) and written from
 * it (rtce_pp2_write_key) with none either. Padding is explicit and zero: the key is
 * hashed and compared as bytes. */
#ifndef RTCE_FLOW_H
#define RTCE_FLOW_H

#include "rtce_types.h"

#define RTCE_FAMILY_V4 4
#define RTCE_FAMILY_V6 6

/* The transport of a flow. UDP is 0: the byte was padding before, so keys written by an
 * older loader into a pinned map read as UDP. ICE-TCP flows will carry TCP. */
enum rtce_transport {
	RTCE_TRANSPORT_UDP = 0,
	RTCE_TRANSPORT_TCP = 1,
};

struct rtce_flow_key {
	__u8 client_addr[16]; /* IPv4: first 4 bytes, rest zero */
	__u8 vip_addr[16];
	__u16 client_port_be;
	__u16 vip_port_be;
	__u8 family;	/* RTCE_FAMILY_V4 or RTCE_FAMILY_V6 */
	__u8 transport; /* enum rtce_transport */
	__u8 pad[2];
};

#ifdef __cplusplus
#include <cstddef>
#include <cstring>
#include <functional>
#include <string_view>

/* Byte equality and a hash, so the key keys any C++ table (std::unordered_map and the
 * like). Tables exposed to chosen keys use a keyed hash instead (rtce_siphash.h). */
inline bool operator==(const rtce_flow_key &a, const rtce_flow_key &b)
{
	return std::memcmp(&a, &b, sizeof a) == 0;
}

template <> struct std::hash<rtce_flow_key> {
	size_t operator()(const rtce_flow_key &key) const noexcept
	{
		return std::hash<std::string_view>{}(
			std::string_view(reinterpret_cast<const char *>(&key), sizeof key));
	}
};
#endif

#endif /* RTCE_FLOW_H */
