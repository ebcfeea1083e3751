// SPDX-License-Identifier: GPL-2.0
/* An XDP program whose work is gated on where the packet came in: only
 * packets received on the control queue (rx queue 2 of a device; queue 2
 * exists only on a device with three receive queues or more) are checked
 * against a read-only table of allowed sources (Morpheus makes it a
 * compare chain); everything else passes untouched. Nothing of this runs on
 * a packet whose xdp_md names no device. */
#include "common.h"

#define CONTROL_QUEUE 2

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);   /* IPv4 source */
	__type(value, __u32); /* the verdict for it */
} control_sources SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32); /* the interface the last control packet came in on */
} last_control SEC(".maps");

SEC("xdp")
int queue_gate(struct xdp_md *ctx)
{
	struct iphdr *ip;
	__u32 zero = 0, source, *verdict, *last;

	if (ctx->rx_queue_index != CONTROL_QUEUE)
		return XDP_PASS;
	ip = ipv4_header(ctx);
	if (!ip)
		return XDP_DROP;
	last = bpf_map_lookup_elem(&last_control, &zero);
	if (last)
		*last = ctx->ingress_ifindex;
	source = ip->saddr;
	verdict = bpf_map_lookup_elem(&control_sources, &source);
	return verdict ? *verdict : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
