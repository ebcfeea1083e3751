// SPDX-License-Identifier: GPL-2.0
/* bucket = ttl % divisor, checked below 10 (bounds.h): with a divisor of
 * 10 the bound the verifier needs is 9, tighter than any power-of-two mask. */
#define BUCKETS 10
#include "bounds.h"

static inline __u64 bucket(const struct iphdr *ip, __u64 divisor)
{
	return ip->ttl % divisor;
}

SEC("xdp")
int urem_prog(struct xdp_md *ctx)
{
	return count_bucket(ctx);
}

char LICENSE[] SEC("license") = "GPL";
