// SPDX-License-Identifier: GPL-2.0
/* An array looked up at an index taken from the packet (TOS & 7): every
 * index below max_entries exists, so the lookup never returns NULL. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} levels SEC(".maps");

SEC("xdp")
int array_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 index;
	__u32 *level;

	if (!ip)
		return XDP_PASS;
	index = ip->tos & 7;
	level = bpf_map_lookup_elem(&levels, &index);
	if (!level)
		return XDP_ABORTED;
	return *level ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
