// SPDX-License-Identifier: GPL-2.0
/* Tail calls the kernel counts, by how a program makes them: `attempts_loop`
 * tries the slots of `stages` in a loop until one holds a program (every
 * attempt counts, whether or not its slot holds one), `attempts_two` tries
 * two slots one after the other (one read from `verdict`), `attempts_leaf`
 * makes none and answers from its configuration. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} stages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} verdict SEC(".maps");

SEC("xdp")
int attempts_loop(struct xdp_md *ctx)
{
#pragma clang loop unroll(disable)
	for (__u32 slot = 0; slot < 4; slot++)
		bpf_tail_call(ctx, &stages, slot);
	return XDP_PASS;
}

SEC("xdp")
int attempts_two(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0;
	__u32 *slot;

	if (!ip)
		return XDP_PASS;
	slot = bpf_map_lookup_elem(&verdict, &zero);
	if (!slot)
		return XDP_PASS; /* clang jumps back to the return above */
	bpf_tail_call(ctx, &stages, 2);
	bpf_tail_call(ctx, &stages, *slot);
	return XDP_PASS;
}

SEC("xdp")
int attempts_leaf(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *answer = bpf_map_lookup_elem(&verdict, &zero);

	return answer ? *answer : XDP_ABORTED;
}

char LICENSE[] SEC("license") = "GPL";
