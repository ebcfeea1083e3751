// SPDX-License-Identifier: GPL-2.0
/* bucket = ((signed TOS) / divisor + 9) & 31: the program's own bound is a
 * mask, which LLVM drops once it knows the quotient lies in [-9, 9]
 * (bounds.h). Signed division needs -mcpu=v4. */
#define BUCKETS 32
#include "bounds.h"

static inline __u64 bucket(const struct iphdr *ip, __u64 divisor)
{
	return (__u64)((__s64)(__s8)ip->tos / (__s64)divisor + 9) & 31;
}

SEC("xdp")
int sdiv_prog(struct xdp_md *ctx)
{
	return count_bucket(ctx);
}

char LICENSE[] SEC("license") = "GPL";
