// SPDX-License-Identifier: GPL-2.0
/* A 262,144-slot array, more slots than region-as-table takes, looked up
 * at an index from the packet (the destination address's low 18 bits) and
 * at a constant slot (the last: the default action). Read by content while
 * few slots differ from the rest; with many, only its constant slot is
 * read. */
#include "common.h"

#define SLOTS 262144u

struct slot {
	__u32 action;
	__u32 mark;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

SEC("xdp")
int large_array_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 last = SLOTS - 1, index;
	struct slot *slot, *fallback;

	if (!ip)
		return XDP_PASS;
	fallback = bpf_map_lookup_elem(&slots, &last);
	if (!fallback)
		return XDP_ABORTED;
	index = bpf_ntohl(ip->daddr) & (SLOTS - 1);
	slot = bpf_map_lookup_elem(&slots, &index);
	if (!slot)
		return XDP_ABORTED;
	if (slot->action)
		return slot->action;
	return fallback->action ? fallback->action : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
