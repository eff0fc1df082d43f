// SPDX-License-Identifier: GPL-2.0
/* rtce_xdp.bpf.c — rtcedge's XDP data path: the userspace relay (loader/core/relay_core.cpp)
 * in the NIC driver, with the same decisions and the same counter names. Three paths:
 *
 *   client -> VIP:port        (from_client) flow hit: prepend PROXY v2 (src = client,
 *                             dst = VIP), send from relay_addr:return_port to the flow's
 *                             endpoint. Flow miss: a STUN Binding request whose USERNAME
 *                             carries a valid hint creates the flow (first_packet), emits an
 *                             event and forwards as on a hit; a hint of another cluster goes
 *                             to that cluster's owner relay (the global relay: the flow's
 *                             role is ingress and its endpoint is the peer relay).
 *   endpoint -> relay_addr:return_port   (from_endpoint) PROXY v2 + payload of a known flow,
 *                             from that flow's endpoint: strip the header, send from the VIP
 *                             to the client (or re-frame it to the ingress relay the flow
 *                             came through).
 *   peer relay -> peers.listen   (from_peer) a flow a trusted ingress relay forwards with
 *                             PROXY v2: the owner side of the global relay. An owner flow
 *                             follows the peer that made it; only a check whose hint
 *                             verifies may create it or move it to another peer.
 *
 * Verdict policy ("nothing unknown is dropped silently"):
 *   - traffic that is not ours (not to a VIP:port, the return port or peers.listen) is
 *     XDP_PASS, untouched;
 *   - ours but beyond this program (IP options, fragments, IPv6 extension headers, PROXY v2
 *     TLVs, odd lengths, no neighbour yet, no flow-limit config, the new-flow budget spent,
 *     an endpoint the maps do not know, a failed map insert) is XDP_PASS untouched: the
 *     userspace relay listens on the same addresses and decides;
 *   - XDP_DROP only where no state outside this program could change the verdict:
 *       from a client: a Binding request whose hint does not verify (hint_rejected; the
 *         userspace relay drops it too, the hint codec is the same code), and a new flow past
 *         the per-hint or per-source-prefix flow limit (hint_flow_limit,
 *         source_prefix_flow_limit);
 *       from an endpoint: a malformed header, no such flow, or a flow of another endpoint
 *         (return_malformed, return_no_flow, return_wrong_sender), as the userspace relay's
 *         return socket does;
 *       from a peer: a sender outside peers.trusted, a malformed header, or a flow another
 *         peer owns without a verifying check (peer_untrusted, peer_malformed,
 *         peer_wrong_sender).
 *     A flow miss on a non-hint packet is PASSed, because userspace may own that flow.
 * Every exit counts exactly one reason (enum rtce_xdp_reason, wire/rtce_xdp.h): handlers
 * return a verdict that carries its reason, and rtce_xdp() counts it once, in per-CPU
 * arrays.
 *
 * Order: the common case first. fast_path() parses a plain frame (untagged, IPv4 without
 * options or fragments, or IPv6 whose next header is UDP) onto its stack and, for a client
 * datagram of an established flow, does one `flows` lookup, the rewrite and returns: no
 * per-CPU working memory, no VIP or endpoint lookup, the next hop from a per-endpoint cache
 * (endpoint_next_hop). Classification (the VIP check, the STUN walk, the hint) runs only on
 * a flow miss; return datagrams go straight to from_endpoint(). Everything else, and the
 * owner role, takes slow_path(): the full parse into struct work with the pass reasons.
 * Flow activity is the coarse clock, stored at most once a granularity (touch_flow).
 *
 * Rewrites are in place: bpf_xdp_adjust_head grows or shrinks the headroom by the size
 * difference of the headers (PROXY v2 added or removed; the outer IP family may change).
 * The payload never moves and is never read on the forward path, so the UDP checksum is
 * updated incrementally from the sender's: pseudo-header and UDP header swapped, PROXY v2
 * bytes added (or removed). Their lengths (28, 52) are even, so the payload's 16-bit word
 * alignment, and with it its checksum contribution, is unchanged. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "rtce_flow.h"
#include "rtce_flow_limit.h"
#include "rtce_hint.h"
#include "rtce_proxy_v2.h"
#include "rtce_stun.h"
#include "rtce_xdp.h"

#define AF_INET	 2
#define AF_INET6 10

#define IP_MF	  0x2000
#define IP_OFFSET 0x1fff
#define IP_DF	  0x4000

#define IPV6_EXT_HOPOPTS  0
#define IPV6_EXT_ROUTING  43
#define IPV6_EXT_FRAGMENT 44
#define IPV6_EXT_DSTOPTS  60
#define IPV6_MAX_EXT	  4

#define RELAY_TTL 64
/* Ethernet pads frames to 60 bytes: at most 46 bytes follow a short IP datagram. More than
 * that is not padding we understand. */
#define MAX_TRAILER 64

char _license[] SEC("license") = "GPL";

/* ---------------------------------------------------------------- maps */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RTCE_XDP_MAX_VIPS);
	__type(key, struct rtce_xdp_vip_key);
	__type(value, struct rtce_xdp_vip);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rtce_xdp_vip_ports);
} vip_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RTCE_XDP_MAX_ENDPOINTS);
	__type(key, __u16);
	__type(value, struct rtce_xdp_endpoint);
} endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RTCE_XDP_MAX_FLOWS);
	__type(key, struct rtce_flow_key);
	__type(value, struct rtce_xdp_flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rtce_xdp_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rtce_hint_keyset);
} hint_keys SEC(".maps");

/* Clusters this relay is an ingress for (the global relay): their relay and hint keys. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RTCE_XDP_MAX_CLUSTERS);
	__type(key, __u32);
	__type(value, struct rtce_xdp_peer_cluster);
} peer_clusters SEC(".maps");

/* The owner role (the global relay): where peers forward to, who may, and where each owner
 * flow's replies go back to. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rtce_xdp_peer_listen);
} peer_listen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, RTCE_XDP_MAX_TRUSTED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct rtce_xdp_trusted_key);
	__type(value, __u8);
} peer_trusted SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RTCE_XDP_MAX_OWNER_FLOWS);
	__type(key, struct rtce_flow_key);
	__type(value, struct rtce_xdp_endpoint);
} owner_via SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RTCE_XDP_ROLE_COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, struct rtce_xdp_counter);
} role_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RTCE_XDP_COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, struct rtce_xdp_counter);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RTCE_XDP_HINT_FAILURE_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} hint_failures SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rtce_xdp_budget);
} flow_budget SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rtce_xdp_flow_limit_config);
} flow_limit_config SEC(".maps");

/* Shared by all CPUs (not per-CPU): a replayed hint arrives on every RX queue. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RTCE_XDP_MAX_HINT_LIMITS);
	__type(key, struct rtce_hint_limit_key);
	__type(value, struct rtce_flow_limit);
} hint_flow_limits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RTCE_XDP_MAX_PREFIX_LIMITS);
	__type(key, struct rtce_prefix_limit_key);
	__type(value, struct rtce_flow_limit);
} prefix_flow_limits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rtce_xdp_scratch);
} stun_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RTCE_XDP_EVENTS_BYTES);
} events SEC(".maps");

/* ---------------------------------------------------------------- verdicts */

/* A handler's result: XDP action, reason and direction in one int, so that the single
 * exit in rtce_xdp() counts every path exactly once. */
#define VERDICT(action, reason, dir) ((int)(((reason) << 16) | ((dir) << 8) | (action)))
#define VERDICT_ACTION(v)	     ((v)&0xff)
#define VERDICT_DIR(v)		     (((v) >> 8) & 0xff)
#define VERDICT_REASON(v)	     (((v) >> 16) & 0xff)

static __always_inline __u64 frame_len(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;

	return (__u64)(data_end - data);
}

static __always_inline void count(__u32 reason, __u32 dir, __u64 bytes)
{
	__u32 idx = rtce_xdp_counter_index(reason, dir);
	struct rtce_xdp_counter *c = bpf_map_lookup_elem(&counters, &idx);

	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

static __always_inline void count_hint_failure(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&hint_failures, &slot);

	if (c)
		(*c)++;
}

/* ---------------------------------------------------------------- parsed packet */

struct pkt {
	__u8 family; /* RTCE_FAMILY_V4 / V6 of the outer IP header */
	__u8 vlan;   /* one 802.1Q tag present */
	__u8 tos;    /* IPv4 TOS / IPv6 traffic class, carried over */
	__u8 pad;
	__be16 vlan_tci;
	__be16 sport;
	__be16 dport;
	__u16 udp_len;	/* host order, validated against the IP length */
	__u16 udp_csum; /* as in the packet (0 = none, IPv4 only) */
	__u16 pad2;
	__u32 l3_off;  /* 14 or 18 */
	__u32 l4_off;  /* l3_off + 20 or 40 */
	__u32 trailer; /* bytes after the IP datagram (Ethernet padding) */
	__u8 saddr[16];
	__u8 daddr[16];
	/* The received MACs are not kept: the output's come from the fib or the config. */
};

static __always_inline __u32 iphdr_len(__u8 family)
{
	return family == RTCE_FAMILY_V6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);
}

/* Map keys and addresses built per packet are copied in 32-bit words, not bytes: the
 * stack keys are declared 8-aligned and the addresses they are copied from (struct pkt,
 * struct out_hdrs, config and map values) are 4-aligned, which the compiler cannot see
 * through a `const __u8 *` parameter without being told (ALIGNED4). */
#define STACK_KEY     __attribute__((aligned(8)))
#define ALIGNED4(ptr) __builtin_assume_aligned(ptr, 4)
/* MACs: struct out_hdrs and config fields at even offsets, and the frame (see write_headers) */
#define ALIGNED2(ptr) __builtin_assume_aligned(ptr, 2)

/* 16-byte address compare, a word at a time; both are 4-aligned (see ALIGNED4). */
static __always_inline int addr_eq(const __u8 *a, const __u8 *b)
{
	const __u32 *x = ALIGNED4(a), *y = ALIGNED4(b);

	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
}

static __always_inline int is_vip(__u8 family, const __u8 *addr, __be16 port)
{
	struct rtce_xdp_vip_key key STACK_KEY = {};

	key.family = family;
	key.port_be = port;
	__builtin_memcpy(key.addr, ALIGNED4(addr), 16);
	return bpf_map_lookup_elem(&vips, &key) != 0;
}

static __always_inline int on_vip_port(__be16 port_be)
{
	__u32 zero = 0;
	const struct rtce_xdp_vip_ports *ports = bpf_map_lookup_elem(&vip_ports, &zero);
	__u16 port = bpf_ntohs(port_be);

	return ports && ((ports->bits[(port >> 6) & 1023] >> (port & 63)) & 1);
}

static __always_inline const __u8 *relay_addr(const struct rtce_xdp_config *cfg, __u8 family)
{
	if (family == RTCE_FAMILY_V6)
		return (cfg->flags & RTCE_XDP_F_HAVE_V6) ? cfg->relay_addr6 : 0;
	return (cfg->flags & RTCE_XDP_F_HAVE_V4) ? cfg->relay_addr4 : 0;
}

static __always_inline int is_return_port(const struct rtce_xdp_config *cfg, __u8 family,
					  const __u8 *addr, __be16 port)
{
	__u8 a[16] STACK_KEY = {};
	const __u8 *own;

	if (!cfg->return_port_be || port != cfg->return_port_be)
		return 0;
	own = relay_addr(cfg, family);
	if (!own)
		return 0;
	if (family == RTCE_FAMILY_V6)
		__builtin_memcpy(a, ALIGNED4(own), 16);
	else
		__builtin_memcpy(a, ALIGNED4(own), 4);
	return addr_eq(a, addr);
}

/* Which counter a packet we will not handle should land on: a pass reason if it targets a
 * VIP or the return port, pass_not_ours otherwise. */
static __always_inline int pass_if_ours(const struct rtce_xdp_config *cfg, __u8 family,
					const __u8 *daddr, __be16 dport, __u32 reason)
{
	if (is_return_port(cfg, family, daddr, dport))
		return VERDICT(XDP_PASS, reason, RTCE_XDP_DIR_TO_CLIENT);
	if (is_vip(family, daddr, dport))
		return VERDICT(XDP_PASS, reason, RTCE_XDP_DIR_TO_TRANSCEIVER);
	return VERDICT(XDP_PASS, RTCE_XDP_PASS_NOT_OURS, RTCE_XDP_DIR_TO_TRANSCEIVER);
}

/* first_packet()'s "route it to w->ep" result: not an XDP action, never returned by the
 * program. Its caller forwards, which keeps the call chain (and stack) one level short. */
#define ACT_FORWARD 0xff

#define NOT_OURS VERDICT(XDP_PASS, RTCE_XDP_PASS_NOT_OURS, RTCE_XDP_DIR_TO_TRANSCEIVER)

/* Reads the UDP destination port at l4_off (for the pass-reason bookkeeping of packets we
 * do not parse further). Returns 0 when there is no room for a UDP header. */
static __always_inline __be16 peek_dport(struct xdp_md *ctx, __u32 l4_off)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct udphdr *udp;

	if (l4_off > 1024)
		return 0;
	udp = data + l4_off;
	if ((void *)(udp + 1) > data_end)
		return 0;
	return udp->dest;
}

/* Ethernet, optionally one 802.1Q tag. Returns the EtherType of the L3 header, or 0 for
 * what is not ours (QinQ, 802.1ad, truncated). */
static __always_inline __be16 parse_l2(struct xdp_md *ctx, struct pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be16 proto;

	if ((void *)(eth + 1) > data_end)
		return 0;
	proto = eth->h_proto;
	p->l3_off = sizeof(*eth);
	if (proto == bpf_htons(ETH_P_8021Q)) {
		__be16 *tag = (void *)(eth + 1);

		if ((void *)(tag + 2) > data_end)
			return 0;
		p->vlan = 1;
		p->vlan_tci = tag[0];
		proto = tag[1];
		p->l3_off += 4;
		if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD))
			return 0; /* QinQ: not ours */
	}
	return proto;
}

/* IPv4 header and UDP ports. Returns 0 when the packet is a candidate for us (plain
 * 20-byte header, not a fragment, UDP), else the verdict to return. */
static __always_inline int parse_ipv4(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
				      struct pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *iph = data + p->l3_off;
	struct udphdr *udp;
	__u32 tot_len, pkt_len;

	if (p->l3_off > 18 || (void *)(iph + 1) > data_end)
		return NOT_OURS;
	if (iph->version != 4 || iph->ihl < 5 || iph->protocol != IPPROTO_UDP)
		return NOT_OURS;
	p->family = RTCE_FAMILY_V4;
	__builtin_memcpy(p->saddr, &iph->saddr, 4);
	__builtin_memcpy(p->daddr, &iph->daddr, 4);
	if (iph->frag_off & bpf_htons(IP_OFFSET))
		return NOT_OURS; /* a later fragment: no UDP header to tell */
	if (iph->frag_off & bpf_htons(IP_MF))
		return pass_if_ours(cfg, p->family, p->daddr,
				    peek_dport(ctx, p->l3_off + iph->ihl * 4),
				    RTCE_XDP_PASS_FRAGMENT);
	if (iph->ihl != 5)
		return pass_if_ours(cfg, p->family, p->daddr,
				    peek_dport(ctx, p->l3_off + iph->ihl * 4),
				    RTCE_XDP_PASS_IP_OPTIONS);
	p->l4_off = p->l3_off + sizeof(*iph);
	udp = (void *)(iph + 1);
	if ((void *)(udp + 1) > data_end)
		return NOT_OURS;
	p->tos = iph->tos;
	p->sport = udp->source;
	p->dport = udp->dest;
	p->udp_len = bpf_ntohs(udp->len);
	p->udp_csum = udp->check;
	tot_len = bpf_ntohs(iph->tot_len);
	pkt_len = (__u32)(data_end - data);
	if (tot_len < sizeof(*iph) + sizeof(*udp) || p->l3_off + tot_len > pkt_len ||
	    p->udp_len != tot_len - sizeof(*iph))
		return pass_if_ours(cfg, p->family, p->daddr, p->dport, RTCE_XDP_PASS_BAD_LENGTH);
	p->trailer = pkt_len - p->l3_off - tot_len;
	if (p->trailer > MAX_TRAILER)
		return pass_if_ours(cfg, p->family, p->daddr, p->dport, RTCE_XDP_PASS_BAD_LENGTH);
	return 0;
}

/* IPv6 header and UDP ports; extension headers are walked (bounded) only to name the pass
 * reason of packets that carry them. */
static __always_inline int parse_ipv6(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
				      struct pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ipv6hdr *ip6h = data + p->l3_off;
	struct udphdr *udp;
	__u32 pkt_len, off, i, reason = RTCE_XDP_PASS_IPV6_EXT;
	__u8 next;

	if (p->l3_off > 18 || (void *)(ip6h + 1) > data_end)
		return NOT_OURS;
	if (ip6h->version != 6)
		return NOT_OURS;
	p->family = RTCE_FAMILY_V6;
	__builtin_memcpy(p->saddr, &ip6h->saddr, 16);
	__builtin_memcpy(p->daddr, &ip6h->daddr, 16);
	next = ip6h->nexthdr;
	if (next != IPPROTO_UDP) {
		off = p->l3_off + sizeof(*ip6h);
#pragma unroll
		for (i = 0; i < IPV6_MAX_EXT; i++) {
			__u8 *ext = data + (off & 0x7ff);

			if (next != IPV6_EXT_HOPOPTS && next != IPV6_EXT_ROUTING &&
			    next != IPV6_EXT_FRAGMENT && next != IPV6_EXT_DSTOPTS)
				break;
			if ((void *)(ext + 8) > data_end)
				return NOT_OURS;
			if (next == IPV6_EXT_FRAGMENT) {
				if (rtce_load_be16(ext + 2) & 0xfff8)
					return NOT_OURS; /* a later fragment */
				reason = RTCE_XDP_PASS_FRAGMENT;
				off += 8;
			} else {
				off += ((__u32)ext[1] + 1) * 8;
			}
			next = ext[0];
			if (off > 1024)
				return NOT_OURS;
		}
		if (next != IPPROTO_UDP)
			return NOT_OURS;
		return pass_if_ours(cfg, p->family, p->daddr, peek_dport(ctx, off), reason);
	}
	p->l4_off = p->l3_off + sizeof(*ip6h);
	udp = (void *)(ip6h + 1);
	if ((void *)(udp + 1) > data_end)
		return NOT_OURS;
	p->tos = (__u8)(ip6h->priority << 4 | ip6h->flow_lbl[0] >> 4);
	p->sport = udp->source;
	p->dport = udp->dest;
	p->udp_len = bpf_ntohs(udp->len);
	p->udp_csum = udp->check;
	pkt_len = (__u32)(data_end - data);
	if (p->udp_len < sizeof(*udp) || p->udp_len != bpf_ntohs(ip6h->payload_len) ||
	    p->l4_off + p->udp_len > pkt_len)
		return pass_if_ours(cfg, p->family, p->daddr, p->dport, RTCE_XDP_PASS_BAD_LENGTH);
	p->trailer = pkt_len - p->l4_off - p->udp_len;
	if (p->trailer > MAX_TRAILER)
		return pass_if_ours(cfg, p->family, p->daddr, p->dport, RTCE_XDP_PASS_BAD_LENGTH);
	return 0;
}

/* ---------------------------------------------------------------- output headers */

/* The outer headers of a datagram we emit, plus the checksum state to go with them. */
struct out_hdrs {
	__u8 family;
	__u8 tos;
	__be16 sport;
	__be16 dport;
	__u16 udp_len; /* host order */
	__u8 saddr[16];
	__u8 daddr[16];
	__u8 smac[6];
	__u8 dmac[6];
	__u32 ifindex; /* output device (fib), 0 = XDP_TX */
};

/* Per-CPU working memory for one packet: the BPF stack (512 bytes across all calls) is
 * too small to hold these next to the call chain. Nothing in it outlives the packet. */
struct work {
	struct pkt p;
	struct out_hdrs o;
	__u8 ret_hdr[64]; /* copy of a return datagram's PROXY v2 header */
	/* where first_packet() routes the datagram; aligned for ALIGNED4 copies */
	struct rtce_xdp_endpoint ep __attribute__((aligned(8)));
	/* the peer relay a peers.listen datagram came from (owner role) */
	struct rtce_xdp_endpoint via __attribute__((aligned(8)));
	__u32 peer_off; /* owner role: PROXY v2 bytes before the client's datagram, else 0 */
	__u8 role;	/* enum rtce_relay_flow_role of the flow the packet belongs to */
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct work);
} work SEC(".maps");

/* ---------------------------------------------------------------- checksums
 *
 * Open-coded ones'-complement arithmetic instead of bpf_csum_diff: the few words that
 * change are summed in registers, which costs a handful of instructions where each helper
 * call cost a call plus a loop over a stack buffer (three to four calls per packet were
 * about a third of a flow hit's time). Words are loaded as they lie in memory and the
 * result is stored the same way; a ones'-complement sum does not depend on byte order
 * (RFC 1071 section 2(B)), so no byte swapping is needed. Sums of 32-bit words are
 * accumulated in 64 bits and folded once at the end. */

/* Folds a 64-bit accumulator of 16/32-bit words into 16 bits (end-around carry). */
static __always_inline __u16 csum_fold64(__u64 s)
{
	s = (s & 0xffffffffULL) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* Sum of an address's 32-bit words: 4 bytes for IPv4, 16 for IPv6. */
static __always_inline __u64 csum_addr(const __u8 *a, __u8 family)
{
	__u32 w0, w1, w2, w3;

	a = ALIGNED4(a); /* struct pkt / struct out_hdrs fields */
	__builtin_memcpy(&w0, a, 4);
	if (family != RTCE_FAMILY_V6)
		return w0;
	__builtin_memcpy(&w1, a + 4, 4);
	__builtin_memcpy(&w2, a + 8, 4);
	__builtin_memcpy(&w3, a + 12, 4);
	return (__u64)w0 + w1 + w2 + w3;
}

/* Sum of the PROXY v2 header's bytes that do not depend on the flow: the signature,
 * ver/cmd, family and address-block length (rtce_pp2_write in wire/rtce_proxy_v2.h).
 * Constants, folded by the compiler. */
#define PP2_SIG_WORDS_SUM                                                                          \
	((__u32)bpf_htons(0x0d0a) + bpf_htons(0x0d0a) + bpf_htons(0x000d) + bpf_htons(0x0a51) +    \
	 bpf_htons(0x5549) + bpf_htons(0x540a))
static __always_inline __u64 csum_pp2_fixed(__u8 family)
{
	if (family == RTCE_FAMILY_V6)
		return PP2_SIG_WORDS_SUM +
		       bpf_htons(RTCE_PP2_VER_CMD_PROXY << 8 | RTCE_PP2_FAM_INET6_DGRAM) +
		       bpf_htons(RTCE_PP2_ADDR_LEN_V6);
	return PP2_SIG_WORDS_SUM +
	       bpf_htons(RTCE_PP2_VER_CMD_PROXY << 8 | RTCE_PP2_FAM_INET_DGRAM) +
	       bpf_htons(RTCE_PP2_ADDR_LEN_V4);
}

/* Sum of the endpoint-side addresses and ports of a datagram (relay <-> endpoint). */
static __always_inline __u64 csum_outer(__u8 family, const __u8 *saddr, const __u8 *daddr,
					__be16 sport, __be16 dport)
{
	return csum_addr(saddr, family) + csum_addr(daddr, family) + sport + dport;
}

/* New UDP checksum from the sender's (RFC 1624 eqn. 3: ~(~old + removed' + added)).
 *
 * What the sender's checksum covered in front of the payload is its pseudo-header (RFC 768 /
 * RFC 8200 section 8.1: addresses, protocol, length) and its UDP header (ports, length);
 * both are replaced, and the PROXY v2 header is added (forward, add = 1) or removed
 * (return, add = 0). The PROXY v2 header carries exactly the client-side addresses and
 * ports (client, VIP), which are also what the client-side pseudo-header and UDP header
 * carry, so those contributions cancel and only these words remain:
 *   forward: + fixed PROXY v2 bytes + endpoint-side addresses/ports (o) + new length x2
 *            - old length x2
 *   return:  - fixed PROXY v2 bytes - endpoint-side addresses/ports (p) - old length x2
 *            + new length x2
 * The protocol word is the same in both pseudo-headers and IPv4's and IPv6's pseudo-header
 * layouts sum alike (their 32-bit length and next header are a zero word plus the 16-bit
 * value), so a family change needs nothing more. The payload is unchanged and keeps its
 * 16-bit alignment (PROXY v2 lengths 28 and 52 are even). `pp_family` is the family in the
 * PROXY v2 header (the client's). Returns the field value to write. */
static __always_inline __u16 udp_csum_update(const struct pkt *p, const struct out_hdrs *o,
					     __u8 pp_family, int add)
{
	/* Subtracting x in ones' complement is adding ~x: keep the subtrahends apart and
	 * complement their folded sum once. */
	__u64 plus = (__u16)~p->udp_csum; /* everything the sender covered */
	__u64 minus;
	__u16 c;

	plus += 2 * (__u32)bpf_htons(o->udp_len);
	minus = 2 * (__u32)bpf_htons(p->udp_len);
	if (add)
		plus += csum_pp2_fixed(pp_family) +
			csum_outer(o->family, o->saddr, o->daddr, o->sport, o->dport);
	else
		minus += csum_pp2_fixed(pp_family) +
			 csum_outer(p->family, p->saddr, p->daddr, p->sport, p->dport);
	plus += (__u16)~csum_fold64(minus);
	c = (__u16)~csum_fold64(plus);
	return c ? c : 0xffff; /* 0 means "no checksum" in UDP; send its other form */
}

/* New UDP checksum when only the outer headers change (the owner role: a peer's framed
 * datagram goes on to the transceiver, or a reply back to the peer, byte for byte): the
 * addresses and ports of the pseudo-header and UDP header are swapped, the length and the
 * payload stay. RFC 1624 eqn. 3 as above. */
static __always_inline __u16 udp_csum_reframe(const struct pkt *p, const struct out_hdrs *o)
{
	__u64 plus = (__u16)~p->udp_csum;
	__u64 minus = csum_outer(p->family, p->saddr, p->daddr, p->sport, p->dport);
	__u16 c;

	plus += csum_outer(o->family, o->saddr, o->daddr, o->sport, o->dport);
	plus += (__u16)~csum_fold64(minus);
	c = (__u16)~csum_fold64(plus);
	return c ? c : 0xffff;
}

/* IPv4 header checksum of the header write_headers() writes: version/IHL/TOS, total
 * length, ID 0, DF, TTL/protocol, addresses (the checksum field itself counts as 0). */
static __always_inline __u16 ipv4_csum(__u8 tos, __u16 tot_len, const __u8 *saddr,
				       const __u8 *daddr)
{
	__u64 s = (__u32)bpf_htons(0x4500 | tos) + bpf_htons(tot_len) + bpf_htons(IP_DF) +
		  bpf_htons(RELAY_TTL << 8 | IPPROTO_UDP);

	s += csum_addr(saddr, RTCE_FAMILY_V4) + csum_addr(daddr, RTCE_FAMILY_V4);
	return (__u16)~csum_fold64(s);
}

/* Next hop for o. Fills the MACs and output ifindex, or returns the pass verdict. Runs
 * before the packet is touched, so a failure passes the original datagram up: the
 * userspace relay forwards it from its socket, which also makes the kernel resolve the
 * neighbour for the next packets. */
static __noinline int fib_next_hop(struct xdp_md *ctx, const struct pkt *p, struct out_hdrs *o,
				   __u32 dir)
{
	struct bpf_fib_lookup fib = {};
	long rc;

	fib.l4_protocol = IPPROTO_UDP;
	fib.sport = o->sport;
	fib.dport = o->dport;
	fib.tot_len = (__u16)(iphdr_len(o->family) + o->udp_len);
	fib.ifindex = ctx->ingress_ifindex;
	if (o->family == RTCE_FAMILY_V6) {
		fib.family = AF_INET6;
		fib.flowinfo = bpf_htonl((__u32)o->tos << 20);
		__builtin_memcpy(fib.ipv6_src, o->saddr, 16);
		__builtin_memcpy(fib.ipv6_dst, o->daddr, 16);
	} else {
		fib.family = AF_INET;
		fib.tos = o->tos;
		__builtin_memcpy(&fib.ipv4_src, o->saddr, 4);
		__builtin_memcpy(&fib.ipv4_dst, o->daddr, 4);
	}
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_NO_NEIGH, dir);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_FIB_FAILED, dir);
	/* A tagged frame keeps its tag, which is only right on the link it came from. */
	if (p->vlan && fib.ifindex != ctx->ingress_ifindex)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_FIB_FAILED, dir);
	__builtin_memcpy(o->smac, fib.smac, 6);
	__builtin_memcpy(o->dmac, fib.dmac, 6);
	o->ifindex = fib.ifindex == ctx->ingress_ifindex ? 0 : fib.ifindex;
	return 0;
}

/* The fixed next hop of the test fixtures inline, the fib lookup (64 bytes of stack) in a
 * function of its own. */
static __always_inline int next_hop(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
				    const struct pkt *p, struct out_hdrs *o, __u32 dir)
{
	if (cfg->flags & RTCE_XDP_F_SKIP_FIB) {
		__builtin_memcpy(ALIGNED2(o->smac), ALIGNED2(cfg->fixed_src_mac), 6);
		__builtin_memcpy(ALIGNED2(o->dmac), ALIGNED2(cfg->fixed_dst_mac), 6);
		o->ifindex = 0;
		return 0;
	}
	return fib_next_hop(ctx, p, o, dir);
}

/* ---------------------------------------------------------------- next-hop cache
 *
 * Towards endpoints the fib lookup's answer depends on the endpoint, not on the flow: a
 * transceiver's thousands of flows share one next hop, and bpf_fib_lookup was a third of a
 * flow hit's time (bench/xdp_prog_cost, live frames). So its result is kept per endpoint,
 * per CPU (a CPU only ever rewrites its own copy: no torn entry, no lock), together with
 * everything the lookup was asked (addresses, ports, TOS, ingress device): an entry serves
 * a datagram only when all of these are equal, the datagram is no longer than the one the
 * lookup passed (the MTU check), and the entry is younger than the activity granularity
 * (1 s by default): a route or neighbour change reaches the forward path within that. A
 * lookup that fails is not cached (the datagram is passed up as before). Direct-mapped: two
 * endpoints on one slot only cost lookups. Not pinned: a new program starts empty. */
#define HOP_CACHE_SLOTS 1024

struct hop_entry {
	__u8 daddr[16];
	__u8 saddr[16];
	__be16 sport;
	__be16 dport;
	__u8 family;
	__u8 tos;
	__u16 max_tot_len; /* the datagram the lookup passed */
	__u32 ingress_ifindex;
	__u32 ifindex; /* the fib's output device */
	__u8 smac[6];
	__u8 dmac[6];
	__u64 resolved_ns; /* bpf_ktime_get_coarse_ns; 0 = empty */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HOP_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct hop_entry);
} hop_cache SEC(".maps");

static __always_inline __u64 activity_granularity(const struct rtce_xdp_config *cfg)
{
	return cfg->last_seen_granularity_ns ? cfg->last_seen_granularity_ns
					     : RTCE_XDP_DEFAULT_LAST_SEEN_GRANULARITY_NS;
}

static __always_inline __u32 hop_slot(const struct out_hdrs *o)
{
	const __u32 *a = ALIGNED4(o->daddr);
	__u32 x = a[0] ^ a[1] ^ a[2] ^ a[3] ^ o->dport;

	x ^= x >> 16;
	x *= 0x45d9f3bU;
	x ^= x >> 16;
	return x & (HOP_CACHE_SLOTS - 1);
}

static __always_inline int hop_matches(const struct hop_entry *h, struct xdp_md *ctx,
				       const struct out_hdrs *o, __u16 tot_len)
{
	return h->family == o->family && h->tos == o->tos && h->sport == o->sport &&
	       h->dport == o->dport && h->ingress_ifindex == ctx->ingress_ifindex &&
	       tot_len <= h->max_tot_len && addr_eq(h->daddr, o->daddr) &&
	       addr_eq(h->saddr, o->saddr);
}

/* next_hop() towards an endpoint, through the cache. `now`: bpf_ktime_get_coarse_ns(). */
static __always_inline int endpoint_next_hop(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
					     const struct pkt *p, struct out_hdrs *o, __u32 dir,
					     __u64 now)
{
	__u16 tot_len = (__u16)(iphdr_len(o->family) + o->udp_len);
	struct hop_entry *h;
	__u32 slot;
	int v;

	if (cfg->flags & RTCE_XDP_F_SKIP_FIB)
		return next_hop(ctx, cfg, p, o, dir);
	slot = hop_slot(o);
	h = bpf_map_lookup_elem(&hop_cache, &slot);
	if (h && h->resolved_ns &&
	    (__s64)(now - h->resolved_ns) < (__s64)activity_granularity(cfg) &&
	    hop_matches(h, ctx, o, tot_len)) {
		/* A tagged frame keeps its tag, which is only right on the link it came from. */
		if (p->vlan && h->ifindex != ctx->ingress_ifindex)
			return VERDICT(XDP_PASS, RTCE_XDP_PASS_FIB_FAILED, dir);
		__builtin_memcpy(ALIGNED2(o->smac), ALIGNED2(h->smac), 6);
		__builtin_memcpy(ALIGNED2(o->dmac), ALIGNED2(h->dmac), 6);
		o->ifindex = h->ifindex == ctx->ingress_ifindex ? 0 : h->ifindex;
		return 0;
	}
	v = fib_next_hop(ctx, p, o, dir);
	if (v || !h)
		return v;
	__builtin_memcpy(h->daddr, ALIGNED4(o->daddr), 16);
	__builtin_memcpy(h->saddr, ALIGNED4(o->saddr), 16);
	h->sport = o->sport;
	h->dport = o->dport;
	h->family = o->family;
	h->tos = o->tos;
	h->max_tot_len = tot_len;
	h->ingress_ifindex = ctx->ingress_ifindex;
	h->ifindex = o->ifindex ? o->ifindex : ctx->ingress_ifindex;
	__builtin_memcpy(ALIGNED2(h->smac), ALIGNED2(o->smac), 6);
	__builtin_memcpy(ALIGNED2(h->dmac), ALIGNED2(o->dmac), 6);
	h->resolved_ns = now ? now : 1;
	return 0;
}

/* Writes Ethernet (+ tag), IP and UDP headers at the (already adjusted) packet start.
 * Returns the offset where the UDP payload starts, or -1. */
static __always_inline int write_headers(struct xdp_md *ctx, const struct pkt *p,
					 const struct out_hdrs *o, __u16 udp_csum)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be16 proto = bpf_htons(o->family == RTCE_FAMILY_V6 ? ETH_P_IPV6 : ETH_P_IP);
	__u32 l3 = sizeof(*eth);
	struct udphdr *udp;

	if ((void *)(eth + 1) > data_end)
		return -1;
	/* 16-bit stores: the frame starts 2-aligned (headroom and every header length are
	 * even), and packet access need not be aligned where the verifier allows it. */
	__builtin_memcpy(ALIGNED2(eth->h_dest), ALIGNED2(o->dmac), 6);
	__builtin_memcpy(ALIGNED2(eth->h_source), ALIGNED2(o->smac), 6);
	if (p->vlan) {
		__be16 *tag = (void *)(eth + 1);

		if ((void *)(tag + 2) > data_end)
			return -1;
		eth->h_proto = bpf_htons(ETH_P_8021Q);
		tag[0] = p->vlan_tci;
		tag[1] = proto;
		l3 += 4;
	} else {
		eth->h_proto = proto;
	}

	if (o->family == RTCE_FAMILY_V6) {
		struct ipv6hdr *ip6h = data + l3;

		if ((void *)(ip6h + 1) > data_end)
			return -1;
		*(__be32 *)ip6h = bpf_htonl(6U << 28 | (__u32)o->tos << 20);
		ip6h->payload_len = bpf_htons(o->udp_len);
		ip6h->nexthdr = IPPROTO_UDP;
		ip6h->hop_limit = RELAY_TTL;
		__builtin_memcpy(&ip6h->saddr, o->saddr, 16);
		__builtin_memcpy(&ip6h->daddr, o->daddr, 16);
		udp = (void *)(ip6h + 1);
	} else {
		struct iphdr *iph = data + l3;

		if ((void *)(iph + 1) > data_end)
			return -1;
		iph->version = 4;
		iph->ihl = 5;
		iph->tos = o->tos;
		iph->tot_len = bpf_htons((__u16)(sizeof(*iph) + o->udp_len));
		iph->id = 0; /* DF set: no fragmentation, so no ID needed (RFC 6864) */
		iph->frag_off = bpf_htons(IP_DF);
		iph->ttl = RELAY_TTL;
		iph->protocol = IPPROTO_UDP;
		iph->check =
			ipv4_csum(o->tos, (__u16)(sizeof(*iph) + o->udp_len), o->saddr, o->daddr);
		__builtin_memcpy(&iph->saddr, o->saddr, 4);
		__builtin_memcpy(&iph->daddr, o->daddr, 4);
		udp = (void *)(iph + 1);
	}
	if ((void *)(udp + 1) > data_end)
		return -1;
	udp->source = o->sport;
	udp->dest = o->dport;
	udp->len = bpf_htons(o->udp_len);
	udp->check = udp_csum;
	return (int)((void *)(udp + 1) - data);
}

static __always_inline int emit(const struct out_hdrs *o, __u32 reason, __u32 dir)
{
	if (!o->ifindex)
		return VERDICT(XDP_TX, reason, dir);
	return VERDICT(bpf_redirect(o->ifindex, 0), reason, dir);
}

/* Drops Ethernet padding after the IP datagram so the rewritten frame ends with it. */
static __always_inline int trim_trailer(struct xdp_md *ctx, const struct pkt *p)
{
	if (!p->trailer)
		return 0;
	return bpf_xdp_adjust_tail(ctx, -(int)(p->trailer & 0xff));
}

/* ---------------------------------------------------------------- client -> endpoint */

/* Writes the PROXY v2 header naming p's flow (src = client, dst = VIP) at h: the bytes
 * rtce_pp2_write (wire/rtce_proxy_v2.h) writes, as 32-bit constant and address stores
 * straight into the packet. Building it byte by byte in a buffer and copying it (the
 * packet offset is only 2-aligned, so the copy was bytewise too) was 60-110 single-byte
 * loads and stores per packet. The stores may be unaligned: the JIT emits plain stores,
 * which x86 and the other arches with efficient unaligned access (where the verifier does
 * not require aligned packet access) perform at full speed. Ports are in network order
 * in both p and the header. */
static __always_inline void pp2_store(__u8 *h, const struct pkt *p, __u8 family)
{
	__u32 *w = (__u32 *)h;
	const __u32 *s = (const __u32 *)p->saddr, *d = (const __u32 *)p->daddr;

	w[0] = bpf_htonl(0x0d0a0d0a); /* signature: 0d 0a 0d 0a 00 0d 0a 51 55 49 54 0a */
	w[1] = bpf_htonl(0x000d0a51);
	w[2] = bpf_htonl(0x5549540a);
	if (family == RTCE_FAMILY_V6) {
		w[3] = bpf_htonl((__u32)RTCE_PP2_VER_CMD_PROXY << 24 |
				 (__u32)RTCE_PP2_FAM_INET6_DGRAM << 16 | RTCE_PP2_ADDR_LEN_V6);
		w[4] = s[0];
		w[5] = s[1];
		w[6] = s[2];
		w[7] = s[3];
		w[8] = d[0];
		w[9] = d[1];
		w[10] = d[2];
		w[11] = d[3];
		*(__be16 *)(h + 48) = p->sport;
		*(__be16 *)(h + 50) = p->dport;
	} else {
		w[3] = bpf_htonl((__u32)RTCE_PP2_VER_CMD_PROXY << 24 |
				 (__u32)RTCE_PP2_FAM_INET_DGRAM << 16 | RTCE_PP2_ADDR_LEN_V4);
		w[4] = s[0];
		w[5] = d[0];
		*(__be16 *)(h + 24) = p->sport;
		*(__be16 *)(h + 26) = p->dport;
	}
}

/* Frames the datagram for ep: PROXY v2 (src = client, dst = VIP) in front of the payload,
 * outer relay_addr:return_port -> endpoint. Inlined into the flow-hit fast path (p and o on
 * its stack) and into forward_to_endpoint (p and o in struct work). */
static __always_inline int forward_frame(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
					 const struct pkt *p, struct out_hdrs *o,
					 const struct rtce_xdp_endpoint *ep, __u32 reason,
					 __u64 now)
{
	const __u32 dir = RTCE_XDP_DIR_TO_TRANSCEIVER;
	const __u8 *own;
	__u32 pp_len, pp_off;
	__u16 csum = 0;
	int delta, v, off;
	void *data, *data_end;

	if (ep->family != RTCE_FAMILY_V4 && ep->family != RTCE_FAMILY_V6)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_NO_RELAY_ADDR, dir);
	own = relay_addr(cfg, ep->family);
	if (!own)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_NO_RELAY_ADDR, dir);
	/* Without a sender checksum there is nothing to update: IPv4 may carry none, IPv6
	 * must (RFC 8200), so userspace computes it from scratch. */
	if (!p->udp_csum && ep->family == RTCE_FAMILY_V6)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_ZERO_CSUM, dir);

	/* p->family is V4 or V6 (parse_ipv4/parse_ipv6 set nothing else). */
	pp_len = rtce_pp2_header_len(p->family);
	__builtin_memset(o, 0, sizeof(*o));
	if ((__u32)p->udp_len + pp_len > 0xffff - sizeof(struct ipv6hdr))
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_BAD_LENGTH, dir);

	o->family = ep->family;
	o->tos = p->tos;
	o->sport = cfg->return_port_be;
	o->dport = ep->port_be;
	o->udp_len = (__u16)(p->udp_len + pp_len);
	/* own: config field; ep: a map value or work.ep, all 4-aligned */
	if (ep->family == RTCE_FAMILY_V6)
		__builtin_memcpy(o->saddr, ALIGNED4(own), 16);
	else
		__builtin_memcpy(o->saddr, ALIGNED4(own), 4);
	__builtin_memcpy(o->daddr, ALIGNED4(ep->addr), 16);
	v = endpoint_next_hop(ctx, cfg, p, o, dir, now);
	if (v)
		return v;
	if (p->udp_csum)
		csum = udp_csum_update(p, o, p->family, 1);

	/* From here on the packet changes; a failing helper can only leave it half-written,
	 * so such a packet is aborted rather than passed. */
	if (trim_trailer(ctx, p))
		return VERDICT(XDP_ABORTED, RTCE_XDP_ABORTED, dir);
	delta = (int)(iphdr_len(p->family) + sizeof(struct udphdr)) -
		(int)(iphdr_len(o->family) + sizeof(struct udphdr) + pp_len);
	if (bpf_xdp_adjust_head(ctx, delta))
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);
	off = write_headers(ctx, p, o, csum);
	if (off < 0)
		return VERDICT(XDP_ABORTED, RTCE_XDP_ABORTED, dir);

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	pp_off = (__u32)off & 0x7f;
	if (pp_len == RTCE_PP2_LEN_V6) {
		if (data + pp_off + RTCE_PP2_LEN_V6 > data_end)
			return VERDICT(XDP_ABORTED, RTCE_XDP_ABORTED, dir);
		pp2_store(data + pp_off, p, RTCE_FAMILY_V6);
	} else {
		if (data + pp_off + RTCE_PP2_LEN_V4 > data_end)
			return VERDICT(XDP_ABORTED, RTCE_XDP_ABORTED, dir);
		pp2_store(data + pp_off, p, RTCE_FAMILY_V4);
	}
	return emit(o, reason, dir);
}

/* forward_frame for the paths that keep the packet in struct work (first packets). */
static __noinline int forward_to_endpoint(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
					  struct work *w, const struct rtce_xdp_endpoint *ep,
					  __u32 reason)
{
	return forward_frame(ctx, cfg, &w->p, &w->o, ep, reason, bpf_ktime_get_coarse_ns());
}

/* ---------------------------------------------------------------- owner role */

/* Sends the datagram on unchanged (PROXY v2 and payload as received) with new outer headers:
 * towards the transceiver (dir to_transceiver) from relay_addr:return_port, as a local
 * flow's; towards the peer relay (dir to_client) from peers.listen, the address the
 * ingress relay's flow names. `rv` carries the reason and direction to report. */
static __noinline int reframe(struct xdp_md *ctx, const struct rtce_xdp_config *cfg, struct work *w,
			      const struct rtce_xdp_endpoint *dst, __u32 rv)
{
	const __u32 dir = VERDICT_DIR(rv);
	const struct pkt *p = &w->p;
	struct out_hdrs *o = &w->o;
	const struct rtce_xdp_peer_listen *pl;
	const __u8 *src = 0;
	__be16 sport;
	__u32 zero = 0;
	__u16 csum = 0;
	int delta, v;

	if (dst->family != RTCE_FAMILY_V4 && dst->family != RTCE_FAMILY_V6)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_NO_RELAY_ADDR, dir);
	if (dir == RTCE_XDP_DIR_TO_TRANSCEIVER) {
		src = relay_addr(cfg, dst->family);
		sport = cfg->return_port_be;
	} else {
		pl = bpf_map_lookup_elem(&peer_listen, &zero);
		if (!pl)
			return VERDICT(XDP_PASS, RTCE_XDP_PASS_NO_RELAY_ADDR, dir);
		if (dst->family == RTCE_FAMILY_V6 && (pl->flags & RTCE_XDP_F_HAVE_V6))
			src = pl->addr6;
		else if (dst->family == RTCE_FAMILY_V4 && (pl->flags & RTCE_XDP_F_HAVE_V4))
			src = pl->addr4;
		sport = pl->port_be;
	}
	if (!src)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_NO_RELAY_ADDR, dir);
	if (!p->udp_csum && dst->family == RTCE_FAMILY_V6)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_ZERO_CSUM, dir);

	__builtin_memset(o, 0, sizeof(*o));
	o->family = dst->family;
	o->tos = p->tos;
	o->sport = sport;
	o->dport = dst->port_be;
	o->udp_len = p->udp_len;
	if (dst->family == RTCE_FAMILY_V6)
		__builtin_memcpy(o->saddr, ALIGNED4(src), 16);
	else
		__builtin_memcpy(o->saddr, ALIGNED4(src), 4);
	__builtin_memcpy(o->daddr, ALIGNED4(dst->addr), 16);
	v = next_hop(ctx, cfg, p, o, dir);
	if (v)
		return v;
	if (p->udp_csum)
		csum = udp_csum_reframe(p, o);

	if (trim_trailer(ctx, p))
		return VERDICT(XDP_ABORTED, RTCE_XDP_ABORTED, dir);
	delta = (int)iphdr_len(p->family) - (int)iphdr_len(o->family);
	if (delta && bpf_xdp_adjust_head(ctx, delta))
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);
	if (write_headers(ctx, p, o, csum) < 0)
		return VERDICT(XDP_ABORTED, RTCE_XDP_ABORTED, dir);
	return emit(o, VERDICT_REASON(rv), dir);
}

/* Spends one token of this CPU's new-flow budget; 0 when the budget is spent. Bounds the
 * rate at which a flood of valid (replayed) hints can churn the LRU flow table. now_ns is
 * the caller's clock read, which is also the flow's creation time (one read per new flow). */
static __always_inline int take_new_flow_token(const struct rtce_xdp_config *cfg, __u64 now)
{
	__u32 zero = 0;
	struct rtce_xdp_budget *b = bpf_map_lookup_elem(&flow_budget, &zero);
	__u64 window =
		cfg->budget_window_ns ? cfg->budget_window_ns : RTCE_XDP_DEFAULT_BUDGET_WINDOW_NS;
	__u32 budget =
		cfg->new_flow_budget ? cfg->new_flow_budget : RTCE_XDP_DEFAULT_NEW_FLOW_BUDGET;

	if (!b)
		return 0;
	if (now - b->window_start_ns >= window) {
		b->window_start_ns = now;
		b->used = 0;
	}
	if (b->used >= budget)
		return 0;
	b->used++;
	return 1;
}

/* The bounds of rtce_flow_limit.h, defaults filled in (the map is zero until a sync). */
struct flow_limits {
	__u64 window_ns;
	__u32 max_per_hint;
	__u32 max_per_prefix;
	__u32 prefix_len;
};

static __always_inline void flow_limits_of(const struct rtce_xdp_flow_limit_config *c, __u8 family,
					   struct flow_limits *out)
{
	out->window_ns = c->window_ns ? c->window_ns : RTCE_FLOW_LIMIT_DEFAULT_WINDOW_NS;
	out->max_per_hint = c->max_per_hint ? c->max_per_hint : RTCE_FLOW_LIMIT_DEFAULT_PER_HINT;
	out->max_per_prefix = c->max_per_source_prefix ? c->max_per_source_prefix
						       : RTCE_FLOW_LIMIT_DEFAULT_PER_SOURCE_PREFIX;
	if (family == RTCE_FAMILY_V6)
		out->prefix_len =
			c->prefix_len6 ? c->prefix_len6 : RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V6;
	else
		out->prefix_len =
			c->prefix_len4 ? c->prefix_len4 : RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V4;
}

/* rtce_flow_limit_charge for an entry CPUs share: `l` from the caller's lookup (0 = none
 * then). A reset racing another CPU's add loses at most that add; the window stays. */
static __always_inline void charge_flow_limit(void *map, const void *key, struct rtce_flow_limit *l,
					      __u64 now, __u64 window)
{
	struct rtce_flow_limit fresh = {.window_start_ns = now, .flows = 1};

	if (!l) {
		if (bpf_map_update_elem(map, key, &fresh, BPF_NOEXIST) != -17 /* EEXIST */)
			return; /* created, or the LRU could not: forgotten, fails open */
		l = bpf_map_lookup_elem(map, key);
		if (!l)
			return;
	}
	if (rtce_flow_limit_window_over(l, now, window)) {
		l->window_start_ns = now;
		l->flows = 1;
		return;
	}
	__sync_fetch_and_add(&l->flows, 1);
}

/* Backlog of unread events above which a submit wakes the reader (see emit_event). */
#define EVENTS_WAKEUP_BYTES (RTCE_XDP_EVENTS_BYTES / 2)

static __always_inline void emit_event(const struct rtce_flow_key *key,
				       const struct rtce_xdp_flow *flow, __u32 dir, __u64 bytes)
{
	struct rtce_xdp_flow_event *ev;

	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count(RTCE_XDP_EVENT_LOST, dir, bytes);
		return;
	}
	__builtin_memcpy(&ev->key, key, sizeof(*key));
	__builtin_memcpy(&ev->endpoint, &flow->endpoint, sizeof(flow->endpoint));
	ev->endpoint_id = flow->endpoint_id;
	ev->role = flow->role;
	ev->pad = 0;
	ev->pad2 = 0;
	ev->timestamp_ns = flow->created_ns;
	/* No wakeup per event: waking the reader is an irq_work self-IPI (a VM exit on a
	 * virtualised host) costing several times the rest of a new flow. The loader reads
	 * the ring on a short timed poll (XdpDataPath::poll_events) instead; it is only woken
	 * once half the ring is waiting, so a burst of new flows cannot overrun it between
	 * polls. */
	bpf_ringbuf_submit(ev, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= EVENTS_WAKEUP_BYTES
				       ? BPF_RB_FORCE_WAKEUP
				       : BPF_RB_NO_WAKEUP);
}

/* The shared STUN walk (wire/rtce_stun.h) in a function of its own: few live registers
 * around it, so the compiler keeps its offsets in registers and the verifier can carry
 * each bounds check over to the access it guards. */
static __noinline enum rtce_stun_result stun_walk(const __u8 *buf, __u32 len, __u32 *uoff,
						  __u32 *ulen)
{
	return rtce_stun_server_ufrag(buf, len, uoff, ulen);
}

/* The cluster byte of a 16-character hint (byte 1 of its base64 decoding: the low nibble of
 * the second character and the top 4 bits of the third), or 256 when they are not base64.
 * Unverified: it only chooses the keys the hint is then verified with. */
static __always_inline __u32 hint_cluster_of(const __u8 *chars)
{
	int b = rtce_b64_value(chars[1]), c = rtce_b64_value(chars[2]);

	if (b < 0 || c < 0)
		return RTCE_XDP_MAX_CLUSTERS;
	return ((__u32)b & 0x0f) << 4 | (__u32)c >> 2;
}

/* A flow miss: only a Binding request with a valid hint creates state. Mirrors
 * RelayCore::route_first_packet, reason for reason. For a peer's datagram (owner role,
 * w->peer_off set) the client's datagram follows the PROXY v2 header, the hint must be this
 * cluster's (no chains: RelayCore::on_peer_packet) and the flow is an owner flow. */
static __noinline int first_packet(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
				   struct work *w, const struct rtce_flow_key *key)
{
	const struct pkt *p = &w->p;
	const __u32 dir = RTCE_XDP_DIR_TO_TRANSCEIVER;
	__u32 zero = 0, len, copy, uoff = 0, ulen = 0;
	struct rtce_xdp_scratch *s;
	const struct rtce_hint_keyset *ks;
	const struct rtce_xdp_peer_cluster *pc = 0;
	const struct rtce_xdp_endpoint *ep;
	struct rtce_xdp_flow flow = {}, *existing;
	struct rtce_hint hint = {};
	const struct rtce_xdp_flow_limit_config *lcfg;
	struct rtce_hint_limit_key hint_key STACK_KEY = {};
	struct rtce_prefix_limit_key prefix_key STACK_KEY = {};
	struct rtce_flow_limit *hint_limit, *prefix_limit;
	struct flow_limits limits;
	enum rtce_stun_result sr;
	enum rtce_hint_result hr;
	__u16 endpoint_id;
	__u64 now = 0;
	long rc;

	len = p->udp_len - sizeof(struct udphdr) - w->peer_off; /* peer_off <= that (pp2 parse) */
	if (len == 0 || len > 0xffff)
		return VERDICT(XDP_PASS, RTCE_XDP_NO_FLOW, dir);
	s = bpf_map_lookup_elem(&stun_scratch, &zero);
	if (!s)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);
	/* The walk runs over a bounded copy: the verifier cannot follow attribute offsets
	 * read from the packet into packet memory, but a fixed-size buffer it can. */
	copy = len < RTCE_XDP_STUN_WINDOW ? len : RTCE_XDP_STUN_WINDOW;
	if (copy < 1 || copy > RTCE_XDP_STUN_WINDOW ||
	    bpf_xdp_load_bytes(ctx, p->l4_off + sizeof(struct udphdr) + (w->peer_off & 0xff),
			       s->bytes, copy))
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);

	/* The header check reads 20 bytes at most and is told the real datagram length. */
	sr = rtce_stun_check_header(s->bytes, len);
	if (sr == RTCE_STUN_OK) {
		if (len > RTCE_XDP_STUN_WINDOW)
			return VERDICT(XDP_PASS, RTCE_XDP_PASS_STUN_TOO_LONG, dir);
		/* len <= STUN_WINDOW here, so the mask changes nothing; it only tells the
		 * verifier so, since the compare above may have been made on a copy. */
		sr = stun_walk(s->bytes, len & (2 * RTCE_XDP_STUN_WINDOW - 1), &uoff, &ulen);
	}
	switch (sr) {
	case RTCE_STUN_OK:
		break;
	case RTCE_STUN_NOT_STUN:
		return VERDICT(XDP_PASS, RTCE_XDP_NO_FLOW, dir);
	case RTCE_STUN_NOT_BINDING_REQUEST:
		return VERDICT(XDP_PASS, RTCE_XDP_STUN_NOT_BINDING_REQUEST, dir);
	case RTCE_STUN_NO_USERNAME:
		return VERDICT(XDP_PASS, RTCE_XDP_STUN_NO_USERNAME, dir);
	default:
		return VERDICT(XDP_PASS, RTCE_XDP_STUN_MALFORMED, dir);
	}

	ks = bpf_map_lookup_elem(&hint_keys, &zero);
	if (!ks)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);
	if (uoff > RTCE_XDP_STUN_WINDOW)
		return VERDICT(XDP_PASS, RTCE_XDP_STUN_MALFORMED, dir);
	/* A hint naming a cluster this relay is an ingress for is verified with that cluster's
	 * keys (RelayCore::route_hint): the cluster byte is read before any key is chosen. */
	if (!w->peer_off && ulen == RTCE_HINT_CHARS &&
	    uoff <= RTCE_XDP_STUN_WINDOW - RTCE_HINT_CHARS) {
		__u32 cluster = hint_cluster_of(s->bytes + uoff);

		if (cluster != cfg->cluster_id) {
			pc = bpf_map_lookup_elem(&peer_clusters, &cluster);
			if (pc && pc->in_use)
				ks = &pc->keys;
			else
				pc = 0;
		}
	}
	hr = rtce_hint_open(s->bytes + uoff, ulen, ks, &hint);
	if (hr != RTCE_HINT_OK || (hint.cluster_id != cfg->cluster_id && !pc)) {
		count_hint_failure(hr != RTCE_HINT_OK ? (__u32)hr : RTCE_XDP_HINT_WRONG_CLUSTER);
		return VERDICT(XDP_DROP, RTCE_XDP_HINT_REJECTED, dir);
	}

	if (pc) {
		endpoint_id = hint.cluster_id;
		ep = &pc->relay;
		flow.role = RTCE_RELAY_ROLE_INGRESS;
	} else {
		endpoint_id = hint.endpoint_id;
		ep = bpf_map_lookup_elem(&endpoints, &endpoint_id);
		if (!ep)
			return VERDICT(XDP_PASS, RTCE_XDP_UNKNOWN_ENDPOINT, dir);
		if (w->peer_off)
			flow.role = RTCE_RELAY_ROLE_OWNER;
	}
	w->role = flow.role;

	/* Bounded flows per hint and per source prefix, as RelayCore::route_first_packet.
	 * Dropped, not passed: the userspace relay applies the same bound, so passing would
	 * only grant the hint a second allowance and move the flood to the slower path. */
	lcfg = bpf_map_lookup_elem(&flow_limit_config, &zero);
	if (!lcfg)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);
	flow_limits_of(lcfg, p->family, &limits);
	now = bpf_ktime_get_ns();
	rtce_hint_limit_key_of(&hint, &hint_key);
	hint_limit = bpf_map_lookup_elem(&hint_flow_limits, &hint_key);
	if (!rtce_flow_limit_allows(hint_limit, now, limits.window_ns, limits.max_per_hint))
		return VERDICT(XDP_DROP, RTCE_XDP_HINT_FLOW_LIMIT, dir);
	rtce_prefix_limit_key_of(key, limits.prefix_len, &prefix_key);
	prefix_limit = bpf_map_lookup_elem(&prefix_flow_limits, &prefix_key);
	if (!rtce_flow_limit_allows(prefix_limit, now, limits.window_ns, limits.max_per_prefix))
		return VERDICT(XDP_DROP, RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT, dir);

	if (!take_new_flow_token(cfg, now))
		return VERDICT(XDP_PASS, RTCE_XDP_NEW_FLOW_BUDGET, dir);

	__builtin_memcpy(&flow.endpoint, ep, sizeof(*ep));
	flow.endpoint_id = endpoint_id;
	flow.created_ns = now;
	flow.last_seen_ns = now;
	rc = bpf_map_update_elem(&flows, key, &flow, BPF_NOEXIST);
	if (rc == -17 /* EEXIST: another CPU won the race; follow its flow */) {
		existing = bpf_map_lookup_elem(&flows, key);
		if (!existing)
			return VERDICT(XDP_PASS, RTCE_XDP_FLOW_INSERT_FAILED, dir);
		__builtin_memcpy(&w->ep, &existing->endpoint, sizeof(w->ep));
		w->role = existing->role;
		return VERDICT(ACT_FORWARD, RTCE_XDP_FORWARDED, dir);
	}
	if (rc)
		return VERDICT(XDP_PASS, RTCE_XDP_FLOW_INSERT_FAILED, dir);
	if (limits.max_per_hint != RTCE_FLOW_LIMIT_NONE)
		charge_flow_limit(&hint_flow_limits, &hint_key, hint_limit, now, limits.window_ns);
	if (limits.max_per_prefix != RTCE_FLOW_LIMIT_NONE)
		charge_flow_limit(&prefix_flow_limits, &prefix_key, prefix_limit, now,
				  limits.window_ns);
	emit_event(key, &flow, dir, frame_len(ctx));
	__builtin_memcpy(&w->ep, &flow.endpoint, sizeof(w->ep));
	return VERDICT(ACT_FORWARD, RTCE_XDP_FORWARDED_NEW_FLOW, dir);
}

/* Flow activity for the loader's idle sweep. A store per packet would dirty the flow's
 * cache line on every hit (and bounce it between CPUs whose queues share a flow), so the
 * stored time is only rewritten once it is a granularity old: one hit per flow per second
 * by default (1 in 50 for 20 ms audio), the others only read. The compare is signed: a
 * value slightly ahead of the coarse clock (set at creation from the precise one) is fresh,
 * not stale. A flow never touched since an older loader created it reads 0, far in the
 * past: its first hit writes. */
static __always_inline void touch_flow(const struct rtce_xdp_config *cfg,
				       struct rtce_xdp_flow *flow, __u64 now)
{
	if ((__s64)(now - flow->last_seen_ns) >= (__s64)activity_granularity(cfg))
		flow->last_seen_ns = now;
}

static __always_inline void flow_key_of(const struct pkt *p, struct rtce_flow_key *key)
{
	__builtin_memcpy(ALIGNED4(key->client_addr), p->saddr, 16); /* key is STACK_KEY */
	__builtin_memcpy(ALIGNED4(key->vip_addr), p->daddr, 16);
	key->client_port_be = p->sport;
	key->vip_port_be = p->dport;
	key->family = p->family;
	key->transport = RTCE_TRANSPORT_UDP;
}

/* A client datagram on a VIP port whose flow `key` is not in `flows` (w->p holds the
 * packet): the VIP check, then first_packet() decides. */
static __always_inline int from_client_miss(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
					    struct work *w, const struct rtce_flow_key *key)
{
	const struct pkt *p = &w->p;
	int v;

	if (!is_vip(p->family, p->daddr, p->dport))
		return NOT_OURS; /* a VIP port, another address */
	v = first_packet(ctx, cfg, w, key);
	if (VERDICT_ACTION(v) != ACT_FORWARD)
		return v;
	return forward_to_endpoint(ctx, cfg, w, &w->ep, VERDICT_REASON(v));
}

static __always_inline int from_client(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
				       struct work *w)
{
	const struct pkt *p = &w->p;
	struct rtce_flow_key key STACK_KEY = {};
	struct rtce_xdp_flow *flow;

	flow_key_of(p, &key);
	flow = bpf_map_lookup_elem(&flows, &key);
	if (flow) {
		touch_flow(cfg, flow, bpf_ktime_get_coarse_ns()); /* kernel >= 5.11 */
		w->role = flow->role;
		return forward_to_endpoint(ctx, cfg, w, &flow->endpoint, RTCE_XDP_FORWARDED);
	}
	return from_client_miss(ctx, cfg, w, &key);
}

/* ---------------------------------------------------------------- endpoint -> client */

/* A datagram on the return port: PROXY v2 + payload from the flow's endpoint. Mirrors
 * RelayCore::on_transceiver_packet. */
static __noinline int from_endpoint(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
				    struct work *w)
{
	const __u32 dir = RTCE_XDP_DIR_TO_CLIENT;
	const struct pkt *p = &w->p;
	struct out_hdrs *o = &w->o;
	__u8 *hdr = w->ret_hdr;
	struct rtce_flow_key key STACK_KEY = {};
	struct rtce_xdp_flow *flow;
	__u32 len, copy, payload_off = 0;
	__u16 csum = 0;
	int delta, v;

	__builtin_memset(hdr, 0, sizeof(w->ret_hdr));
	len = p->udp_len - sizeof(struct udphdr);
	copy = len < sizeof(w->ret_hdr) ? len : sizeof(w->ret_hdr);
	if (copy < RTCE_PP2_FIXED_LEN)
		return VERDICT(XDP_DROP, RTCE_XDP_RETURN_MALFORMED, dir);
	/* rtce_pp2_parse_key reads at most the 52 bytes of the address block; the copy holds
	 * them whenever the datagram does, and `len` keeps its truncation check honest. */
	if (copy > sizeof(w->ret_hdr) ||
	    bpf_xdp_load_bytes(ctx, p->l4_off + sizeof(struct udphdr), hdr, copy))
		return VERDICT(XDP_DROP, RTCE_XDP_RETURN_MALFORMED, dir);
	if (rtce_pp2_parse_key(hdr, len, &key, &payload_off) != RTCE_PP2_OK)
		return VERDICT(XDP_DROP, RTCE_XDP_RETURN_MALFORMED, dir);
	/* An ICE-TCP flow's: its connection lives in a userspace worker. */
	if (key.transport != RTCE_TRANSPORT_UDP)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);

	flow = bpf_map_lookup_elem(&flows, &key);
	if (!flow)
		return VERDICT(XDP_DROP, RTCE_XDP_RETURN_NO_FLOW, dir);
	if (flow->endpoint.family != p->family || flow->endpoint.port_be != p->sport ||
	    !addr_eq(flow->endpoint.addr, p->saddr))
		return VERDICT(XDP_DROP, RTCE_XDP_RETURN_WRONG_SENDER, dir);
	w->role = flow->role;
	if (flow->role == RTCE_RELAY_ROLE_OWNER) {
		/* The reply goes back to the ingress relay as it is: that relay strips it. */
		const struct rtce_xdp_endpoint *via = bpf_map_lookup_elem(&owner_via, &key);

		if (!via)
			return VERDICT(XDP_DROP, RTCE_XDP_RETURN_NO_FLOW, dir);
		__builtin_memcpy(&w->ep, via, sizeof(w->ep));
		return reframe(ctx, cfg, w, &w->ep, VERDICT(0, RTCE_XDP_FORWARDED, dir));
	}

	/* TLVs after the addresses are legal but rare; their bytes are not in the copy the
	 * checksum update needs, so userspace takes those. */
	if (payload_off != rtce_pp2_header_len(key.family))
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);
	if (!p->udp_csum && key.family == RTCE_FAMILY_V6)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_ZERO_CSUM, dir);

	__builtin_memset(o, 0, sizeof(*o));
	o->family = key.family;
	o->tos = p->tos;
	o->sport = key.vip_port_be;
	o->dport = key.client_port_be;
	o->udp_len = (__u16)(len - payload_off + sizeof(struct udphdr));
	__builtin_memcpy(o->saddr, key.vip_addr, 16);
	__builtin_memcpy(o->daddr, key.client_addr, 16);
	v = next_hop(ctx, cfg, p, o, dir);
	if (v)
		return v;
	if (p->udp_csum)
		csum = udp_csum_update(p, o, key.family, 0);

	if (trim_trailer(ctx, p))
		return VERDICT(XDP_ABORTED, RTCE_XDP_ABORTED, dir);
	delta = (int)(iphdr_len(p->family) + sizeof(struct udphdr) + payload_off) -
		(int)(iphdr_len(o->family) + sizeof(struct udphdr));
	if (bpf_xdp_adjust_head(ctx, delta))
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);
	if (write_headers(ctx, p, o, csum) < 0)
		return VERDICT(XDP_ABORTED, RTCE_XDP_ABORTED, dir);
	return emit(o, RTCE_XDP_FORWARDED, dir);
}

/* ---------------------------------------------------------------- peer -> endpoint */

static __always_inline int is_peer_listen(const struct rtce_xdp_peer_listen *pl,
					  const struct pkt *p)
{
	__u8 a[16] STACK_KEY = {};

	if (!pl->port_be || p->dport != pl->port_be)
		return 0;
	if (p->family == RTCE_FAMILY_V6) {
		if (!(pl->flags & RTCE_XDP_F_HAVE_V6))
			return 0;
		__builtin_memcpy(a, ALIGNED4(pl->addr6), 16);
	} else {
		if (!(pl->flags & RTCE_XDP_F_HAVE_V4))
			return 0;
		__builtin_memcpy(a, ALIGNED4(pl->addr4), 4);
	}
	return addr_eq(a, p->daddr);
}

/* A datagram on peers.listen: a flow a trusted peer relay forwards. Mirrors
 * RelayCore::on_peer_packet: the sender must be in peers.trusted, the PROXY v2 header names
 * the flow, an owner flow's datagrams follow it from the peer that made it, and only a
 * check whose hint verifies with this cluster's keys creates the flow or moves it to
 * another peer (the client's ingress relay restarted elsewhere). */
static __noinline int from_peer(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
				struct work *w)
{
	const __u32 dir = RTCE_XDP_DIR_TO_TRANSCEIVER;
	const struct pkt *p = &w->p;
	__u8 *hdr = w->ret_hdr;
	struct rtce_xdp_trusted_key tk STACK_KEY = {};
	struct rtce_flow_key key STACK_KEY = {};
	struct rtce_xdp_flow *flow;
	const struct rtce_xdp_endpoint *via;
	__u32 len, copy, payload_off = 0;
	int moving = 0, v;

	tk.prefixlen = RTCE_XDP_TRUSTED_KEY_PREFIX + (p->family == RTCE_FAMILY_V6 ? 128 : 32);
	tk.family = p->family;
	__builtin_memcpy(tk.addr, p->saddr, 16);
	if (!bpf_map_lookup_elem(&peer_trusted, &tk))
		return VERDICT(XDP_DROP, RTCE_XDP_PEER_UNTRUSTED, dir);

	__builtin_memset(hdr, 0, sizeof(w->ret_hdr));
	len = p->udp_len - sizeof(struct udphdr);
	copy = len < sizeof(w->ret_hdr) ? len : sizeof(w->ret_hdr);
	if (copy < RTCE_PP2_FIXED_LEN || copy > sizeof(w->ret_hdr) ||
	    bpf_xdp_load_bytes(ctx, p->l4_off + sizeof(struct udphdr), hdr, copy))
		return VERDICT(XDP_DROP, RTCE_XDP_PEER_MALFORMED, dir);
	if (rtce_pp2_parse_key(hdr, len, &key, &payload_off) != RTCE_PP2_OK)
		return VERDICT(XDP_DROP, RTCE_XDP_PEER_MALFORMED, dir);
	/* TLVs, or an ICE-TCP flow (whose connection is an ingress relay's worker's) */
	if (payload_off != rtce_pp2_header_len(key.family) || key.transport != RTCE_TRANSPORT_UDP)
		return VERDICT(XDP_PASS, RTCE_XDP_PASS_TO_USERSPACE, dir);

	w->role = RTCE_RELAY_ROLE_OWNER;
	w->via.family = p->family;
	w->via.port_be = p->sport;
	__builtin_memcpy(w->via.addr, p->saddr, 16);

	flow = bpf_map_lookup_elem(&flows, &key);
	if (flow) {
		if (flow->role != RTCE_RELAY_ROLE_OWNER)
			return VERDICT(XDP_DROP, RTCE_XDP_PEER_WRONG_SENDER, dir);
		via = bpf_map_lookup_elem(&owner_via, &key);
		if (via && via->family == p->family && via->port_be == p->sport &&
		    addr_eq(via->addr, p->saddr)) {
			touch_flow(cfg, flow, bpf_ktime_get_coarse_ns());
			return reframe(ctx, cfg, w, &flow->endpoint,
				       VERDICT(0, RTCE_XDP_FORWARDED, dir));
		}
		moving = 1;
	}
	w->peer_off = payload_off;
	v = first_packet(ctx, cfg, w, &key);
	if (VERDICT_ACTION(v) != ACT_FORWARD)
		return moving ? VERDICT(XDP_DROP, RTCE_XDP_PEER_WRONG_SENDER, dir) : v;
	if (w->role != RTCE_RELAY_ROLE_OWNER) /* lost a race to a local flow of the same key */
		return VERDICT(XDP_DROP, RTCE_XDP_PEER_WRONG_SENDER, dir);
	if (bpf_map_update_elem(&owner_via, &key, &w->via, BPF_ANY))
		return VERDICT(XDP_PASS, RTCE_XDP_FLOW_INSERT_FAILED, dir);
	return reframe(ctx, cfg, w, &w->ep, VERDICT(0, VERDICT_REASON(v), dir));
}

/* ---------------------------------------------------------------- entry */

/* Resets the per-packet state of struct work that the handlers read before they write it. */
static __always_inline void work_reset(struct work *w)
{
	w->peer_off = 0;
	w->role = RTCE_RELAY_ROLE_LOCAL;
}

/* The full classification: every frame the fast path does not take (802.1Q tags, IPv4
 * options and fragments, IPv6 extension headers, odd lengths, peers.listen, anything not
 * IP) is parsed here into struct work, with the pass reasons of what is not handled. */
static __always_inline int handle(struct xdp_md *ctx, const struct rtce_xdp_config *cfg,
				  struct work *w)
{
	__u32 zero = 0;
	const struct rtce_xdp_peer_listen *pl;
	struct pkt *p;
	__be16 proto;
	int v;

	p = &w->p;
	__builtin_memset(p, 0, sizeof(*p));
	proto = parse_l2(ctx, p);
	if (proto == bpf_htons(ETH_P_IP))
		v = parse_ipv4(ctx, cfg, p);
	else if (proto == bpf_htons(ETH_P_IPV6))
		v = parse_ipv6(ctx, cfg, p);
	else
		return NOT_OURS; /* ARP, QinQ, anything else */
	if (v)
		return v;

	if (is_return_port(cfg, p->family, p->daddr, p->dport))
		return from_endpoint(ctx, cfg, w);
	pl = bpf_map_lookup_elem(&peer_listen, &zero);
	if (pl && is_peer_listen(pl, p))
		return from_peer(ctx, cfg, w);
	if (!on_vip_port(p->dport))
		return NOT_OURS;
	return from_client(ctx, cfg, w); /* a flow hit, else is_vip() decides */
}

/* The role of the flow a verdict's datagram belongs to rides in the verdict's top byte, so
 * that both paths hand rtce_xdp() one value to count. */
#define VERDICT_WITH_ROLE(v, role) ((v) | (int)(((__u32)(role)&0x0f) << 24))
#define VERDICT_ROLE(v)		   (((v) >> 24) & 0x0f)
/* fast_path(): "not taken, run the full classification" (verdicts are never negative). */
#define SLOW_PATH (-1)

static __noinline int slow_path(struct xdp_md *ctx, const struct rtce_xdp_config *cfg)
{
	__u32 zero = 0;
	struct work *w = bpf_map_lookup_elem(&work, &zero);
	int v;

	if (!w) /* array maps always have entry 0: cannot happen */
		return NOT_OURS;
	work_reset(w);
	v = handle(ctx, cfg, w);
	return VERDICT_WITH_ROLE(v, w->role);
}

/* The frames the fast path parses: untagged Ethernet; IPv4 without options, not a fragment,
 * or IPv6 with UDP as the next header; UDP; IP and UDP lengths that agree; at most
 * MAX_TRAILER bytes of padding. Fills p exactly as parse_l2 + parse_ipv4/6 would (p zeroed
 * by the caller). Returns 0 for anything else: handle() then parses it again and names the
 * reason, so the fast path never has to. */
static __always_inline int fast_parse(struct xdp_md *ctx, struct pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct udphdr *udp;
	__u32 pkt_len = (__u32)(data_end - data);

	if ((void *)(eth + 1) > data_end)
		return 0;
	p->l3_off = sizeof(*eth);
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);
		__u32 tot_len;

		udp = (void *)(iph + 1);
		if ((void *)(udp + 1) > data_end)
			return 0;
		/* version 4 with a 20-byte header, UDP, neither MF nor an offset */
		if (*(__u8 *)iph != 0x45 || iph->protocol != IPPROTO_UDP ||
		    (iph->frag_off & bpf_htons(IP_MF | IP_OFFSET)))
			return 0;
		tot_len = bpf_ntohs(iph->tot_len);
		p->udp_len = bpf_ntohs(udp->len);
		if (tot_len < sizeof(*iph) + sizeof(*udp) || sizeof(*eth) + tot_len > pkt_len ||
		    p->udp_len != tot_len - sizeof(*iph))
			return 0;
		p->family = RTCE_FAMILY_V4;
		p->tos = iph->tos;
		__builtin_memcpy(p->saddr, &iph->saddr, 4);
		__builtin_memcpy(p->daddr, &iph->daddr, 4);
		p->l4_off = sizeof(*eth) + sizeof(*iph);
		p->trailer = pkt_len - sizeof(*eth) - tot_len;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = (void *)(eth + 1);

		udp = (void *)(ip6h + 1);
		if ((void *)(udp + 1) > data_end)
			return 0;
		if (ip6h->version != 6 || ip6h->nexthdr != IPPROTO_UDP)
			return 0;
		p->udp_len = bpf_ntohs(udp->len);
		if (p->udp_len < sizeof(*udp) || p->udp_len != bpf_ntohs(ip6h->payload_len) ||
		    sizeof(*eth) + sizeof(*ip6h) + p->udp_len > pkt_len)
			return 0;
		p->family = RTCE_FAMILY_V6;
		p->tos = (__u8)(ip6h->priority << 4 | ip6h->flow_lbl[0] >> 4);
		__builtin_memcpy(p->saddr, &ip6h->saddr, 16);
		__builtin_memcpy(p->daddr, &ip6h->daddr, 16);
		p->l4_off = sizeof(*eth) + sizeof(*ip6h);
		p->trailer = pkt_len - p->l4_off - p->udp_len;
	} else {
		return 0;
	}
	if (p->trailer > MAX_TRAILER)
		return 0;
	p->sport = udp->source;
	p->dport = udp->dest;
	p->udp_csum = udp->check;
	return 1;
}

/* The common case first: a client's datagram of an established flow. One parse into the
 * stack, one `flows` lookup, the rewrite, return: no per-CPU working memory, no VIP or
 * endpoint lookup (a flow's key names its VIP and its value holds the endpoint). Return
 * datagrams and flow misses are handed on with the parse already done; everything else is
 * SLOW_PATH. A function of its own so that its stack frame is not under the slow path's
 * call chain (512 bytes for all frames). */
static __noinline int fast_path(struct xdp_md *ctx, const struct rtce_xdp_config *cfg)
{
	__u32 zero = 0;
	struct pkt p STACK_KEY;
	struct out_hdrs o STACK_KEY;
	struct rtce_flow_key key STACK_KEY = {};
	const struct rtce_xdp_peer_listen *pl;
	struct rtce_xdp_flow *flow;
	struct work *w;
	int v;

	__builtin_memset(&p, 0, sizeof(p));
	if (!fast_parse(ctx, &p))
		return SLOW_PATH;
	/* The same order as handle(): the return port, peers.listen, then the VIP ports. */
	if (is_return_port(cfg, p.family, p.daddr, p.dport)) {
		w = bpf_map_lookup_elem(&work, &zero);
		if (!w)
			return SLOW_PATH;
		work_reset(w);
		__builtin_memcpy(&w->p, &p, sizeof(p));
		v = from_endpoint(ctx, cfg, w);
		return VERDICT_WITH_ROLE(v, w->role);
	}
	pl = bpf_map_lookup_elem(&peer_listen, &zero);
	if (pl && is_peer_listen(pl, &p))
		return SLOW_PATH; /* the owner role: rare, and its chain is deep */
	if (!on_vip_port(p.dport))
		return NOT_OURS;
	flow_key_of(&p, &key);
	flow = bpf_map_lookup_elem(&flows, &key);
	if (flow) {
		__u8 role = flow->role;
		__u64 now = bpf_ktime_get_coarse_ns(); /* kernel >= 5.11 */

		touch_flow(cfg, flow, now);
		v = forward_frame(ctx, cfg, &p, &o, &flow->endpoint, RTCE_XDP_FORWARDED, now);
		return VERDICT_WITH_ROLE(v, role);
	}
	w = bpf_map_lookup_elem(&work, &zero);
	if (!w)
		return SLOW_PATH;
	work_reset(w);
	__builtin_memcpy(&w->p, &p, sizeof(p));
	v = from_client_miss(ctx, cfg, w, &key);
	return VERDICT_WITH_ROLE(v, w->role);
}

/* Forwarded datagrams of ingress and owner flows, by role (local ones are all the others). */
static __always_inline void count_role(__u32 role, int v, __u64 bytes)
{
	__u32 reason = VERDICT_REASON(v), idx;
	struct rtce_xdp_counter *c;

	if (role == RTCE_RELAY_ROLE_LOCAL || role >= RTCE_RELAY_ROLE_COUNT ||
	    (reason != RTCE_XDP_FORWARDED && reason != RTCE_XDP_FORWARDED_NEW_FLOW))
		return;
	idx = role * RTCE_XDP_DIR_COUNT + VERDICT_DIR(v);
	c = bpf_map_lookup_elem(&role_counters, &idx);
	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

SEC("xdp")
int rtce_xdp(struct xdp_md *ctx)
{
	__u64 bytes = frame_len(ctx);
	__u32 zero = 0;
	const struct rtce_xdp_config *cfg = bpf_map_lookup_elem(&config, &zero);
	int v;

	if (!cfg) { /* array maps always have entry 0: cannot happen */
		count(RTCE_XDP_PASS_NOT_OURS, RTCE_XDP_DIR_TO_TRANSCEIVER, bytes);
		return XDP_PASS;
	}
	v = fast_path(ctx, cfg);
	if (v == SLOW_PATH)
		v = slow_path(ctx, cfg);
	count(VERDICT_REASON(v), VERDICT_DIR(v), bytes);
	count_role(VERDICT_ROLE(v), v, bytes);
	return VERDICT_ACTION(v);
}
