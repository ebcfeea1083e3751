// SPDX-License-Identifier: GPL-2.0
/* A chain of tail calls as long as the kernel allows: every hop adds a step
 * (from a read-only configuration array) to a payload byte and tail-calls
 * slot 0 of `jumps` (set by the control plane) until the kernel refuses.
 * The byte counts the hops, so a fallback that costs a tail call shows. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} jumps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} step SEC(".maps");

#define COUNTER_OFFSET (sizeof(struct ethhdr) + sizeof(struct iphdr) + 8)

static __always_inline int hop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *counter = data + COUNTER_OFFSET;
	__u32 zero = 0;
	__u32 *increment = bpf_map_lookup_elem(&step, &zero);

	if ((void *)(counter + 1) > data_end)
		return XDP_PASS;
	*counter += increment ? *increment : 100;
	bpf_tail_call(ctx, &jumps, 0);
	return XDP_TX; /* the chain ends here */
}

SEC("xdp")
int chain_entry(struct xdp_md *ctx)
{
	return hop(ctx);
}

SEC("xdp")
int chain_stage(struct xdp_md *ctx)
{
	return hop(ctx);
}

char LICENSE[] SEC("license") = "GPL";
