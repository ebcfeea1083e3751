// SPDX-License-Identifier: GPL-2.0
/* bpf_loop calls a static callback that sums weights from a read-only
 * array; the sum decides the verdict. */
#include "common.h"

#define WEIGHTS 8

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WEIGHTS);
	__type(key, __u32);
	__type(value, __u32);
} weights SEC(".maps");

struct sum {
	__u64 total;
	__u32 limit;
};

static long add_weight(__u32 index, struct sum *sum)
{
	__u32 *weight = bpf_map_lookup_elem(&weights, &index);

	if (weight)
		sum->total += *weight;
	return index + 1 >= sum->limit;
}

SEC("xdp")
int loop_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct sum sum = {0, WEIGHTS};

	if (!ip)
		return XDP_PASS;
	sum.limit = (ip->tos & 7) + 1;
	bpf_loop(WEIGHTS, add_weight, &sum, 0);
	return sum.total > 100 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
