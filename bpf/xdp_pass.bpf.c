// SPDX-License-Identifier: GPL-2.0
/* xdp_pass.bpf.c — the smallest XDP program: every frame goes on to the kernel stack.
 *
 * Tests attach it to the veth ends facing the relay (`ip link set dev X xdpdrv obj
 * xdp_pass.bpf.o sec xdp`): a frame that XDP_TX/XDP_REDIRECT sends into a veth is
 * delivered only if the receiving end has an XDP program attached. It also serves as "a
 * foreign XDP program already attached" when testing that --mode auto falls back. */
#include <linux/bpf.h>

#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "GPL";

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	(void)ctx;
	return XDP_PASS;
}
