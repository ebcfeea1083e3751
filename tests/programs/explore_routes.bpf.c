// SPDX-License-Identifier: GPL-2.0
/* A route lookup the cost model can give several representations (a
 * search, a derived table, derived hashes per prefix length, the trie),
 * for `run --explore`'s tests: the destination's route names a class,
 * and a per-CPU counter per class shows every packet's answer (class 0:
 * not IPv4; ROUTE_MISS: no route). Every packet is dropped after it is
 * counted, so the counters hold every verdict the traffic got. */
#include "common.h"

#define CLASSES 32
#define ROUTE_MISS (CLASSES - 1)

struct route_key {
	__u32 prefixlen;
	__u32 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct route_key);
	__type(value, __u32);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CLASSES);
	__type(key, __u32);
	__type(value, __u64);
} classes SEC(".maps");

SEC("xdp")
int explore_routes(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 class = 0;

	if (ip) {
		struct route_key key = {32, ip->daddr};
		__u32 *route = bpf_map_lookup_elem(&routes, &key);

		class = route && *route < ROUTE_MISS ? *route : ROUTE_MISS;
	}
	__u64 *count = bpf_map_lookup_elem(&classes, &class);
	if (count)
		*count += 1;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
