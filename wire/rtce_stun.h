/* rtce_stun.h — the minimal STUN walk a relay needs (RFC 8489 framing): is this a
 * Binding request, and what server ufrag does its USERNAME ("<server>:<client>", RFC 8445
 * section 7.2.2) carry? Nothing else of STUN is read here; the transceiver checks
 * MESSAGE-INTEGRITY and FINGERPRINT with libnice. Also the RFC 7983 first-byte
 * classification every demultiplexer of a shared ICE port uses.
 *
 * The attribute walk is bounded by RTCE_STUN_MAX_ATTRS so that it is a bounded loop for
 * the BPF verifier and constant work for hostile input. */
#ifndef RTCE_STUN_H
#define RTCE_STUN_H

#include "rtce_types.h"

#define RTCE_STUN_HEADER_LEN	  20
#define RTCE_STUN_MAGIC_COOKIE	  0x2112A442U
#define RTCE_STUN_BINDING_REQUEST 0x0001
#define RTCE_STUN_ATTR_USERNAME	  0x0006
/* Chrome puts USERNAME first; a few attributes before it are tolerated, more are not ours. */
#define RTCE_STUN_MAX_ATTRS 8
/* RFC 8489: USERNAME is at most 513 bytes. */
#define RTCE_STUN_MAX_USERNAME 513

enum rtce_stun_result {
	RTCE_STUN_OK = 0,
	RTCE_STUN_NOT_STUN,   /* first byte > 3 or wrong magic cookie */
	RTCE_STUN_TRUNCATED,  /* shorter than the header, or length field != datagram */
	RTCE_STUN_BAD_LENGTH, /* message length not a multiple of 4 */
	RTCE_STUN_NOT_BINDING_REQUEST,
	RTCE_STUN_BAD_ATTRIBUTE, /* attribute runs past the message */
	RTCE_STUN_NO_USERNAME,	 /* not within the first RTCE_STUN_MAX_ATTRS attributes */
	RTCE_STUN_BAD_USERNAME,	 /* empty, too long, or no ':' separator */
	RTCE_STUN_RESULT_COUNT
};

/* RFC 7983 section 7: what the first byte of a datagram on a shared ICE port says it is.
 * Every demultiplexer (the relay's STUN walk, the XDP program, the transceiver's media
 * worker) asks this one function, so the ranges are written once. The relay framing's
 * first byte (0x0d) is deliberately OTHER. */
enum rtce_first_byte {
	RTCE_FIRST_BYTE_STUN = 0,     /* 0..3 */
	RTCE_FIRST_BYTE_ZRTP,	      /* 16..19 */
	RTCE_FIRST_BYTE_DTLS,	      /* 20..63 */
	RTCE_FIRST_BYTE_TURN_CHANNEL, /* 64..79 */
	RTCE_FIRST_BYTE_RTP,	      /* 128..191: RTP or RTCP */
	RTCE_FIRST_BYTE_OTHER,	      /* unassigned: 4..15, 80..127, 192..255 */
	RTCE_FIRST_BYTE_COUNT
};

RTCE_INLINE enum rtce_first_byte rtce_classify_first_byte(__u8 b)
{
	if (b <= 3)
		return RTCE_FIRST_BYTE_STUN;
	if (b >= 16 && b <= 19)
		return RTCE_FIRST_BYTE_ZRTP;
	if (b >= 20 && b <= 63)
		return RTCE_FIRST_BYTE_DTLS;
	if (b >= 64 && b <= 79)
		return RTCE_FIRST_BYTE_TURN_CHANNEL;
	if (b >= 128 && b <= 191)
		return RTCE_FIRST_BYTE_RTP;
	return RTCE_FIRST_BYTE_OTHER;
}

/* Checks the 20-byte header against a datagram of len bytes. */
RTCE_INLINE enum rtce_stun_result rtce_stun_check_header(const __u8 *p, __u32 len)
{
	__u32 msg_len;

	if (len < 1 || rtce_classify_first_byte(p[0]) != RTCE_FIRST_BYTE_STUN)
		return RTCE_STUN_NOT_STUN;
	if (len < RTCE_STUN_HEADER_LEN)
		return RTCE_STUN_TRUNCATED;
	if (rtce_load_be32(p + 4) != RTCE_STUN_MAGIC_COOKIE)
		return RTCE_STUN_NOT_STUN;
	msg_len = rtce_load_be16(p + 2);
	if (msg_len & 3)
		return RTCE_STUN_BAD_LENGTH;
	if (RTCE_STUN_HEADER_LEN + msg_len != len)
		return RTCE_STUN_TRUNCATED;
	if (rtce_load_be16(p) != RTCE_STUN_BINDING_REQUEST)
		return RTCE_STUN_NOT_BINDING_REQUEST;
	return RTCE_STUN_OK;
}

/* Finds USERNAME in a Binding request and returns the server ufrag (the part before the
 * first ':') as an offset and length into p. */
RTCE_INLINE enum rtce_stun_result rtce_stun_server_ufrag(const __u8 *p, __u32 len, __u32 *ufrag_off,
							 __u32 *ufrag_len)
{
	enum rtce_stun_result r = rtce_stun_check_header(p, len);
	__u32 off = RTCE_STUN_HEADER_LEN;
	__u32 n, i;

	if (r != RTCE_STUN_OK)
		return r;
	for (n = 0; n < RTCE_STUN_MAX_ATTRS; n++) {
		__u32 type, alen;

		if (off == len)
			return RTCE_STUN_NO_USERNAME;
		if (off + 4 > len)
			return RTCE_STUN_BAD_ATTRIBUTE;
		type = rtce_load_be16(p + off);
		alen = rtce_load_be16(p + off + 2);
		if (off + 4 + alen > len)
			return RTCE_STUN_BAD_ATTRIBUTE;
		if (type == RTCE_STUN_ATTR_USERNAME) {
			if (alen == 0 || alen > RTCE_STUN_MAX_USERNAME)
				return RTCE_STUN_BAD_USERNAME;
			for (i = 0; i < alen && i < RTCE_STUN_MAX_USERNAME; i++) {
				if (p[off + 4 + i] == ':') {
					if (i == 0)
						return RTCE_STUN_BAD_USERNAME;
					*ufrag_off = off + 4;
					*ufrag_len = i;
					return RTCE_STUN_OK;
				}
			}
			return RTCE_STUN_BAD_USERNAME;
		}
		off += 4 + ((alen + 3) & ~3U);
	}
	return RTCE_STUN_NO_USERNAME;
}

#endif /* RTCE_STUN_H */
