// SPDX-License-Identifier: GPL-2.0
/* What a snapshot must carry for `specialize` and `explain` to decide as
 * `run` does: a 256-slot class array holding a few classes (the other
 * slots zero), a configuration global in .data beside a counter in .bss,
 * and a bpf_for_each_map_elem callback that reads a one-slot threshold
 * while it walks the addresses the program records. */
#include "common.h"

struct bpf_map;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} class_by_id SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stale_below SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} last_ttl SEC(".maps");

__u32 drop_class = 3; /* .data: configuration, only read */
__u64 packets;        /* .bss: written by the program */

static long count_stale(struct bpf_map *map, __u32 *source, __u32 *ttl, __u32 *stale)
{
	__u32 zero = 0;
	__u32 *below = bpf_map_lookup_elem(&stale_below, &zero);

	if (below && *ttl < *below)
		(*stale)++;
	return 0;
}

SEC("xdp")
int snapshot_parity(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 index, source, ttl, stale = 0, *class;

	__sync_fetch_and_add(&packets, 1);
	if (!ip)
		return XDP_PASS;
	index = bpf_ntohs(ip->id) & 255;
	class = bpf_map_lookup_elem(&class_by_id, &index);
	if (!class)
		return XDP_ABORTED;
	if (*class == drop_class)
		return XDP_DROP;
	source = ip->saddr;
	ttl = ip->ttl;
	bpf_map_update_elem(&last_ttl, &source, &ttl, BPF_ANY);
	bpf_for_each_map_elem(&last_ttl, count_stale, &stale, 0);
	if (stale > 2)
		return XDP_ABORTED;
	return *class ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
