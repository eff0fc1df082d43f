// SPDX-License-Identifier: GPL-2.0
/* bench_xdp.bpf.c — helpers of bench/xdp_prog_cost.cpp, never attached by the relay.
 *
 *   hit_floor     the least a flow-table relay does per packet: read the flow key from an
 *                 untagged IPv4/UDP frame, look it up in rtce_xdp's own `flows` map (the
 *                 benchmark reuses that map's fd), count the packet in a per-CPU array and
 *                 XDP_TX. No rewrite. What a flow hit costs beyond it is the relay's own work.
 *   live_restore  the entry of the live-frames runs (BPF_F_TEST_XDP_LIVE_FRAMES): the kernel
 *                 recycles a page without rewriting its bytes, only the data pointers, so
 *                 a program that rewrote headers would see its own output again. This one
 *                 copies the original first RESTORE_BYTES back, then tail-calls the program
 *                 under test (`under_test[0]`). Every live case runs behind it, so its cost
 *                 is in the floor (the 2-instruction program) as much as in the cases.
 *   live_sink     attached to the veth peer: counts what arrives and drops it (a frame sent
 *                 into a veth is only delivered when the receiving end runs XDP). */
#include <linux/bpf.h>

#include <bpf/bpf_helpers.h>

#include "rtce_flow.h"
#include "rtce_xdp.h"

char _license[] SEC("license") = "GPL";

/* Header bytes the live runs restore: more than any case rewrites in place (a flow hit
 * writes the first 42 bytes of the original frame, the return path bytes 28..70). */
#define RESTORE_BYTES 80

struct live_template {
	__u8 bytes[RESTORE_BYTES];
};

/* Same definition as in rtce_xdp.bpf.c: the benchmark points it at that program's map. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RTCE_XDP_MAX_FLOWS);
	__type(key, struct rtce_flow_key);
	__type(value, struct rtce_xdp_flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rtce_xdp_counter);
} floor_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct live_template);
} live_template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} under_test SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink_count SEC(".maps");

SEC("xdp")
int hit_floor(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct rtce_flow_key key __attribute__((aligned(8))) = {};
	struct rtce_xdp_counter *c;
	__u32 zero = 0;
	__u8 *h = data;

	/* Ethernet 14 + IPv4 20 + UDP 8; addresses at 26 and 30, ports at 34 and 36. */
	if (data + 42 > data_end)
		return XDP_PASS;
	__builtin_memcpy(key.client_addr, h + 26, 4);
	__builtin_memcpy(key.vip_addr, h + 30, 4);
	__builtin_memcpy(&key.client_port_be, h + 34, 2);
	__builtin_memcpy(&key.vip_port_be, h + 36, 2);
	key.family = RTCE_FAMILY_V4;
	if (!bpf_map_lookup_elem(&flows, &key))
		return XDP_PASS;
	c = bpf_map_lookup_elem(&floor_count, &zero);
	if (c) {
		c->packets++;
		c->bytes += (__u64)(data_end - data);
	}
	return XDP_TX;
}

SEC("xdp")
int live_restore(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	const struct live_template *t = bpf_map_lookup_elem(&live_template, &zero);
	__u64 *dst = data;
	const __u64 *src;
	int i;

	if (!t || data + RESTORE_BYTES > data_end)
		return XDP_ABORTED;
	src = (const __u64 *)t->bytes;
#pragma unroll
	for (i = 0; i < RESTORE_BYTES / 8; i++)
		dst[i] = src[i];
	bpf_tail_call(ctx, &under_test, 0);
	return XDP_ABORTED; /* no program under test */
}

SEC("xdp")
int live_sink(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&sink_count, &zero);

	(void)ctx;
	if (n)
		(*n)++;
	return XDP_DROP;
}
