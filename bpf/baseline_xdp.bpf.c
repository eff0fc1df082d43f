// SPDX-License-Identifier: GPL-2.0
/* baseline_xdp.bpf.c — the benchmark's floor: the least an XDP UDP reflector can do.
 * Parses Ethernet/IPv4/UDP, swaps MACs, addresses and ports, and sends the frame back out
 * of the port it came in on (XDP_TX). Swapping leaves both checksums valid (a one's
 * complement sum does not depend on word order). Everything else is XDP_PASS.
 * Optionally limited to one UDP destination port (`port_be` in .bss, 0 = any). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "GPL";

/* Set through the skeleton (skel->bss->port_be) before attaching. */
__be16 port_be = 0;

SEC("xdp")
int baseline_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct udphdr *udp;
	unsigned char mac[ETH_ALEN];
	__be32 addr;
	__be16 port;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end || iph->ihl != 5 || iph->protocol != IPPROTO_UDP)
		return XDP_PASS;
	udp = (void *)(iph + 1);
	if ((void *)(udp + 1) > data_end)
		return XDP_PASS;
	if (port_be && udp->dest != port_be)
		return XDP_PASS;

	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	addr = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = addr;
	port = udp->source;
	udp->source = udp->dest;
	udp->dest = port;
	return XDP_TX;
}
