// SPDX-License-Identifier: GPL-2.0
/* A remainder by a packet byte masked to 0..7, written back into the
 * packet; no table is involved in it. LLVM's range of the remainder,
 * [0, 6], assumes the divisor is not 0; eBPF's x % 0 is x. Every version
 * Morpheus builds passes the whole program through the verifier-bounds
 * fix-up, so the remainder must keep the machine's value in every one.
 * The configuration only gives Morpheus something to specialize. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} verdict SEC(".maps");

SEC("xdp")
int rem_by_tos(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0, *action;

	if (!ip)
		return XDP_PASS;
	action = bpf_map_lookup_elem(&verdict, &zero);
	if (!action)
		return XDP_ABORTED;
	ip->ttl = ip->ttl % (ip->tos & 7);
	return *action == 1 ? XDP_DROP : XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
