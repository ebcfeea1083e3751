// SPDX-License-Identifier: GPL-2.0
/* bpf_for_each_map_elem over a hash map, whose answer depends on the order
 * of the visit: the first backend whose weight exceeds the packet's TOS is
 * chosen and written into the packet as its destination. A hash map is
 * visited bucket by bucket, and where a key lands depends on the map's
 * hash seed, random for every map created: two maps holding the same
 * entries may be visited in different orders. The table is read-only to
 * the program; the visit count is written. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);   /* backend address */
	__type(value, __u32); /* weight */
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} visits SEC(".maps");

struct choice {
	__u32 above; /* the weight to exceed */
	__u32 chosen;
	__u32 visited;
};

static long pick(void *map, __u32 *address, __u32 *weight, struct choice *choice)
{
	choice->visited++;
	if (*weight <= choice->above)
		return 0;
	choice->chosen = *address;
	return 1; /* stop: the first one found is the answer */
}

SEC("xdp")
int iterate_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct choice choice = {0, 0, 0};
	__u32 zero = 0;
	__u64 *count;

	if (!ip)
		return XDP_PASS;
	choice.above = ip->tos;
	bpf_for_each_map_elem(&backends, pick, &choice, 0);
	count = bpf_map_lookup_elem(&visits, &zero);
	if (count)
		*count += choice.visited;
	if (!choice.chosen)
		return XDP_DROP;
	ip->daddr = choice.chosen;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
