/* rtce_xdp.h — the XDP data path's map layouts and its table of exit reasons, shared by
 * the BPF program (bpf/rtce_xdp.bpf.c) and the C++ loader and tests.
 *
 * Every struct here is a BPF map key or value; the program is built with BTF, so
 * `bpftool map dump` prints these field names. Addresses are in network order with IPv4 in
 * the first 4 of 16 bytes (rest zero), ports in network order (as in the packet), exactly
 * like struct rtce_flow_key. Padding is explicit and must be zero in keys. */
#ifndef RTCE_XDP_H
#define RTCE_XDP_H

#include "rtce_flow.h"
#include "rtce_flow_limit.h"
#include "rtce_hint.h"
#include "rtce_relay_vocab.h"
#include "rtce_types.h"

/* Map sizes. The loader may resize `flows` before loading (bpf_map__set_max_entries). */
#define RTCE_XDP_MAX_VIPS      64
#define RTCE_XDP_MAX_ENDPOINTS 4096
#define RTCE_XDP_MAX_FLOWS     262144
#define RTCE_XDP_EVENTS_BYTES  (256 * 1024)
/* Entries of the flow-limit LRU maps (`hint_flow_limits`, `prefix_flow_limits`): a key
 * needs one only while it creates flows, so these outnumber the keys of a window. */
#define RTCE_XDP_MAX_HINT_LIMITS   65536
#define RTCE_XDP_MAX_PREFIX_LIMITS 65536
/* The first STUN_WINDOW bytes of a flow-miss datagram are copied for the STUN walk; a
 * Binding request longer than that is left to userspace (pass_stun_too_long). */
#define RTCE_XDP_STUN_WINDOW 512
/* Size of the per-CPU scratch copy: larger than the window so that every offset the
 * verifier can imagine for the (logically bounded) walk stays inside the buffer. */
#define RTCE_XDP_STUN_SCRATCH 2048
/* Defaults of the per-CPU new-flow budget (token bucket) when the config leaves 0. */
#define RTCE_XDP_DEFAULT_NEW_FLOW_BUDGET  64
#define RTCE_XDP_DEFAULT_BUDGET_WINDOW_NS 1000000ULL
/* Default of rtce_xdp_config.last_seen_granularity_ns when the config leaves 0. */
#define RTCE_XDP_DEFAULT_LAST_SEEN_GRANULARITY_NS 1000000000U

/* `vips` hash key: one VIP address:port the relay serves. */
struct rtce_xdp_vip_key {
	__u8 family; /* RTCE_FAMILY_V4 or RTCE_FAMILY_V6 (rtce_proxy_v2.h) */
	__u8 pad;
	__u16 port_be;
	__u8 addr[16];
};

struct rtce_xdp_vip {
	__u32 vip_id; /* the loader's index of this VIP (informational) */
};

/* `vip_ports` array value (one entry, key 0): bit p is set when some VIP listens on UDP
 * port p (host order; bit p % 64 of word p / 64). The program tests it before any hash
 * lookup: traffic to other ports is not ours at the cost of one load, and on a VIP port a
 * flow hit proves the destination is a VIP (flows exist only for VIPs; the loader removes
 * those of a VIP it drops), so the hot path skips the `vips` lookup. */
struct rtce_xdp_vip_ports {
	__u64 bits[1024];
};

static inline void rtce_xdp_vip_port_set(struct rtce_xdp_vip_ports *ports, __u16 port)
{
	ports->bits[port >> 6] |= 1ULL << (port & 63);
}

/* `endpoints` hash value (key: __u16 endpoint id), also embedded in a flow. */
struct rtce_xdp_endpoint {
	__u8 addr[16];
	__u16 port_be;
	__u8 family;
	__u8 pad;
};

/* `flows` LRU hash value (key: struct rtce_flow_key). 40 bytes, as before last_seen_ns
 * existed: it took the place of a __u32 pad and the 4 implicit bytes before created_ns, so
 * a map pinned by an older loader keeps its value size and is reused (its flows read
 * last_seen_ns 0; see rtce::xdp_flow_idle). */
struct rtce_xdp_flow {
	struct rtce_xdp_endpoint
		endpoint;  /* local, owner: the transceiver; ingress: the peer cluster's relay */
	__u16 endpoint_id; /* local, owner: the endpoint id; ingress: the cluster id */
	__u8 role;	   /* enum rtce_relay_flow_role (0 = local, as older loaders wrote) */
	__u8 pad;
	/* Last client -> transceiver packet, CLOCK_MONOTONIC (bpf_ktime_get_coarse_ns, so it
	 * may trail the precise clock by a tick). Rewritten only once it is older than the
	 * config's last_seen_granularity_ns: most hits only read it. The loader's sweep
	 * deletes a flow idle for flows.idle_timeout. */
	__u64 last_seen_ns;
	__u64 created_ns; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) at creation */
};

/* `peer_clusters` array value, indexed by cluster id: a cluster this relay is an ingress
 * for (the global relay, docs/global-relay.md). A first packet whose hint names it and
 * verifies with `keys` makes an ingress flow whose endpoint is `relay`. */
struct rtce_xdp_peer_cluster {
	struct rtce_xdp_endpoint relay;
	__u8 in_use;
	__u8 pad[3];
	struct rtce_hint_keyset keys;
};
#define RTCE_XDP_MAX_CLUSTERS 256

/* `peer_listen` array value (one entry, key 0): the owner role of the global relay. A
 * datagram to addr:port_be (peers.listen) is a flow a peer relay forwards (PROXY v2 naming
 * client and VIP, then the client's datagram); the program hands it to the transceiver
 * unchanged and sends the replies back to that peer from here. A separate map rather than
 * fields of rtce_xdp_config, so that a config map pinned by an older loader keeps its
 * value size. port_be 0 = no owner role (peers.listen datagrams are not ours). */
struct rtce_xdp_peer_listen {
	__u8 addr4[4];
	__u8 addr6[16];
	__be16 port_be;
	__u8 flags; /* RTCE_XDP_F_HAVE_V4 / RTCE_XDP_F_HAVE_V6: which address is set */
	__u8 pad;
};

/* `peer_trusted` LPM trie key: one peers.trusted prefix. prefixlen counts the bits from
 * `family` on: 32 (family and pad, always compared whole) + the prefix length. */
struct rtce_xdp_trusted_key {
	__u32 prefixlen;
	__u8 family;
	__u8 pad[3];
	__u8 addr[16];
};
#define RTCE_XDP_MAX_TRUSTED	    256
#define RTCE_XDP_TRUSTED_KEY_PREFIX 32

/* `owner_via` LRU hash (key: struct rtce_flow_key, value: struct rtce_xdp_endpoint): the
 * peer relay an owner flow came through, where its replies go. Apart from the flow value,
 * which is full at 40 bytes (see struct rtce_xdp_flow). Sized for the owner flows of one
 * relay; an evicted entry's replies are dropped (return_no_flow) until the peer's next
 * verified check writes it again. */
#define RTCE_XDP_MAX_OWNER_FLOWS 65536

/* `role_counters` per-CPU array value struct rtce_xdp_counter, index
 * role * RTCE_XDP_DIR_COUNT + direction: datagrams the program forwarded for ingress and
 * owner flows (local ones are the forwarded counters minus these). */
#define RTCE_XDP_ROLE_COUNTER_SLOTS ((int)RTCE_RELAY_ROLE_COUNT * (int)RTCE_XDP_DIR_COUNT)

/* `events` ring buffer record: a flow the XDP program created. The loader puts it into the
 * flow store (when one is configured). */
struct rtce_xdp_flow_event {
	struct rtce_flow_key key;
	struct rtce_xdp_endpoint endpoint;
	__u16 endpoint_id;
	__u8 role; /* the flow's; the loader mirrors each role to the flow store */
	__u8 pad;
	__u32 pad2;
	__u64 timestamp_ns; /* bpf_ktime_get_ns() */
};

/* struct rtce_xdp_config flags. */
/* Tests only: skip bpf_fib_lookup; write fixed_src_mac/fixed_dst_mac and XDP_TX. Lets
 * BPF_PROG_TEST_RUN fixtures be deterministic whatever the host's routes. */
#define RTCE_XDP_F_SKIP_FIB (1U << 0)
#define RTCE_XDP_F_HAVE_V4  (1U << 1) /* relay_addr4 is set */
#define RTCE_XDP_F_HAVE_V6  (1U << 2) /* relay_addr6 is set */

/* `config` array value (one entry, key 0). All zero = nothing configured: no VIP traffic
 * is handled, the return path is off. */
struct rtce_xdp_config {
	__u8 relay_addr4[4];  /* the relay's own address: source towards endpoints, and */
	__u8 relay_addr6[16]; /* destination of the return path */
	__u16 return_port_be; /* the relay's return port (0 = return path off) */
	__u8 cluster_id;      /* hints of other clusters are rejected (wrong_cluster) */
	__u8 pad;
	__u32 flags;	       /* RTCE_XDP_F_* */
	__u32 new_flow_budget; /* new flows per CPU per window (0 = default) */
	/* A flow hit rewrites last_seen_ns only when it is at least this old (0 = default,
	 * 1 s). The loader keeps it well under flows.idle_timeout. */
	__u32 last_seen_granularity_ns;
	__u64 budget_window_ns; /* 0 = default (1 ms) */
	__u8 fixed_src_mac[6];	/* RTCE_XDP_F_SKIP_FIB only */
	__u8 fixed_dst_mac[6];
	__u32 pad3;
};

/* `flow_limit_config` array value (one entry, key 0): the bounds of rtce_flow_limit.h.
 * A separate map rather than fields of rtce_xdp_config, so that a config map pinned by an
 * older loader keeps its value size. All zero (not yet synced) = the defaults; a max of
 * RTCE_FLOW_LIMIT_NONE = no limit. Keys: struct rtce_hint_limit_key in
 * `hint_flow_limits`, struct rtce_prefix_limit_key in `prefix_flow_limits`; values
 * struct rtce_flow_limit. */
struct rtce_xdp_flow_limit_config {
	__u32 max_per_hint;	     /* 0 = RTCE_FLOW_LIMIT_DEFAULT_PER_HINT */
	__u32 max_per_source_prefix; /* 0 = RTCE_FLOW_LIMIT_DEFAULT_PER_SOURCE_PREFIX */
	__u64 window_ns;	     /* 0 = RTCE_FLOW_LIMIT_DEFAULT_WINDOW_NS */
	__u8 prefix_len4;	     /* 0 = RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V4 */
	__u8 prefix_len6;	     /* 0 = RTCE_FLOW_LIMIT_DEFAULT_PREFIX_V6 */
	__u8 pad[6];
};

/* `hint_keys` array value (one entry, key 0) is struct rtce_hint_keyset (rtce_hint.h). */

/* `flow_budget` per-CPU array value (one entry): a token bucket refilled every window. */
struct rtce_xdp_budget {
	__u64 window_start_ns;
	__u32 used;
	__u32 pad;
};

/* `stun_scratch` per-CPU array value: the copy of a flow-miss datagram's first bytes. */
struct rtce_xdp_scratch {
	__u8 bytes[RTCE_XDP_STUN_SCRATCH];
};

/* Why the program returned what it returned. Every exit of the program counts exactly one
 * reason (event_lost excepted: it is a side counter, not an exit). Directions are
 * enum rtce_xdp_direction (rtce_relay_vocab.h).
 *
 * X(ENUMERATOR, label, verdict, twin): the enum rtce_xdp_reason (RTCE_XDP_<ENUMERATOR>),
 * the metric label (rtcedge_relay_xdp_packets_total{reason=...}), the verdict the program
 * returns for it (RTCE_XDP_VERDICT_<verdict>), and the userspace relay's drop reason it is
 * counted as in rtcedge_relay_dropped_packets_total (RTCE_RELAY_DROP_<twin>; NONE when the
 * packet is not dropped: forwarded, or passed up to the userspace relay, which counts it
 * itself). Labels match the userspace drop reason where they mean the same thing. Values
 * index the pinned counters map: append, never reorder. */
#define RTCE_XDP_REASONS(X)                                                                        \
	X(FORWARDED, forwarded, FORWARD, NONE)			 /* flow hit, or return path */    \
	X(FORWARDED_NEW_FLOW, forwarded_new_flow, FORWARD, NONE) /* first packet, flow created */  \
	X(NO_FLOW, no_flow, PASS, NONE) /* not STUN, no flow (userspace may have one) */           \
	X(STUN_MALFORMED, stun_malformed, PASS, NONE) /* truncated STUN, bad length/attribute */   \
	X(STUN_NOT_BINDING_REQUEST, stun_not_binding_request, PASS, NONE)                          \
	X(STUN_NO_USERNAME, stun_no_username, PASS, NONE)                                          \
	/* forged/corrupt hint, unknown key, other cluster */                                      \
	X(HINT_REJECTED, hint_rejected, DROP, HINT_REJECTED)                                       \
	/* userspace may hold a newer endpoint table */                                            \
	X(UNKNOWN_ENDPOINT, unknown_endpoint, PASS, NONE)                                          \
	/* the flows map refused the insert */                                                     \
	X(FLOW_INSERT_FAILED, flow_insert_failed, PASS, NONE)                                      \
	/* return port datagram without valid PROXY v2 */                                          \
	X(RETURN_MALFORMED, return_malformed, DROP, RETURN_MALFORMED)                              \
	X(RETURN_NO_FLOW, return_no_flow, DROP, RETURN_NO_FLOW)                                    \
	/* the flow belongs to another endpoint */                                                 \
	X(RETURN_WRONG_SENDER, return_wrong_sender, DROP, RETURN_WRONG_SENDER)                     \
	X(PASS_NOT_OURS, pass_not_ours, PASS, NONE) /* not to a VIP:port nor the return port */    \
	X(PASS_IP_OPTIONS, pass_ip_options, PASS, NONE) /* IPv4 with options, to a VIP/return */   \
	X(PASS_IPV6_EXT, pass_ipv6_ext, PASS, NONE) /* IPv6 extension headers, to a VIP/return */  \
	X(PASS_FRAGMENT, pass_fragment, PASS, NONE) /* first fragment to a VIP/return port */      \
	/* IP/UDP lengths disagree (the kernel decides) */                                         \
	X(PASS_BAD_LENGTH, pass_bad_length, PASS, NONE)                                            \
	/* Binding request longer than the STUN window */                                          \
	X(PASS_STUN_TOO_LONG, pass_stun_too_long, PASS, NONE)                                      \
	X(PASS_ZERO_CSUM, pass_zero_csum, PASS, NONE) /* no UDP checksum, and the output is v6 */  \
	/* fib lookup found no neighbour (packet untouched) */                                     \
	X(PASS_NO_NEIGH, pass_no_neigh, PASS, NONE)                                                \
	/* other fib lookup failure (packet untouched) */                                          \
	X(PASS_FIB_FAILED, pass_fib_failed, PASS, NONE)                                            \
	/* no relay address configured for that family */                                          \
	X(PASS_NO_RELAY_ADDR, pass_no_relay_addr, PASS, NONE)                                      \
	X(NEW_FLOW_BUDGET, new_flow_budget, PASS, NONE) /* this CPU's new-flow budget is spent */  \
	/* the hint made flows.max_per_hint flows this window */                                   \
	X(HINT_FLOW_LIMIT, hint_flow_limit, DROP, HINT_FLOW_LIMIT)                                 \
	/* the client's prefix made flows.max_per_source_prefix flows this window */               \
	X(SOURCE_PREFIX_FLOW_LIMIT, source_prefix_flow_limit, DROP, SOURCE_PREFIX_FLOW_LIMIT)      \
	/* valid but unusual (PROXY v2 TLVs, head adjust) */                                       \
	X(PASS_TO_USERSPACE, pass_to_userspace, PASS, NONE)                                        \
	/* a helper failed mid-rewrite (a guard; the checks before it make it unreachable) */      \
	X(ABORTED, aborted, ABORTED, NONE)                                                         \
	/* ring buffer full, flow still created */                                                 \
	X(EVENT_LOST, event_lost, SIDE_COUNTER, NONE)                                              \
	/* owner role: a datagram on peers.listen from outside peers.trusted */                    \
	X(PEER_UNTRUSTED, peer_untrusted, DROP, PEER_UNTRUSTED)                                    \
	/* owner role: a datagram on peers.listen without a valid PROXY v2 header */               \
	X(PEER_MALFORMED, peer_malformed, DROP, PEER_MALFORMED)                                    \
	/* owner role: the flow is another peer's (or local) and no verified check moved it */     \
	X(PEER_WRONG_SENDER, peer_wrong_sender, DROP, PEER_WRONG_SENDER)

/* What the program returns for a reason: FORWARD is XDP_TX or XDP_REDIRECT; SIDE_COUNTER
 * is counted besides the exit's own reason. */
enum rtce_xdp_verdict {
	RTCE_XDP_VERDICT_FORWARD,
	RTCE_XDP_VERDICT_PASS,
	RTCE_XDP_VERDICT_DROP,
	RTCE_XDP_VERDICT_ABORTED,
	RTCE_XDP_VERDICT_SIDE_COUNTER,
};

#define RTCE_XDP_REASON_ENUM_(E, name, verdict, twin) RTCE_XDP_##E,
enum rtce_xdp_reason { RTCE_XDP_REASONS(RTCE_XDP_REASON_ENUM_) RTCE_XDP_REASON_COUNT };
#undef RTCE_XDP_REASON_ENUM_

#define RTCE_XDP_COUNTER_SLOTS ((int)RTCE_XDP_REASON_COUNT * (int)RTCE_XDP_DIR_COUNT)

/* `counters` per-CPU array value; index = reason * RTCE_XDP_DIR_COUNT + direction. */
struct rtce_xdp_counter {
	__u64 packets;
	__u64 bytes; /* frame length as received */
};

/* `hint_failures` per-CPU array (__u64 values): why a hint was rejected, indexed by
 * enum rtce_hint_result (1..5) or RTCE_HINT_WRONG_CLUSTER (rtce_hint.h), as the userspace
 * relay's HintFailure. */
#define RTCE_XDP_HINT_WRONG_CLUSTER RTCE_HINT_WRONG_CLUSTER
#define RTCE_XDP_HINT_FAILURE_SLOTS RTCE_HINT_FAILURE_SLOTS

RTCE_INLINE __u32 rtce_xdp_counter_index(__u32 reason, __u32 direction)
{
	return reason * RTCE_XDP_DIR_COUNT + direction;
}

#ifndef __bpf__
/* Indexed by enum rtce_xdp_reason. */
#define RTCE_XDP_REASON_LABEL_(E, name, verdict, twin) #name,
static const char *const rtce_xdp_reason_names[RTCE_XDP_REASON_COUNT] = {
	RTCE_XDP_REASONS(RTCE_XDP_REASON_LABEL_)};
#undef RTCE_XDP_REASON_LABEL_
#define RTCE_XDP_REASON_VERDICT_(E, name, verdict, twin) RTCE_XDP_VERDICT_##verdict,
static const enum rtce_xdp_verdict rtce_xdp_reason_verdicts[RTCE_XDP_REASON_COUNT] = {
	RTCE_XDP_REASONS(RTCE_XDP_REASON_VERDICT_)};
#undef RTCE_XDP_REASON_VERDICT_
/* The userspace relay's drop reason of each, or RTCE_RELAY_DROP_NONE. */
#define RTCE_XDP_REASON_TWIN_(E, name, verdict, twin) RTCE_RELAY_DROP_##twin,
static const enum rtce_relay_drop_reason rtce_xdp_reason_twins[RTCE_XDP_REASON_COUNT] = {
	RTCE_XDP_REASONS(RTCE_XDP_REASON_TWIN_)};
#undef RTCE_XDP_REASON_TWIN_
#endif

#endif /* RTCE_XDP_H */
