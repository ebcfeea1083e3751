// SPDX-License-Identifier: GPL-2.0
/* A hash key with three padding bytes the program never writes. The key is
 * built in a function called right after another one that filled its own
 * stack frame with 0xff, so the padding holds 0xff when the kernel hashes
 * the key: entries written with zero padding never match. (Root's verifier
 * lets a program hand uninitialised stack bytes to a helper.) */
#include "common.h"

struct flow_key {
	__u8 protocol;
	/* 3 bytes of padding, never written */
	__u32 address;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct flow_key);
	__type(value, __u32);
} flows SEC(".maps");

static __attribute__((noinline)) int scribble(struct xdp_md *ctx)
{
	volatile __u8 junk[64];

	for (int i = 0; i < 64; i++)
		junk[i] = 0xff;
	return junk[ctx->ingress_ifindex & 63];
}

static __attribute__((noinline)) int classify(__u8 protocol, __u32 address)
{
	struct flow_key key;
	__u32 *action;

	key.protocol = protocol;
	key.address = address;
	action = bpf_map_lookup_elem(&flows, &key);
	return action ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int padded_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u8 protocol;
	__u32 address;

	if (!ip)
		return XDP_PASS;
	protocol = ip->protocol;
	address = ip->daddr;
	if (scribble(ctx) != 0xff)
		return XDP_ABORTED;
	return classify(protocol, address);
}

char LICENSE[] SEC("license") = "GPL";
