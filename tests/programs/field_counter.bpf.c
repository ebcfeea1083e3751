// SPDX-License-Identifier: GPL-2.0
/* Configuration and a counter in one value: the rule's action and port are
 * read-only from the data plane, its hit counter is written (atomically)
 * through the same pointer. Key 1 of `stats` is a packet counter, key 0 a
 * limit the program only reads. */
#include "common.h"

struct rule {
	__u32 action;
	__u32 port;
	__u64 hits;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

SEC("xdp")
int field_counter_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0, one = 1;
	struct rule *rule;
	__u64 *count, *limit;

	if (!ip)
		return XDP_PASS;
	count = bpf_map_lookup_elem(&stats, &one);
	if (count)
		__sync_fetch_and_add(count, 1);
	rule = bpf_map_lookup_elem(&rules, &zero);
	if (!rule)
		return XDP_ABORTED;
	__sync_fetch_and_add(&rule->hits, 1);
	limit = bpf_map_lookup_elem(&stats, &zero);
	if (limit && ip->ttl > *limit)
		return XDP_DROP;
	return rule->port == ip->tos ? XDP_PASS : rule->action;
}

char LICENSE[] SEC("license") = "GPL";
