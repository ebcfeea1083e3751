// SPDX-License-Identifier: GPL-2.0
/* A zone firewall in the style of large production filters (iptables-like
 * chains compiled to XDP): the entry finds the destination's zone in an LPM
 * table and tail-calls that zone's chain; each of ZONES chains is its own
 * program scanning its own ACL of RULES rules by an unrolled loop (each
 * rule's configuration beside its hit counter), then counts the packet per
 * zone. The entry, zones_entry, is not the object's first program (clang
 * emits the chains the program array names first): name it to Morpheus.
 * With the defaults (12 zones of 512 rules) the object holds about
 * 100,000 instructions: what Morpheus's compile, verify and injection times
 * are measured on (docs/benchmarks.md). Clang stops unrolling one loop at
 * about 1,000 rules; chains are how large rule sets are split anyway. */
#include "common.h"
#include <linux/in.h>
#include <linux/udp.h>

#ifndef ZONES
#define ZONES 12
#endif
#ifndef RULES
#define RULES 512
#endif

struct rule {
	__u8 proto; /* 0: any */
	__u8 action; /* 0: no match yet, else XDP verdict + 1 */
	__u16 port_lo;
	__u16 port_hi;
	__u16 pad;
	__u64 hits; /* counted by the data plane */
};

struct acl_table {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RULES);
	__type(key, __u32);
	__type(value, struct rule);
};

struct lpm_v4 {
	__u32 prefixlen;
	__u32 addr;
};

/* Destination prefix -> zone (an index into `chains`). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 64);
	__type(key, struct lpm_v4);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} zone_of SEC(".maps");

/* Per zone: packets that matched no rule. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ZONES);
	__type(key, __u32);
	__type(value, __u64);
} unmatched SEC(".maps");

__u32 default_verdict = XDP_PASS; /* .data: what no rule matches gets, set by the loader */

static __always_inline int scan(struct xdp_md *ctx, void *acl, __u32 zone)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct udphdr *udp;
	__u64 *missed;
	__u16 port;

	if (!ip)
		return XDP_PASS;
	udp = (void *)(ip + 1);
	if (ip->ihl != 5 || (ip->protocol != IPPROTO_UDP && ip->protocol != IPPROTO_TCP) ||
	    (void *)(udp + 1) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	port = bpf_ntohs(udp->dest);
#pragma unroll
	for (__u32 i = 0; i < RULES; i++) {
		__u32 key = i;
		struct rule *rule = bpf_map_lookup_elem(acl, &key);

		if (!rule || !rule->action)
			continue;
		if ((!rule->proto || rule->proto == ip->protocol) && port >= rule->port_lo &&
		    port <= rule->port_hi) {
			__sync_fetch_and_add(&rule->hits, 1);
			return rule->action - 1;
		}
	}
	missed = bpf_map_lookup_elem(&unmatched, &zone);
	if (missed)
		*missed += 1;
	return default_verdict;
}

/* Zone N: its ACL `acl_N` and its chain program `chain_N`. */
#define ZONE(N)                                                                        \
	struct acl_table acl_##N SEC(".maps");                                         \
	SEC("xdp") int chain_##N(struct xdp_md *ctx) { return scan(ctx, &acl_##N, N); }

ZONE(0) ZONE(1) ZONE(2) ZONE(3) ZONE(4) ZONE(5)
#if ZONES > 6
ZONE(6) ZONE(7) ZONE(8) ZONE(9) ZONE(10) ZONE(11)
#endif
#if ZONES != 6 && ZONES != 12
#error "ZONES is 6 or 12"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, ZONES);
	__uint(key_size, sizeof(__u32));
	__array(values, int(void *));
} chains SEC(".maps") = {
	.values = {
		(void *)&chain_0, (void *)&chain_1, (void *)&chain_2,
		(void *)&chain_3, (void *)&chain_4, (void *)&chain_5,
#if ZONES > 6
		(void *)&chain_6, (void *)&chain_7, (void *)&chain_8,
		(void *)&chain_9, (void *)&chain_10, (void *)&chain_11,
#endif
	},
};

SEC("xdp")
int zones_entry(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct lpm_v4 key;
	__u32 *zone;

	if (!ip)
		return XDP_PASS;
	key.prefixlen = 32;
	key.addr = ip->daddr;
	zone = bpf_map_lookup_elem(&zone_of, &key);
	if (!zone)
		return XDP_PASS; /* no zone: not ours to filter */
	bpf_tail_call(ctx, &chains, *zone);
	return XDP_PASS; /* an empty chain slot: let it through */
}

char LICENSE[] SEC("license") = "GPL";
