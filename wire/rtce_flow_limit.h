/* rtce_flow_limit.h — how many flows one hint, and one source prefix, may create: the
 * same decision in the userspace relay (loader/core/relay_core.cpp) and the XDP program.
 *
 * Anyone gets a valid hint by POSTing an offer, and a Binding request carrying it can be
 * replayed from any (spoofed) source address: without a bound, one hint fills the flow
 * table. A real call makes 1-4 flows per hint (candidate pairs, IPv4 and IPv6, a NAT
 * rebind), so a small bound per hint costs calls nothing.
 *
 * A limit is a fixed time window per key: at most `max` flows created in any window that
 * starts at the key's first flow after the previous window ended. Time-windowed rather
 * than a count of live flows, because the XDP flows map is an LRU that forgets flows
 * without telling anyone, and flows also leave through the loader's sweep and the flow
 * store: a live count would drift up and lock out the hint (or a whole prefix) for good.
 * With a window, a key that was refused gets flows again one window later, and the flows
 * one hint holds at once are bounded by max * (1 + flows.idle_timeout / window) unless
 * the sender keeps each one alive. Under memory pressure a limit entry may be forgotten
 * (LRU in BPF, oldest-in-set in userspace): that fails open for one key, never closed.
 *
 * Keys are copied from the hint's signed fields and from the flow key's client address,
 * so nothing here trusts unsigned bytes. See docs/operations.md ("Flows per hint"). */
#ifndef RTCE_FLOW_LIMIT_H
#define RTCE_FLOW_LIMIT_H

#include "rtce_flow.h"
#include "rtce_hint.h"
#include "rtce_proxy_v2.h" /* RTCE_FAMILY_* */
#include "rtce_types.h"

/* Defaults of the flows.* keys (docs/configuration.md). */
#define RTCE_FLOW_LIMIT_DEFAULT_PER_HINT	  8
#define RTCE_FLOW_LIMIT_DEFAULT_PER_SOURCE_PREFIX 1024
#define RTCE_FLOW_LIMIT_DEFAULT_WINDOW_NS	  10000000000ULL
#define RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V4	  24
#define RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V6	  56
/* A `max` of this value never refuses (the configuration's 0 = no limit). */
#define RTCE_FLOW_LIMIT_NONE 0xffffffffU

/* The session a hint names: its signed fields, without the MAC (same fields, same MAC). */
struct rtce_hint_limit_key {
	__u32 nonce;
	__u16 endpoint_id;
	__u8 cluster_id;
	__u8 key_id;
};

/* A client address cut to its prefix (/24 IPv4, /56 IPv6 by default), bits past the
 * prefix zero. */
struct rtce_prefix_limit_key {
	__u8 family; /* RTCE_FAMILY_V4 or RTCE_FAMILY_V6 */
	__u8 prefix_len;
	__u16 pad;
	__u8 addr[16];
};

/* The window of one key. */
struct rtce_flow_limit {
	__u64 window_start_ns; /* CLOCK_MONOTONIC of the window's first flow */
	__u32 flows;	       /* flows created in this window */
	__u32 pad;
};

RTCE_INLINE void rtce_hint_limit_key_of(const struct rtce_hint *h, struct rtce_hint_limit_key *k)
{
	k->nonce = h->nonce;
	k->endpoint_id = h->endpoint_id;
	k->cluster_id = h->cluster_id;
	k->key_id = h->key_id;
}

/* prefix_len is clamped to the family's width. */
RTCE_INLINE void rtce_prefix_limit_key_of(const struct rtce_flow_key *flow, __u32 prefix_len,
					  struct rtce_prefix_limit_key *k)
{
	__u32 width = flow->family == RTCE_FAMILY_V6 ? 128 : 32;
	__u32 i;

	if (prefix_len > width)
		prefix_len = width;
	k->family = flow->family;
	k->prefix_len = (__u8)prefix_len;
	k->pad = 0;
	for (i = 0; i < 16; i++) {
		__u32 bit = i * 8;
		__u8 mask = 0;

		if (bit + 8 <= prefix_len)
			mask = 0xff;
		else if (bit < prefix_len)
			mask = (__u8)(0xff << (8 - (prefix_len - bit)));
		k->addr[i] = flow->client_addr[i] & mask;
	}
}

/* Whether the window has ended at `now` (a start ahead of now, e.g. written by another
 * CPU a moment later, is a live window). */
RTCE_INLINE int rtce_flow_limit_window_over(const struct rtce_flow_limit *l, __u64 now_ns,
					    __u64 window_ns)
{
	return (__s64)(now_ns - l->window_start_ns) >= (__s64)window_ns;
}

/* 1 when one more flow may be created under `l` (0 = no entry yet) at now_ns. */
RTCE_INLINE int rtce_flow_limit_allows(const struct rtce_flow_limit *l, __u64 now_ns,
				       __u64 window_ns, __u32 max)
{
	if (max == RTCE_FLOW_LIMIT_NONE || !l || rtce_flow_limit_window_over(l, now_ns, window_ns))
		return 1;
	return l->flows < max;
}

/* Counts a created flow: opens a new window when the last one is over. (The XDP program
 * adds atomically instead of the plain increment: CPUs share the entry.) */
RTCE_INLINE void rtce_flow_limit_charge(struct rtce_flow_limit *l, __u64 now_ns, __u64 window_ns)
{
	if (rtce_flow_limit_window_over(l, now_ns, window_ns)) {
		l->window_start_ns = now_ns;
		l->flows = 1;
		return;
	}
	l->flows++;
}

#endif /* RTCE_FLOW_LIMIT_H */
