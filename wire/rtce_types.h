/* rtce_types.h — fixed-width types and inline marker shared by the XDP program and C++.
 *
 * The wire headers in this folder are the ONE definition of every rtcedge wire format.
 * They are plain C that compiles three ways: clang -target bpf (with vmlinux.h or
 * linux/types.h already included), C and C++. Hence no libc, no heap, no unbounded
 * loops, and explicit byte-order handling (no htons/ntohs). */
#ifndef RTCE_TYPES_H
#define RTCE_TYPES_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#ifndef RTCE_INLINE
#define RTCE_INLINE static inline __attribute__((always_inline))
#endif

RTCE_INLINE __u16 rtce_load_be16(const __u8 *p)
{
	return (__u16)((__u16)p[0] << 8 | p[1]);
}

RTCE_INLINE __u32 rtce_load_be32(const __u8 *p)
{
	return (__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 | (__u32)p[3];
}

RTCE_INLINE void rtce_store_be16(__u8 *p, __u16 v)
{
	p[0] = (__u8)(v >> 8);
	p[1] = (__u8)v;
}

RTCE_INLINE void rtce_store_be32(__u8 *p, __u32 v)
{
	p[0] = (__u8)(v >> 24);
	p[1] = (__u8)(v >> 16);
	p[2] = (__u8)(v >> 8);
	p[3] = (__u8)v;
}

#endif /* RTCE_TYPES_H */
