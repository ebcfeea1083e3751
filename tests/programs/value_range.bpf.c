// SPDX-License-Identifier: GPL-2.0
/* A read-only hash table larger than any compare chain whose `port` field
 * differs between rules but stays below the program's own bound: the
 * program checks it against the table of per-port TOS bytes, then indexes
 * that table with it, which the verifier accepts only while the check (or
 * a clamp) bounds it. constant-fields bounds the load by the rules' range,
 * LLVM deletes the check, and the clamp keeps the index bounded for the
 * verifier. A port at or beyond the bound is ABORTED. The TOS byte and the
 * rule's `mark` are written into the packet so every hit shows. */
#include "common.h"

#define PORTS 16

struct rule {
	__u32 port;
	__u32 mark;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct rule);
} rules SEC(".maps");

/* The TOS byte of each port, set by the control plane (one slot). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[PORTS]);
} port_tos SEC(".maps");

SEC("xdp")
int value_range_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0;
	struct rule *rule;
	__u8 *tos;
	__u32 address, port;

	if (!ip)
		return XDP_PASS;
	address = ip->daddr;
	rule = bpf_map_lookup_elem(&rules, &address);
	if (!rule)
		return XDP_PASS;
	port = rule->port;
	if (port >= PORTS)
		return XDP_ABORTED;
	tos = bpf_map_lookup_elem(&port_tos, &zero);
	if (!tos)
		return XDP_ABORTED;
	ip->tos = tos[port];
	ip->id = (__u16)rule->mark;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
