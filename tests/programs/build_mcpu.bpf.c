// SPDX-License-Identifier: GPL-2.0
/* Built with -mcpu=v3 or -mcpu=v4, as projects build for newer kernels:
 * 32-bit subregisters and atomics that fetch (v3), sign-extending loads
 * (v4). Key 0 of `limits` is a limit the program only reads, key 1 a
 * counter it fetches and adds to. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} limits SEC(".maps");

SEC("xdp")
int build_mcpu_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0, one = 1;
	__u64 *count, *limit, seen = 0;

	if (!ip)
		return XDP_PASS;
	count = bpf_map_lookup_elem(&limits, &one);
	if (count)
		seen = __sync_fetch_and_add(count, 1);
	limit = bpf_map_lookup_elem(&limits, &zero);
	if (limit && seen >= *limit)
		return XDP_DROP;
	return (__s8)ip->tos < 0 ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
