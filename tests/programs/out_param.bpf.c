// SPDX-License-Identifier: GPL-2.0
/* Lookups handed back through a pointer out-parameter of functions clang
 * does not inline, as the kernel selftests' test_xdp_noinline load balancer
 * picks its real: the callee stores the lookup's result in the caller's
 * stack slot, the caller loads it back and reads through it. The backend
 * array is only read that way and stays read-only; the counter reached the
 * same way is incremented by the caller, so its map is written. A third
 * function returns its lookup's result instead of storing it. */
#include "common.h"

struct backend {
	__u8 mac[6];
	__u16 weight;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} forwarded SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} verdicts SEC(".maps");

/* 1 when the slot holds a backend, which goes to *out. */
static __noinline int pick_backend(struct backend **out, __u32 slot)
{
	*out = bpf_map_lookup_elem(&backends, &slot);
	if (!*out)
		return 0;
	return (*out)->weight != 0;
}

static __noinline int packet_counter(__u64 **out)
{
	__u32 zero = 0;

	*out = bpf_map_lookup_elem(&forwarded, &zero);
	return *out ? 0 : -1;
}

static __noinline __u32 *verdict_of(__u32 tos)
{
	__u32 slot = tos & 3;

	return bpf_map_lookup_elem(&verdicts, &slot);
}

SEC("xdp")
int out_param_lb(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct backend *backend = 0;
	__u64 *count = 0;
	__u32 *verdict;
	struct ethhdr *eth;

	if (!ip)
		return XDP_PASS;
	verdict = verdict_of(ip->tos);
	if (verdict && *verdict)
		return *verdict == 1 ? XDP_DROP : XDP_PASS;
	if (!pick_backend(&backend, bpf_ntohs(ip->id) & 7))
		return XDP_PASS;
	if (packet_counter(&count) == 0)
		*count += 1;
	eth = (void *)(long)ctx->data;
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	__builtin_memcpy(eth->h_dest, backend->mac, sizeof(eth->h_dest));
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
