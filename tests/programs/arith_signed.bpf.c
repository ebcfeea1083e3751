// SPDX-License-Identifier: GPL-2.0
/* Signed division and remainder by configured divisors (-mcpu=v4): eBPF
 * defines x / 0 = 0, x % 0 = x, MIN / -1 = MIN and MIN % -1 = 0, where
 * LLVM calls each undefined. The quotient and remainder of the packet's
 * addresses, as signed 32- and 64-bit values, are written back into it. */
#include "common.h"

struct divisors {
	__s32 narrow;
	__s32 pad;
	__s64 wide;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct divisors);
} divisors SEC(".maps");

SEC("xdp")
int signed_division(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct divisors *by;
	__u32 zero = 0;
	__s64 wide;

	if (!ip)
		return XDP_PASS;
	by = bpf_map_lookup_elem(&divisors, &zero);
	if (!by)
		return XDP_ABORTED;
	wide = (__s64)(((__u64)ip->saddr << 32) | ip->daddr);
	ip->saddr = (__u32)((__s32)ip->saddr / by->narrow);
	ip->daddr = (__u32)((__s32)ip->daddr % by->narrow);
	ip->id = (__u16)(wide / by->wide);
	ip->check = (__u16)(wide % by->wide);
	return ip->saddr & 1 ? XDP_DROP : XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
