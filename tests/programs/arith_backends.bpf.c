// SPDX-License-Identifier: GPL-2.0
/* A load balancer picking backends[first + hash % count] for its VIP, at
 * most 8 backends a VIP. A VIP whose count is still 0 picks no backend
 * (the remainder by zero leaves the hash, far past the table) and its
 * packets are dropped. With the count bounded by the program's own check,
 * LLVM's range of the remainder is 0..7, which assumes the count is not 0:
 * once the backends are a compare chain indexed by the remainder, a bound
 * re-imposed from that range for the verifier (backend/bpf/VerifierBounds)
 * must not turn the hash into a backend. */
#include "common.h"

struct vip {
	__u32 first;
	__u32 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct vip);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, __u32);
} backends SEC(".maps");

SEC("xdp")
int balance(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct vip *vip;
	__u32 index, *backend;

	if (!ip)
		return XDP_PASS;
	vip = bpf_map_lookup_elem(&vips, &ip->daddr);
	if (!vip || vip->count > 8)
		return XDP_PASS;
	index = vip->first + (ip->saddr ^ ip->id) % vip->count;
	backend = bpf_map_lookup_elem(&backends, &index);
	if (!backend)
		return XDP_DROP;
	ip->daddr = *backend;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
