/* rtce_flow.h — the flow key: what identifies one client's flow at a relay. The same
 * bytes key the userspace relay's table, the XDP flow map and the Redis flow store.
 *
 * A flow is the full (client addr:port, VIP addr:port) pair, so two VIPs or two clients
 * behind one NAT address never share a flow. Ports are in network byte order, as they sit
 * in the packet, so the XDP program fills the key without conversions. */
#ifndef RTCE_FLOW_H
#define RTCE_FLOW_H

#include "rtce_types.h"

struct rtce_flow_key {
	__u8 client_addr[16]; /* IPv4: first 4 bytes, rest zero */
	__u8 vip_addr[16];
	__u16 client_port_be;
	__u16 vip_port_be;
	__u8 family; /* RTCE_FAMILY_V4 or RTCE_FAMILY_V6 (rtce_proxy_v2.h) */
	__u8 pad[3];
};

#endif /* RTCE_FLOW_H */
