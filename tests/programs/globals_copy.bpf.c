// SPDX-License-Identifier: GPL-2.0
/* A configuration global copied whole into a local, as programs often take
 * a consistent view of their configuration (`struct policy p = policy;`):
 * clang keeps the copy as a memcpy because an index into the local varies.
 * (Indexed by tos & 15, not & 3: with an index below the local's alignment
 * LLVM adds it with an OR, which the verifier rejects on a stack pointer.)
 * The loader writes `policy` through mmap; `stats` is copied the same way
 * but the program counts in it. */
#include "common.h"

struct policy {
	__u32 enforce;
	__u8 blocked_ttl;
	__u8 pad[3];
	__u8 verdict_by_tos[16]; /* by tos & 15 */
};
struct policy policy = { 1, 9, { 0 }, { XDP_PASS, XDP_DROP, XDP_TX, XDP_PASS } }; /* .data */

struct stats {
	__u32 packets;
	__u32 by_tos[4];
};
struct stats stats; /* .bss, written by the program */

SEC("xdp")
int globals_copy_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct policy p = policy;
	struct stats seen = stats;

	if (!ip)
		return XDP_PASS;
	stats.packets = seen.packets + 1;
	if (seen.by_tos[ip->tos & 3] > 1000)
		return XDP_PASS;
	if (!p.enforce)
		return XDP_PASS;
	if (ip->ttl == p.blocked_ttl)
		return XDP_DROP;
	return p.verdict_by_tos[ip->tos & 15];
}

char LICENSE[] SEC("license") = "GPL";
