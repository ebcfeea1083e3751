// SPDX-License-Identifier: GPL-2.0
/* A multi-stage packet filter in the style of production ones: an entry
 * that parses and tail-calls its stages through a program array set
 * statically (ACL, rate limit, blocklist), an ACL of RULES rules scanned by
 * an unrolled loop (each rule's configuration beside its hit counter), a
 * rate limit whose threshold its loader sets in a global, per-CPU counters,
 * and an LPM blocklist. */
#include "common.h"
#include <linux/in.h>
#include <linux/udp.h>

#ifndef RULES
#define RULES 64
#endif

enum { STAGE_ACL, STAGE_RATE, STAGE_BLOCKLIST, STAGES };

struct rule {
	__u8 proto; /* 0: any */
	__u8 action; /* 0: no match yet, else XDP verdict + 1 */
	__u16 port_lo;
	__u16 port_hi;
	__u16 pad;
	__u64 hits; /* counted by the data plane */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RULES);
	__type(key, __u32);
	__type(value, struct rule);
} acl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rate_window SEC(".maps");

struct lpm_v4 {
	__u32 prefixlen;
	__u32 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 64);
	__type(key, struct lpm_v4);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} blocklist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} filter_stats SEC(".maps");

__u64 rate_limit = 1000000; /* .data: packets per window, set by the loader */
__u32 blocklist_enabled = 1; /* .data */

int filter_acl(struct xdp_md *ctx);
int filter_rate(struct xdp_md *ctx);
int filter_blocklist(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, STAGES);
	__uint(key_size, sizeof(__u32));
	__array(values, int(void *));
} stages SEC(".maps") = {
	.values = {
		[STAGE_ACL] = (void *)&filter_acl,
		[STAGE_RATE] = (void *)&filter_rate,
		[STAGE_BLOCKLIST] = (void *)&filter_blocklist,
	},
};

static __always_inline void count(__u32 what)
{
	__u64 *counter = bpf_map_lookup_elem(&filter_stats, &what);

	if (counter)
		*counter += 1;
}

static __always_inline struct udphdr *ports(struct xdp_md *ctx, struct iphdr *ip)
{
	struct udphdr *udp = (void *)(ip + 1);

	if (ip->ihl != 5 || (ip->protocol != IPPROTO_UDP && ip->protocol != IPPROTO_TCP) ||
	    (void *)(udp + 1) > (void *)(long)ctx->data_end)
		return 0;
	return udp;
}

SEC("xdp")
int filter_entry(struct xdp_md *ctx)
{
	if (!ipv4_header(ctx))
		return XDP_PASS;
	count(0);
	bpf_tail_call(ctx, &stages, STAGE_ACL);
	return XDP_PASS; /* a stage missing: let it through */
}

SEC("xdp")
int filter_acl(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct udphdr *udp;
	__u16 port;

	if (!ip || !(udp = ports(ctx, ip)))
		return XDP_PASS;
	port = bpf_ntohs(udp->dest);
#pragma unroll
	for (__u32 i = 0; i < RULES; i++) {
		__u32 key = i;
		struct rule *rule = bpf_map_lookup_elem(&acl, &key);

		if (!rule || !rule->action)
			continue;
		if ((!rule->proto || rule->proto == ip->protocol) && port >= rule->port_lo &&
		    port <= rule->port_hi) {
			__sync_fetch_and_add(&rule->hits, 1);
			count(1);
			return rule->action - 1;
		}
	}
	bpf_tail_call(ctx, &stages, STAGE_RATE);
	return XDP_PASS;
}

SEC("xdp")
int filter_rate(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *seen = bpf_map_lookup_elem(&rate_window, &zero);

	if (seen && ++*seen > rate_limit) {
		count(2);
		return XDP_DROP;
	}
	bpf_tail_call(ctx, &stages, STAGE_BLOCKLIST);
	return XDP_PASS;
}

SEC("xdp")
int filter_blocklist(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct lpm_v4 key;
	__u32 *blocked;

	if (!ip || !blocklist_enabled)
		return XDP_PASS;
	key.prefixlen = 32;
	key.addr = ip->saddr;
	blocked = bpf_map_lookup_elem(&blocklist, &key);
	if (blocked) {
		count(3);
		return XDP_DROP;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
