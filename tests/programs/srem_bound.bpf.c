// SPDX-License-Identifier: GPL-2.0
/* bucket = ((signed TOS) % divisor + 6) & 15: the program's own bound is a
 * mask, which LLVM drops once it knows the remainder lies in [-6, 6]
 * (bounds.h). Signed remainder needs -mcpu=v4. */
#define BUCKETS 16
#include "bounds.h"

static inline __u64 bucket(const struct iphdr *ip, __u64 divisor)
{
	return (__u64)((__s64)(__s8)ip->tos % (__s64)divisor + 6) & 15;
}

SEC("xdp")
int srem_prog(struct xdp_md *ctx)
{
	return count_bucket(ctx);
}

char LICENSE[] SEC("license") = "GPL";
