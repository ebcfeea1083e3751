// SPDX-License-Identifier: GPL-2.0
/* A 1,024-slot backend array looked up at an index from the packet (IP id
 * & 1023), holding a few backends: a small table by content, the other
 * slots zero (never NULL). */
#include "common.h"

struct backend {
	__u32 weight;
	__u32 action;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

SEC("xdp")
int sparse_array_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct backend *backend;
	__u32 index;

	if (!ip)
		return XDP_PASS;
	index = bpf_ntohs(ip->id) & 1023;
	backend = bpf_map_lookup_elem(&backends, &index);
	if (!backend)
		return XDP_ABORTED;
	if (!backend->weight)
		return XDP_PASS;
	return backend->action;
}

char LICENSE[] SEC("license") = "GPL";
