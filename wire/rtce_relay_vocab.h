/* rtce_relay_vocab.h — the userspace relay's counter vocabularies: why it drops a datagram,
 * and the two directions every relay counter (userspace or XDP) is split by.
 *
 * Each vocabulary is one X-macro list. The C enum, the metric label string
 * (rtcedge_relay_*{reason=...,direction=...}) and the C++ enum (loader/core/relay_core.h)
 * all expand from it, so a reason added here is counted, named and exported everywhere. A
 * list entry is X(ENUMERATOR, label). Values index counters and pinned BPF maps: append,
 * never reorder. The hint failures live in rtce_hint.h, the XDP program's exit reasons
 * (with the drop reason each one folds into) in rtce_xdp.h. */
#ifndef RTCE_RELAY_VOCAB_H
#define RTCE_RELAY_VOCAB_H

/* Why the userspace relay dropped a datagram. */
#define RTCE_RELAY_DROP_REASONS(X)                                                                 \
	/* non-STUN packet from a client with no flow */                                           \
	X(NO_FLOW, no_flow)                                                                        \
	/* truncated STUN, bad length, bad attribute, bad USERNAME */                              \
	X(STUN_MALFORMED, stun_malformed)                                                          \
	/* STUN, but not a Binding request */                                                      \
	X(STUN_NOT_BINDING_REQUEST, stun_not_binding_request)                                      \
	/* Binding request without USERNAME */                                                     \
	X(STUN_NO_USERNAME, stun_no_username)                                                      \
	/* server ufrag is not a valid hint (RTCE_HINT_FAILURES, rtce_hint.h) */                   \
	X(HINT_REJECTED, hint_rejected)                                                            \
	/* valid hint naming an endpoint this relay does not know */                               \
	X(UNKNOWN_ENDPOINT, unknown_endpoint)                                                      \
	/* table full and no flow idle long enough to evict */                                     \
	X(FLOW_TABLE_FULL, flow_table_full)                                                        \
	/* datagram on the return socket without a valid PROXY v2 header */                        \
	X(RETURN_MALFORMED, return_malformed)                                                      \
	/* framed datagram for a flow this worker does not have */                                 \
	X(RETURN_NO_FLOW, return_no_flow)                                                          \
	/* framed datagram from an address that does not own the flow */                           \
	X(RETURN_WRONG_SENDER, return_wrong_sender)                                                \
	/* datagram larger than the receive buffer (truncated by the kernel) */                    \
	X(OVERSIZE, oversize)                                                                      \
	/* the kernel refused to send (e.g. socket buffer full) */                                 \
	X(SEND_ERROR, send_error)                                                                  \
	/* no flow; waiting for the flow store, but no room left to wait */                        \
	X(FLOW_LOOKUP_QUEUE_FULL, flow_lookup_queue_full)                                          \
	/* no flow; the flow store lookup budget was spent */                                      \
	X(FLOW_LOOKUP_RATE_LIMITED, flow_lookup_rate_limited)                                      \
	/* waited for the flow store longer than flow_store.lookup_timeout */                      \
	X(FLOW_LOOKUP_TIMEOUT, flow_lookup_timeout)                                                \
	/* waited, and the flow store had no such flow (or was down) */                            \
	X(FLOW_NOT_RECOVERED, flow_not_recovered)                                                  \
	/* valid hint, but it made flows.max_per_hint flows this window */                         \
	X(HINT_FLOW_LIMIT, hint_flow_limit)                                                        \
	/* valid hint, but the client's prefix made flows.max_per_source_prefix flows */           \
	X(SOURCE_PREFIX_FLOW_LIMIT, source_prefix_flow_limit)                                      \
	/* reply the XDP program passed up; this tick's flows map lookup budget was spent */       \
	X(RETURN_LOOKUP_RATE_LIMITED, return_lookup_rate_limited)                                  \
	/* datagram on peers.listen from an address outside peers.trusted */                       \
	X(PEER_UNTRUSTED, peer_untrusted)                                                          \
	/* datagram on peers.listen without a valid PROXY v2 header */                             \
	X(PEER_MALFORMED, peer_malformed)                                                          \
	/* forwarded datagram of a flow that another peer relay (or no peer) owns */               \
	X(PEER_WRONG_SENDER, peer_wrong_sender)                                                    \
	/* waited; the flow store named a peer cluster this relay no longer serves */              \
	X(FLOW_CLUSTER_GONE, flow_cluster_gone)

/* A flow's role in the global relay (docs/global-relay.md): `local` (client and transceiver
 * both here), `ingress` (the client entered here; the hint names another cluster, whose
 * relay gets the flow's packets) or `owner` (the client entered at a peer relay, whose
 * forwarded packets reach this cluster's transceiver). */
#define RTCE_RELAY_FLOW_ROLES(X)                                                                   \
	X(LOCAL, local)                                                                            \
	X(INGRESS, ingress)                                                                        \
	X(OWNER, owner)

/* Direction of a counter: client -> transceiver (everything that is not the return path,
 * including traffic that is not ours) and transceiver -> client (the return port). */
#define RTCE_RELAY_DIRECTIONS(X)                                                                   \
	X(TO_TRANSCEIVER, client_to_transceiver)                                                   \
	X(TO_CLIENT, transceiver_to_client)

#define RTCE_RELAY_DROP_ENUM_(E, name) RTCE_RELAY_DROP_##E,
enum rtce_relay_drop_reason {
	RTCE_RELAY_DROP_REASONS(RTCE_RELAY_DROP_ENUM_) RTCE_RELAY_DROP_COUNT
};
#undef RTCE_RELAY_DROP_ENUM_
/* "No userspace twin" in the XDP reason table (rtce_xdp.h). */
#define RTCE_RELAY_DROP_NONE RTCE_RELAY_DROP_COUNT

/* Named for the XDP program, which counted by direction first; the userspace relay's
 * Direction takes the same values. */
#define RTCE_RELAY_DIR_ENUM_(E, name) RTCE_XDP_DIR_##E,
enum rtce_xdp_direction { RTCE_RELAY_DIRECTIONS(RTCE_RELAY_DIR_ENUM_) RTCE_XDP_DIR_COUNT };
#undef RTCE_RELAY_DIR_ENUM_

#define RTCE_RELAY_ROLE_ENUM_(E, name) RTCE_RELAY_ROLE_##E,
enum rtce_relay_flow_role { RTCE_RELAY_FLOW_ROLES(RTCE_RELAY_ROLE_ENUM_) RTCE_RELAY_ROLE_COUNT };
#undef RTCE_RELAY_ROLE_ENUM_

#ifndef __bpf__
/* Metric labels, indexed by the enums above. */
#define RTCE_VOCAB_LABEL_(E, name) #name,
static const char *const rtce_relay_flow_role_names[RTCE_RELAY_ROLE_COUNT] = {
	RTCE_RELAY_FLOW_ROLES(RTCE_VOCAB_LABEL_)};
static const char *const rtce_relay_drop_reason_names[RTCE_RELAY_DROP_COUNT] = {
	RTCE_RELAY_DROP_REASONS(RTCE_VOCAB_LABEL_)};
static const char *const rtce_xdp_direction_names[RTCE_XDP_DIR_COUNT] = {
	RTCE_RELAY_DIRECTIONS(RTCE_VOCAB_LABEL_)};
#undef RTCE_VOCAB_LABEL_
#endif

#endif /* RTCE_RELAY_VOCAB_H */
