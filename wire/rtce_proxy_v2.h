/* rtce_proxy_v2.h — relay <-> transceiver framing: the PROXY protocol v2 header
 * (haproxy's proxy-protocol.txt, section 2.2), IPv4 and IPv6, DGRAM or STREAM transport.
 *
 * Every datagram between a relay and a transceiver endpoint is one PROXY v2 header and
 * the client's payload, unchanged. The header names the FLOW, not the packet direction:
 * source = the client's address:port, destination = the VIP address:port the client
 * sent to, in both directions. A transceiver answers by echoing the header it received.
 *
 * The transport names the client's: DGRAM for a UDP flow, STREAM for an ICE-TCP flow (RFC 6544),
 * whose connection the relay terminates. Each RFC 4571 frame of that connection travels as
 * one datagram with a STREAM header, and each reply datagram goes back as one frame, so a
 * transceiver sees an ordinary path whose key says TCP (docs/wire-format.md, "ICE-TCP").
 *
 * The signature's first byte is 0x0D (13), outside every RFC 7983 range (STUN 0-3,
 * ZRTP 16-19, DTLS 20-63, TURN 64-79, RTP/RTCP 128-191), so one socket can tell framed
 * datagrams from direct ones by their first byte.
 *
 * The userspace relay may pad a header with a PP2_TYPE_NOOP TLV (section 2.2.7) so that the
 * datagrams it sends one endpoint share a size (UDP GSO); parsers skip every TLV. */
#ifndef RTCE_PROXY_V2_H
#define RTCE_PROXY_V2_H

#include "rtce_flow.h"
#include "rtce_types.h"

#define RTCE_PP2_SIG_LEN	 12
#define RTCE_PP2_FIXED_LEN	 16 /* signature, ver/cmd, family, length */
#define RTCE_PP2_ADDR_LEN_V4	 12
#define RTCE_PP2_ADDR_LEN_V6	 36
#define RTCE_PP2_LEN_V4		 (RTCE_PP2_FIXED_LEN + RTCE_PP2_ADDR_LEN_V4) /* 28 */
#define RTCE_PP2_LEN_V6		 (RTCE_PP2_FIXED_LEN + RTCE_PP2_ADDR_LEN_V6) /* 52 */
#define RTCE_PP2_FIRST_BYTE	 0x0d
#define RTCE_PP2_VER_CMD_PROXY	 0x21 /* version 2, PROXY */
#define RTCE_PP2_VER_CMD_LOCAL	 0x20 /* version 2, LOCAL (health checks; no addresses) */
#define RTCE_PP2_FAM_INET_DGRAM	 0x12
#define RTCE_PP2_FAM_INET6_DGRAM 0x22
#define RTCE_PP2_FAM_INET_STREAM 0x11
#define RTCE_PP2_FAM_INET6_STREAM 0x21
#define RTCE_PP2_TYPE_NOOP	 0x04 /* a TLV parsers skip: padding */
#define RTCE_PP2_TLV_HEADER_LEN	 3    /* type, 16-bit length: the smallest TLV */

static const __u8 rtce_pp2_signature[RTCE_PP2_SIG_LEN] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
							  0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

enum rtce_pp2_result {
	RTCE_PP2_OK = 0,
	RTCE_PP2_TRUNCATED,	     /* shorter than the header it announces */
	RTCE_PP2_BAD_SIGNATURE,	     /* not a PROXY v2 header */
	RTCE_PP2_BAD_VERSION,	     /* version nibble is not 2 */
	RTCE_PP2_NOT_PROXY,	     /* LOCAL command or unknown command */
	RTCE_PP2_UNSUPPORTED_FAMILY, /* not INET/INET6 over DGRAM or STREAM */
	RTCE_PP2_BAD_LENGTH,	     /* address block shorter than its family needs */
	RTCE_PP2_RESULT_COUNT
};

RTCE_INLINE __u32 rtce_pp2_header_len(__u8 family)
{
	return family == RTCE_FAMILY_V6 ? RTCE_PP2_LEN_V6 : RTCE_PP2_LEN_V4;
}

/* Writes the header naming flow `key` into out (source = client, destination = VIP; STREAM
 * for a TCP flow). Returns its length, or 0 when cap is too small, the family or the
 * transport is unknown. */
RTCE_INLINE __u32 rtce_pp2_write_key(__u8 *out, __u32 cap, const struct rtce_flow_key *key)
{
	__u32 alen, i, need;

	if (key->family != RTCE_FAMILY_V4 && key->family != RTCE_FAMILY_V6)
		return 0;
	if (key->transport != RTCE_TRANSPORT_UDP && key->transport != RTCE_TRANSPORT_TCP)
		return 0;
	alen = key->family == RTCE_FAMILY_V6 ? 16 : 4;
	need = rtce_pp2_header_len(key->family);
	if (cap < need)
		return 0;
	for (i = 0; i < RTCE_PP2_SIG_LEN; i++)
		out[i] = rtce_pp2_signature[i];
	out[12] = RTCE_PP2_VER_CMD_PROXY;
	if (key->transport == RTCE_TRANSPORT_TCP)
		out[13] = key->family == RTCE_FAMILY_V6 ? RTCE_PP2_FAM_INET6_STREAM
							: RTCE_PP2_FAM_INET_STREAM;
	else
		out[13] = key->family == RTCE_FAMILY_V6 ? RTCE_PP2_FAM_INET6_DGRAM
							: RTCE_PP2_FAM_INET_DGRAM;
	rtce_store_be16(out + 14, (__u16)(need - RTCE_PP2_FIXED_LEN));
	for (i = 0; i < alen; i++) {
		out[16 + i] = key->client_addr[i];
		out[16 + alen + i] = key->vip_addr[i];
	}
	/* The key's ports are in network order already: copied, not converted. */
	__builtin_memcpy(out + 16 + 2 * alen, &key->client_port_be, 2);
	__builtin_memcpy(out + 18 + 2 * alen, &key->vip_port_be, 2);
	return need;
}

/* Parses a header at the start of a datagram of len bytes into the flow key it names
 * (transport UDP for DGRAM, TCP for STREAM). On RTCE_PP2_OK, *payload_off is where the client
 * payload starts (TLVs after the addresses are skipped, not read). */
RTCE_INLINE enum rtce_pp2_result rtce_pp2_parse_key(const __u8 *p, __u32 len,
						    struct rtce_flow_key *key, __u32 *payload_off)
{
	__u32 i, alen, block;
	__u8 transport = RTCE_TRANSPORT_UDP;

	if (len < RTCE_PP2_FIXED_LEN)
		return len > 0 && p[0] != RTCE_PP2_FIRST_BYTE ? RTCE_PP2_BAD_SIGNATURE
							      : RTCE_PP2_TRUNCATED;
	for (i = 0; i < RTCE_PP2_SIG_LEN; i++)
		if (p[i] != rtce_pp2_signature[i])
			return RTCE_PP2_BAD_SIGNATURE;
	if ((p[12] & 0xf0) != 0x20)
		return RTCE_PP2_BAD_VERSION;
	if (p[12] != RTCE_PP2_VER_CMD_PROXY)
		return RTCE_PP2_NOT_PROXY;
	if (p[13] == RTCE_PP2_FAM_INET_DGRAM)
		alen = 4;
	else if (p[13] == RTCE_PP2_FAM_INET6_DGRAM)
		alen = 16;
	else if (p[13] == RTCE_PP2_FAM_INET_STREAM || p[13] == RTCE_PP2_FAM_INET6_STREAM) {
		alen = p[13] == RTCE_PP2_FAM_INET6_STREAM ? 16 : 4;
		transport = RTCE_TRANSPORT_TCP;
	} else
		return RTCE_PP2_UNSUPPORTED_FAMILY;
	block = rtce_load_be16(p + 14);
	if (block < 2 * alen + 4)
		return RTCE_PP2_BAD_LENGTH;
	if (len < RTCE_PP2_FIXED_LEN + block)
		return RTCE_PP2_TRUNCATED;

	key->family = alen == 16 ? RTCE_FAMILY_V6 : RTCE_FAMILY_V4;
	key->transport = transport;
	key->pad[0] = 0;
	key->pad[1] = 0;
	for (i = 0; i < 16; i++) {
		key->client_addr[i] = i < alen ? p[16 + i] : 0;
		key->vip_addr[i] = i < alen ? p[16 + alen + i] : 0;
	}
	__builtin_memcpy(&key->client_port_be, p + 16 + 2 * alen, 2);
	__builtin_memcpy(&key->vip_port_be, p + 18 + 2 * alen, 2);
	*payload_off = RTCE_PP2_FIXED_LEN + block;
	return RTCE_PP2_OK;
}

#ifndef __bpf__
/* Padding is userspace only: the XDP program forwards frame by frame, with nothing to align. */

/* Writes a NOOP TLV of exactly `len` bytes at out: its type, its length (len - 3) and len - 3
 * zero bytes. Returns len, or 0 when len is below RTCE_PP2_TLV_HEADER_LEN, above cap or
 * above what a TLV can hold. */
RTCE_INLINE __u32 rtce_pp2_write_noop(__u8 *out, __u32 cap, __u32 len)
{
	if (len < RTCE_PP2_TLV_HEADER_LEN || len > cap || len - RTCE_PP2_TLV_HEADER_LEN > 0xffff)
		return 0;
	out[0] = RTCE_PP2_TYPE_NOOP;
	rtce_store_be16(out + 1, (__u16)(len - RTCE_PP2_TLV_HEADER_LEN));
	__builtin_memset(out + RTCE_PP2_TLV_HEADER_LEN, 0, len - RTCE_PP2_TLV_HEADER_LEN);
	return len;
}

/* Copies the PROXY v2 header that starts `framed` (len bytes: header and payload) into out,
 * followed by a NOOP TLV of `pad` bytes, with the header's length field grown by pad: the
 * same flow, whose payload now starts pad bytes later. The header's own TLVs, if any, stay.
 * pad is 0 or at least RTCE_PP2_TLV_HEADER_LEN (no TLV is shorter). Returns the new
 * header's length, or 0 when framed does not start with a whole header (signature, length
 * field), pad is 1 or 2, the length field would pass 65535, or cap is too small. */
RTCE_INLINE __u32 rtce_pp2_write_padded(__u8 *out, __u32 cap, const __u8 *framed, __u32 len,
					__u32 pad)
{
	__u32 i, block, header;

	if (len < RTCE_PP2_FIXED_LEN || (pad > 0 && pad < RTCE_PP2_TLV_HEADER_LEN) || pad > 0xffff)
		return 0; /* (a bounded pad: block + pad below cannot wrap) */
	for (i = 0; i < RTCE_PP2_SIG_LEN; i++)
		if (framed[i] != rtce_pp2_signature[i])
			return 0;
	block = rtce_load_be16(framed + 14);
	header = RTCE_PP2_FIXED_LEN + block;
	if (header > len || block + pad > 0xffff || header + pad > cap)
		return 0;
	__builtin_memcpy(out, framed, header);
	rtce_store_be16(out + 14, (__u16)(block + pad));
	if (pad > 0)
		rtce_pp2_write_noop(out + header, pad, pad);
	return header + pad;
}

/* The same header with host-order ports: the transceiver's path table still keeps this
 * shape until it takes struct rtce_flow_key. New code uses the _key functions; these two
 * are written in terms of them. */
struct rtce_pp2_flow {
	__u8 family; /* RTCE_FAMILY_V4 or RTCE_FAMILY_V6 */
	__u8 pad;
	__u16 client_port;
	__u16 vip_port;
	__u16 pad2;
	__u8 client_addr[16];
	__u8 vip_addr[16];
};

RTCE_INLINE __u32 rtce_pp2_write(__u8 *out, __u32 cap, const struct rtce_pp2_flow *flow)
{
	struct rtce_flow_key key = {};
	__u32 i;

	key.family = flow->family;
	for (i = 0; i < 16; i++) {
		key.client_addr[i] = flow->client_addr[i];
		key.vip_addr[i] = flow->vip_addr[i];
	}
	rtce_store_be16((__u8 *)&key.client_port_be, flow->client_port);
	rtce_store_be16((__u8 *)&key.vip_port_be, flow->vip_port);
	return rtce_pp2_write_key(out, cap, &key);
}

RTCE_INLINE enum rtce_pp2_result rtce_pp2_parse(const __u8 *p, __u32 len,
						struct rtce_pp2_flow *flow, __u32 *payload_off)
{
	struct rtce_flow_key key;
	enum rtce_pp2_result r = rtce_pp2_parse_key(p, len, &key, payload_off);
	__u32 i;

	if (r != RTCE_PP2_OK)
		return r;
	flow->family = key.family;
	flow->pad = 0;
	flow->pad2 = 0;
	for (i = 0; i < 16; i++) {
		flow->client_addr[i] = key.client_addr[i];
		flow->vip_addr[i] = key.vip_addr[i];
	}
	flow->client_port = rtce_load_be16((const __u8 *)&key.client_port_be);
	flow->vip_port = rtce_load_be16((const __u8 *)&key.vip_port_be);
	return RTCE_PP2_OK;
}
#endif

#endif /* RTCE_PROXY_V2_H */
