/* The skeleton of the division-bound programs: a divisor from a read-only
 * configuration array, a bucket computed from a header field, the
 * program's own range check, and a counter per bucket in a map value,
 * indexed by the bucket (so the verifier must know the bucket's range).
 * Once Morpheus makes the divisor a constant, LLVM proves the range check
 * redundant and deletes it; the verifier, which computes no range through
 * BPF's division and remainder instructions, must still see one. */
#pragma once
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} divisor SEC(".maps");

struct buckets {
	__u64 slot[BUCKETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct buckets);
} hits SEC(".maps");

/* Each program defines it: the bucket, or BUCKETS when the program's own
 * range check fails. */
static inline __u64 bucket(const struct iphdr *ip, __u64 divisor);

static __always_inline int count_bucket(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0;
	__u32 *d;
	struct buckets *counts;
	__u64 index;

	if (!ip)
		return XDP_PASS;
	d = bpf_map_lookup_elem(&divisor, &zero);
	counts = bpf_map_lookup_elem(&hits, &zero);
	if (!d || !*d || !counts)
		return XDP_ABORTED;
	index = bucket(ip, *d);
	if (index >= BUCKETS)
		return XDP_PASS;
	counts->slot[index]++;
	return index & 1 ? XDP_DROP : XDP_TX;
}
