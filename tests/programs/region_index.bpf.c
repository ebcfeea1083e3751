// SPDX-License-Identifier: GPL-2.0
/* A loop bounds an index: the first of a class's seven rule bits a packet
 * matches, 7 when it matches none (0..7). The index then picks one byte of
 * an 8-byte value, a hit counter per rule. The loop reads only the class's
 * rule bits (a read-only array, one slot per TOS: too large for a compare
 * chain, so no constant reaches the verifier per path): region-as-table
 * turns it into a byte loaded from a derived table, which the verifier
 * knows only as 0..255; the counter's index must keep the loop's bound. */
#include "common.h"

#define RULES 8

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} class_rules SEC(".maps");

struct tally {
	__u8 hits[RULES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tally);
} tallies SEC(".maps");

SEC("xdp")
int region_index(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 class, zero = 0, rule = RULES - 1, i;
	struct tally *tally;
	__u32 *bits;

	if (!ip)
		return XDP_PASS;
	class = ip->tos;
	bits = bpf_map_lookup_elem(&class_rules, &class);
	if (!bits)
		return XDP_ABORTED;
	for (i = 0; i < RULES - 1; i++)
		if (*bits & (1u << i)) {
			rule = i;
			break;
		}
	tally = bpf_map_lookup_elem(&tallies, &zero);
	if (!tally)
		return XDP_ABORTED;
	tally->hits[rule]++;
	return rule & 1 ? XDP_DROP : XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
