// SPDX-License-Identifier: GPL-2.0
/* Clocks and random numbers read where a subprogram is hardest to add: the
 * entry's own frame takes nearly all of the 512 bytes of stack, it makes
 * tail calls, and a subprogram of its own reads the clock too. The copies
 * shadow validation and the fuzzer compare call the replay runtime as
 * subprograms in place of those helpers (backend/bpf/ComparedCopy): the
 * kernel has to take them beside the full frame and the tail calls. */
#include "common.h"

struct stamp_config {
	__u32 percent; /* of packets sent on to the next stage */
	__u32 verdict;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stamp_config);
} stamp_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64); /* the coarse clock at the slot's latest packet */
} last_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stages SEC(".maps");

static __attribute__((noinline)) __u64 stamp(__u32 slot)
{
	__u64 now = bpf_ktime_get_coarse_ns();
	__u64 *seen = bpf_map_lookup_elem(&last_seen, &slot);

	if (seen)
		*seen = now;
	return now;
}

SEC("xdp")
int deep_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct stamp_config *config;
	__u8 scratch[448];
	__u32 zero = 0, draw;

	config = bpf_map_lookup_elem(&stamp_config, &zero);
	if (!ip || !config)
		return XDP_PASS;
	__builtin_memset(scratch, ip->ttl, sizeof(scratch));
	draw = bpf_get_prandom_u32();
	scratch[(ip->saddr & 0x3f) * 7] = (__u8)draw;
	if (draw % 100 < config->percent) {
		stamp(1);
		bpf_tail_call(ctx, &stages, 0);
	}
	if ((bpf_ktime_get_ns() >> 10) & 1)
		stamp(0);
	else
		stamp(2);
	return scratch[(ip->daddr & 0x3f) * 7] & 1 ? config->verdict : XDP_PASS;
}

SEC("xdp")
int next_stage(struct xdp_md *ctx)
{
	return stamp(3) & 1 ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
