/* rtce_hint.h — the routing hint carried in the server's ICE ufrag.
 *
 * The transceiver that owns a session mints its server ufrag with this codec; the relay
 * (XDP or userspace) opens it from the first STUN Binding request's USERNAME to learn
 * which transceiver endpoint owns the flow, without any lookup service.
 *
 * 12 bytes, big-endian fields, written as 16 characters of the standard base64 alphabet
 * [A-Za-z0-9+/] (ICE-legal ufrag characters; 12 bytes need no '=' padding):
 *
 *   byte 0      version (high nibble, = 1) | key id (low nibble, 0..15)
 *   byte 1      cluster id
 *   bytes 2-3   transceiver endpoint id
 *   bytes 4-7   random per-session nonce
 *   bytes 8-11  MAC = low 32 bits of SipHash-2-4(key[key id], bytes 0..7)
 *
 * See docs/wire-format.md. */
#ifndef RTCE_HINT_H
#define RTCE_HINT_H

#include "rtce_siphash.h"

#define RTCE_HINT_VERSION      1
#define RTCE_HINT_RAW_BYTES    12
#define RTCE_HINT_SIGNED_BYTES 8
#define RTCE_HINT_CHARS	       16
#define RTCE_HINT_MAX_KEY_ID   15
/* Two live keys allow rotation: sign with the new, still accept the old. */
#define RTCE_HINT_MAX_KEYS 2

struct rtce_hint {
	__u8 version;
	__u8 key_id;
	__u8 cluster_id;
	__u16 endpoint_id;
	__u32 nonce;
	__u32 mac;
};

struct rtce_hint_key {
	__u8 id;
	__u8 in_use;
	__u8 pad[6];
	struct rtce_siphash_key key;
};

struct rtce_hint_keyset {
	struct rtce_hint_key keys[RTCE_HINT_MAX_KEYS];
};

/* What rtce_hint_open says of a ufrag: ok, or why it is not a valid hint. X(ENUMERATOR,
 * label): the enum rtce_hint_result, its names (`rtcedge-relay hint decode`) and the relay's
 * hint failure counters all expand from these lists. Append, never reorder: the XDP
 * program's pinned hint_failures map is indexed by these values. */
#define RTCE_HINT_ERRORS(X)                                                                        \
	X(BAD_LENGTH, bad_length)   /* ufrag is not RTCE_HINT_CHARS long: not one of ours */       \
	X(BAD_CHAR, bad_char)	    /* a character outside the base64 alphabet */                  \
	X(BAD_VERSION, bad_version) /* a format version this build does not speak */               \
	X(UNKNOWN_KEY, unknown_key) /* key id not among the live keys */                           \
	X(BAD_MAC, bad_mac)	    /* forged, corrupted or signed with a retired key */
#define RTCE_HINT_RESULTS(X) X(OK, ok) RTCE_HINT_ERRORS(X)
/* A relay also rejects a valid hint minted for another cluster. Its failure counters are
 * indexed by rtce_hint_result and then these (slot 0, ok, is never counted), so the
 * codec's result is its own counter index. */
#define RTCE_HINT_RELAY_ERRORS(X) X(WRONG_CLUSTER, wrong_cluster)
#define RTCE_HINT_FAILURES(X)	  RTCE_HINT_ERRORS(X) RTCE_HINT_RELAY_ERRORS(X)

#define RTCE_HINT_ENUM_(E, name) RTCE_HINT_##E,
enum rtce_hint_result { RTCE_HINT_RESULTS(RTCE_HINT_ENUM_) RTCE_HINT_RESULT_COUNT };
enum rtce_hint_failure_slot {
	RTCE_HINT_FAILURE_BASE_ = RTCE_HINT_RESULT_COUNT - 1,
	RTCE_HINT_RELAY_ERRORS(RTCE_HINT_ENUM_) RTCE_HINT_FAILURE_SLOTS
};
#undef RTCE_HINT_ENUM_

#ifndef __bpf__
#define RTCE_HINT_LABEL_(E, name) #name,
/* Indexed by enum rtce_hint_result. */
static const char *const rtce_hint_result_names[RTCE_HINT_RESULT_COUNT] = {
	RTCE_HINT_RESULTS(RTCE_HINT_LABEL_)};
/* Indexed by hint failure slot: rtce_hint_result, then RTCE_HINT_WRONG_CLUSTER. */
static const char *const rtce_hint_failure_names[RTCE_HINT_FAILURE_SLOTS] = {
	RTCE_HINT_RESULTS(RTCE_HINT_LABEL_) RTCE_HINT_RELAY_ERRORS(RTCE_HINT_LABEL_)};
#undef RTCE_HINT_LABEL_
#endif

/* Value of one base64 character, or -1. Branches rather than a table so that the BPF
 * verifier sees no variable-offset map or stack access. */
RTCE_INLINE int rtce_b64_value(__u8 c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

RTCE_INLINE __u8 rtce_b64_char(__u32 v)
{
	v &= 63;
	if (v < 26)
		return (__u8)('A' + v);
	if (v < 52)
		return (__u8)('a' + v - 26);
	if (v < 62)
		return (__u8)('0' + v - 52);
	return v == 62 ? '+' : '/';
}

RTCE_INLINE void rtce_hint_encode_chars(const __u8 raw[RTCE_HINT_RAW_BYTES],
					__u8 chars[RTCE_HINT_CHARS])
{
	__u32 g, i;

	for (g = 0; g < 4; g++) {
		__u32 w = (__u32)raw[3 * g] << 16 | (__u32)raw[3 * g + 1] << 8 | raw[3 * g + 2];

		for (i = 0; i < 4; i++)
			chars[4 * g + i] = rtce_b64_char(w >> (18 - 6 * i));
	}
}

/* Returns 0, or -1 when a character is outside the alphabet. */
RTCE_INLINE int rtce_hint_decode_chars(const __u8 chars[RTCE_HINT_CHARS],
				       __u8 raw[RTCE_HINT_RAW_BYTES])
{
	__u32 g, i;

	for (g = 0; g < 4; g++) {
		__u32 w = 0;

		for (i = 0; i < 4; i++) {
			int v = rtce_b64_value(chars[4 * g + i]);

			if (v < 0)
				return -1;
			w = w << 6 | (__u32)v;
		}
		raw[3 * g] = (__u8)(w >> 16);
		raw[3 * g + 1] = (__u8)(w >> 8);
		raw[3 * g + 2] = (__u8)w;
	}
	return 0;
}

RTCE_INLINE void rtce_hint_pack(const struct rtce_hint *h, __u8 raw[RTCE_HINT_RAW_BYTES])
{
	raw[0] = (__u8)(h->version << 4 | (h->key_id & 0x0f));
	raw[1] = h->cluster_id;
	rtce_store_be16(raw + 2, h->endpoint_id);
	rtce_store_be32(raw + 4, h->nonce);
	rtce_store_be32(raw + 8, h->mac);
}

RTCE_INLINE void rtce_hint_unpack(const __u8 raw[RTCE_HINT_RAW_BYTES], struct rtce_hint *h)
{
	h->version = raw[0] >> 4;
	h->key_id = raw[0] & 0x0f;
	h->cluster_id = raw[1];
	h->endpoint_id = rtce_load_be16(raw + 2);
	h->nonce = rtce_load_be32(raw + 4);
	h->mac = rtce_load_be32(raw + 8);
}

RTCE_INLINE __u32 rtce_hint_compute_mac(const __u8 raw[RTCE_HINT_RAW_BYTES],
					const struct rtce_siphash_key *key)
{
	return (__u32)rtce_siphash24(raw, RTCE_HINT_SIGNED_BYTES, key);
}

/* Fills version, key id and MAC of h and writes its ufrag characters. */
RTCE_INLINE void rtce_hint_seal(struct rtce_hint *h, const struct rtce_hint_key *key,
				__u8 chars[RTCE_HINT_CHARS])
{
	__u8 raw[RTCE_HINT_RAW_BYTES];

	h->version = RTCE_HINT_VERSION;
	h->key_id = key->id & 0x0f;
	h->mac = 0;
	rtce_hint_pack(h, raw);
	h->mac = rtce_hint_compute_mac(raw, &key->key);
	rtce_store_be32(raw + 8, h->mac);
	rtce_hint_encode_chars(raw, chars);
}

RTCE_INLINE const struct rtce_hint_key *rtce_hint_find_key(const struct rtce_hint_keyset *ks,
							   __u8 key_id)
{
	if (ks->keys[0].in_use && ks->keys[0].id == key_id)
		return &ks->keys[0];
	if (ks->keys[1].in_use && ks->keys[1].id == key_id)
		return &ks->keys[1];
	return 0;
}

/* Decodes a server ufrag and verifies its MAC. out is filled whenever the characters
 * decode (so tools can show the fields of a hint that fails verification). */
RTCE_INLINE enum rtce_hint_result rtce_hint_open(const __u8 *ufrag, __u32 len,
						 const struct rtce_hint_keyset *ks,
						 struct rtce_hint *out)
{
	__u8 raw[RTCE_HINT_RAW_BYTES];
	const struct rtce_hint_key *key;

	if (len != RTCE_HINT_CHARS)
		return RTCE_HINT_BAD_LENGTH;
	if (rtce_hint_decode_chars(ufrag, raw) < 0)
		return RTCE_HINT_BAD_CHAR;
	rtce_hint_unpack(raw, out);
	if (out->version != RTCE_HINT_VERSION)
		return RTCE_HINT_BAD_VERSION;
	key = rtce_hint_find_key(ks, out->key_id);
	if (!key)
		return RTCE_HINT_UNKNOWN_KEY;
	if (rtce_hint_compute_mac(raw, &key->key) != out->mac)
		return RTCE_HINT_BAD_MAC;
	return RTCE_HINT_OK;
}

#endif /* RTCE_HINT_H */
