// SPDX-License-Identifier: GPL-2.0
/* A flow table the data plane writes only through its values, keyed by the
 * packet's source address: key-set-filter's kind of table, whose filter
 * the cost model declines once the table holds more keys than compares
 * can beat the lookup for. Both arms of the if/else store the flow's
 * state; clang -O2 sinks them into one store whose debug location is
 * LLVM's merged one (line 0), which must still be reported at a real line:
 * the if's. */
#include "common.h"

struct flow {
	__u64 state;
	__u64 packets;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct flow);
} flows SEC(".maps");

SEC("xdp")
int flow_state_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct flow *flow;
	__u32 source;

	if (!ip)
		return XDP_PASS;
	source = ip->saddr;
	flow = bpf_map_lookup_elem(&flows, &source);
	if (!flow)
		return XDP_PASS;
	if (ip->ttl > 64) /* the merged store's line */
		flow->state = 1;
	else
		flow->state = 2;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
