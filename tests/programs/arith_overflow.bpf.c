// SPDX-License-Identifier: GPL-2.0
/* A configured base plus a packet field, in signed C arithmetic: clang
 * marks the addition nsw (C calls signed overflow undefined), and eBPF
 * wraps. With the base folded as a constant near INT_MAX, LLVM would
 * prove the sum never negative and delete the drop the original takes. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s32);
} base SEC(".maps");

SEC("xdp")
int offset(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0;
	__s32 *start, sum;

	if (!ip)
		return XDP_PASS;
	start = bpf_map_lookup_elem(&base, &zero);
	if (!start)
		return XDP_ABORTED;
	sum = *start + ip->ttl;
	if (sum < 0)
		return XDP_DROP;
	ip->tos = (__u8)sum;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
