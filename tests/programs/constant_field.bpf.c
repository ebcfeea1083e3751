// SPDX-License-Identifier: GPL-2.0
/* A read-only hash table larger than any compare chain, whose `action`
 * field is typically the same in every rule while `mark` differs: the
 * action becomes a constant, the mark stays a load, the lookup stays. The
 * mark is written into the packet so every hit shows. */
#include "common.h"

struct rule {
	__u32 action;
	__u32 mark;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct rule);
} rules SEC(".maps");

SEC("xdp")
int constant_field_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct rule *rule;
	__u32 address;

	if (!ip)
		return XDP_PASS;
	address = ip->daddr;
	rule = bpf_map_lookup_elem(&rules, &address);
	if (!rule)
		return XDP_PASS;
	ip->id = (__u16)rule->mark;
	if (rule->action > XDP_REDIRECT)
		return XDP_ABORTED;
	return rule->action;
}

char LICENSE[] SEC("license") = "GPL";
