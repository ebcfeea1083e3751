// SPDX-License-Identifier: GPL-2.0
/* An XDP program in a section named as before libbpf 1.0 (SEC("xdp_prog"),
 * as iproute2 and old samples used): libbpf cannot tell its type, so it
 * loads only with --prog-type xdp, as with bpftool's 'type xdp'. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} legacy_actions SEC(".maps");

SEC("xdp_prog")
int legacy_entry(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 index;
	__u32 *action;

	if (!ip)
		return XDP_PASS;
	index = ip->protocol & 3;
	action = bpf_map_lookup_elem(&legacy_actions, &index);
	return action && *action <= XDP_REDIRECT - 1 ? *action : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
