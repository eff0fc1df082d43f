/* bpf_compile_check.c — compiled with clang -target bpf at build time so that a change to
 * a wire header that the BPF backend cannot take (libc, unbounded loops, unsupported
 * operations) fails the build here rather than in the XDP program. */
#include <linux/types.h>

#include "rtce_flow.h"
#include "rtce_flow_limit.h"
#include "rtce_hint.h"
#include "rtce_proxy_v2.h"
#include "rtce_stun.h"
#include "rtce_xdp.h"

__attribute__((section("xdp"), used)) int rtce_wire_check(__u8 *pkt)
{
	struct rtce_hint_keyset ks = {};
	struct rtce_hint hint;
	__u32 off = 0, len = 0, payload = 0;
	__u8 hdr[RTCE_PP2_LEN_V6];
	struct rtce_flow_key key = {};
	struct rtce_prefix_limit_key prefix;
	struct rtce_hint_limit_key hint_key;
	struct rtce_flow_limit limit = {};

	if (rtce_stun_server_ufrag(pkt, 128, &off, &len) != RTCE_STUN_OK)
		return 1;
	if (rtce_hint_open(pkt + (off & 63), RTCE_HINT_CHARS, &ks, &hint) != RTCE_HINT_OK)
		return 2;
	rtce_hint_limit_key_of(&hint, &hint_key);
	rtce_prefix_limit_key_of(&key, pkt[0], &prefix);
	if (!rtce_flow_limit_allows(&limit, hint_key.nonce, prefix.addr[0], 8))
		return 3;
	rtce_flow_limit_charge(&limit, hint_key.nonce, prefix.addr[1]);
	if (limit.flows > 1)
		return 4;
	if (rtce_xdp_counter_index(RTCE_XDP_EVENT_LOST, RTCE_XDP_DIR_TO_CLIENT) >=
	    RTCE_XDP_COUNTER_SLOTS)
		return 5;
	key.family = RTCE_FAMILY_V4;
	rtce_pp2_write_key(hdr, sizeof(hdr), &key);
	return rtce_pp2_parse_key(hdr, sizeof(hdr), &key, &payload);
}

char _license[] __attribute__((section("license"), used)) = "GPL";
