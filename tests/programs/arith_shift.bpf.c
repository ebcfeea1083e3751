// SPDX-License-Identifier: GPL-2.0
/* Shifts by counts read from configuration: a 32-bit left shift, a 64-bit
 * right shift, an arithmetic shift of a signed 32-bit value and a shift of
 * a byte, each written into the packet. eBPF masks a count to the register
 * it shifts in (with ALU32, 32 bits for 32-bit values; without, 64), where
 * LLVM calls a shift by the width or more poison: with the counts folded
 * as constants, every count (0, 31, 32, 40, 63, 64, 255, ...) must shift
 * as the original shifted. Built with -mcpu=v2 and -mcpu=v3. */
#include "common.h"

struct shifts {
	__u32 left32;
	__u32 right64;
	__u32 arithmetic32;
	__u8 left8;
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct shifts);
} shifts SEC(".maps");

SEC("xdp")
int shift(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct shifts *by;
	__u32 zero = 0;
	__u64 wide;

	if (!ip)
		return XDP_PASS;
	by = bpf_map_lookup_elem(&shifts, &zero);
	if (!by)
		return XDP_ABORTED;
	wide = ((__u64)ip->saddr << 32) | ip->daddr;
	ip->saddr = ip->saddr << by->left32;
	ip->daddr = (__u32)(wide >> by->right64);
	ip->id = (__u16)((__s32)(ip->check << 16) >> by->arithmetic32);
	ip->tos = (__u8)(ip->tos << by->left8);
	return ip->saddr ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
