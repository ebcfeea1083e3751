// SPDX-License-Identifier: GPL-2.0
/* A hash key with three padding bytes the program never writes: the kernel
 * compares whatever the stack holds there, and which bytes those are is
 * decided by code that ran before on the same stack. Here two things left
 * bytes there: a function called right before (it fills its own frame with
 * a pattern, each byte its position times 7, plus 1), and, in the
 * function that builds the key, a zeroed 8-byte temporary whose stack slot
 * the compiler gives the key once the temporary is dead (stack colouring).
 * The table can hold 256 keys that differ only in their padding; which one
 * matches in the original depends on that layout. Folding the lookup of
 * `settings` would remove the temporary and leave the pattern in the
 * padding instead, so no rewrite anywhere under this program is exact:
 * Morpheus keeps everything it reaches as the original's. The matched
 * entry's value goes into the packet's first 4 bytes (XDP_TX); no match
 * passes. (Root's verifier lets a program hand uninitialised stack bytes
 * to a helper.) */
#include "common.h"

struct flow_key {
	__u8 protocol;
	/* 3 bytes of padding, never written */
	__u32 address;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct flow_key);
	__type(value, __u32);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} settings SEC(".maps");

static __attribute__((noinline)) int scribble(struct xdp_md *ctx)
{
	volatile __u8 junk[64];

	for (int i = 0; i < 64; i++)
		junk[i] = (__u8)(i * 7 + 1);
	return junk[ctx->ingress_ifindex & 63];
}

static __attribute__((noinline)) __u32 classify(__u8 protocol, __u32 address)
{
	__u32 *value;

	{
		/* The settings key: its first 4 bytes are read. */
		__u64 zero = 0;
		__u32 *enabled = bpf_map_lookup_elem(&settings, &zero);

		if (!enabled || !*enabled)
			return 0xffffffff;
	}
	struct flow_key key; /* in the temporary's slot */

	key.protocol = protocol;
	key.address = address;
	value = bpf_map_lookup_elem(&flows, &key);
	return value ? *value : 0xffffffff;
}

SEC("xdp")
int padded_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 found;
	__u8 protocol;
	__u32 address;

	if (!ip)
		return XDP_PASS;
	protocol = ip->protocol;
	address = ip->daddr;
	scribble(ctx);
	found = classify(protocol, address);
	if (found == 0xffffffff)
		return XDP_PASS;
	ip = ipv4_header(ctx);
	if (!ip)
		return XDP_ABORTED;
	__builtin_memcpy((void *)(long)ctx->data, &found, sizeof(found));
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
