/* rtce_siphash.h — SipHash-2-4 (Aumasson & Bernstein, 2012), the keyed MAC of the routing
 * hint. Cheap enough for XDP: the hint MAC is a single 8-byte block, i.e. 2 compression
 * and 4 finalisation rounds. Checked in tests against the paper's 64 reference vectors. */
#ifndef RTCE_SIPHASH_H
#define RTCE_SIPHASH_H

#include "rtce_types.h"

#define RTCE_SIPHASH_KEY_BYTES 16

struct rtce_siphash_key {
	__u64 k0; /* little-endian load of key bytes 0..7, as the reference does */
	__u64 k1; /* key bytes 8..15 */
};

RTCE_INLINE __u64 rtce_load_le64(const __u8 *p)
{
	return (__u64)p[0] | (__u64)p[1] << 8 | (__u64)p[2] << 16 | (__u64)p[3] << 24 |
	       (__u64)p[4] << 32 | (__u64)p[5] << 40 | (__u64)p[6] << 48 | (__u64)p[7] << 56;
}

RTCE_INLINE void rtce_siphash_key_from_bytes(struct rtce_siphash_key *key,
					     const __u8 bytes[RTCE_SIPHASH_KEY_BYTES])
{
	key->k0 = rtce_load_le64(bytes);
	key->k1 = rtce_load_le64(bytes + 8);
}

#define RTCE_ROTL64(x, b) (__u64)(((x) << (b)) | ((x) >> (64 - (b))))

#define RTCE_SIPROUND(v0, v1, v2, v3)                                                              \
	do {                                                                                       \
		v0 += v1;                                                                          \
		v1 = RTCE_ROTL64(v1, 13);                                                          \
		v1 ^= v0;                                                                          \
		v0 = RTCE_ROTL64(v0, 32);                                                          \
		v2 += v3;                                                                          \
		v3 = RTCE_ROTL64(v3, 16);                                                          \
		v3 ^= v2;                                                                          \
		v0 += v3;                                                                          \
		v3 = RTCE_ROTL64(v3, 21);                                                          \
		v3 ^= v0;                                                                          \
		v2 += v1;                                                                          \
		v1 = RTCE_ROTL64(v1, 17);                                                          \
		v1 ^= v2;                                                                          \
		v2 = RTCE_ROTL64(v2, 32);                                                          \
	} while (0)

/* SipHash-2-4 of len bytes. len is a compile-time constant at every BPF call site, so
 * the block loop is fully unrolled there; C++ uses it for any length. */
RTCE_INLINE __u64 rtce_siphash24(const __u8 *in, __u32 len, const struct rtce_siphash_key *key)
{
	__u64 v0 = 0x736f6d6570736575ULL ^ key->k0;
	__u64 v1 = 0x646f72616e646f6dULL ^ key->k1;
	__u64 v2 = 0x6c7967656e657261ULL ^ key->k0;
	__u64 v3 = 0x7465646279746573ULL ^ key->k1;
	__u32 full = len & ~7U;
	__u32 i;
	__u64 m;
	__u64 last = (__u64)len << 56;

	for (i = 0; i < full; i += 8) {
		m = rtce_load_le64(in + i);
		v3 ^= m;
		RTCE_SIPROUND(v0, v1, v2, v3);
		RTCE_SIPROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	for (i = 0; i < (len & 7U); i++)
		last |= (__u64)in[full + i] << (8 * i);

	v3 ^= last;
	RTCE_SIPROUND(v0, v1, v2, v3);
	RTCE_SIPROUND(v0, v1, v2, v3);
	v0 ^= last;
	v2 ^= 0xff;
	RTCE_SIPROUND(v0, v1, v2, v3);
	RTCE_SIPROUND(v0, v1, v2, v3);
	RTCE_SIPROUND(v0, v1, v2, v3);
	RTCE_SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

#endif /* RTCE_SIPHASH_H */
