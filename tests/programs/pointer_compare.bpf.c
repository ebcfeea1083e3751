// SPDX-License-Identifier: GPL-2.0
/* Two lookups of different keys; the program compares the value pointers
 * (the same entry or not), which the kernel answers by identity, not by
 * the bytes the entries hold. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} zones SEC(".maps");

SEC("xdp")
int compare_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 source, destination;
	__u32 *from, *to;

	if (!ip)
		return XDP_PASS;
	source = ip->saddr;
	destination = ip->daddr;
	from = bpf_map_lookup_elem(&zones, &source);
	to = bpf_map_lookup_elem(&zones, &destination);
	if (!from || !to)
		return XDP_PASS;
	if (from == to)
		return XDP_DROP; /* one entry: the same address */
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
