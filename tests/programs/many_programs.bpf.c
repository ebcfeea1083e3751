// SPDX-License-Identifier: GPL-2.0
/* PROGRAMS programs in one object, each of the same modest size, to measure
 * how Morpheus's cycle grows with the number of programs of an object
 * (docs/benchmarks.md, "Many programs in one object") and to test objects
 * past 64 programs. Program K (0 is the entry, many_entry) owns the packets
 * whose destination address ends in a byte B with B % PROGRAMS == K: the
 * entry handles its own and tail-calls stage_K through `stages` for the
 * others. Every program scans its own ACL `rules_K` (RULES slots, read-only:
 * the control plane writes it) by an unrolled loop, so each is specialized
 * on its own table, and counts the packet per program and verdict in
 * `counts` (written by the data plane). About 300 instructions a program.
 * clang emits the stages first: name the entry to Morpheus.
 *
 * -DPROGRAMS=N: 1, or a multiple of 10 up to 100 (default 10).
 * -DINDEPENDENT: no `stages` array and no tail call: every program is
 * attached on its own (the entry handles only its own packets), so the
 * object makes no tail call and a guard may fall back by one. */
#include "common.h"
#include <linux/in.h>
#include <linux/udp.h>

#ifndef PROGRAMS
#define PROGRAMS 10
#endif
#ifndef RULES
#define RULES 16
#endif
#if PROGRAMS != 1 && (PROGRAMS % 10 != 0 || PROGRAMS > 100)
#error "PROGRAMS is 1 or a multiple of 10 up to 100"
#endif

#define VERDICTS 8 /* counts' slots per program: XDP verdicts fit */

struct rule {
	__u8 proto; /* 0: any */
	__u8 action; /* 0: no match yet, else XDP verdict + 1 */
	__u16 port_lo;
	__u16 port_hi;
	__u16 pad;
};

struct rule_table {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RULES);
	__type(key, __u32);
	__type(value, struct rule);
};

/* Per program and verdict: packets. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROGRAMS * VERDICTS);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline int scan(struct xdp_md *ctx, void *rules, __u32 program)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct udphdr *udp;
	__u32 verdict = XDP_PASS, slot;
	__u64 *count;
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
		struct rule *rule = bpf_map_lookup_elem(rules, &key);

		if (!rule || !rule->action)
			continue;
		if ((!rule->proto || rule->proto == ip->protocol) && port >= rule->port_lo &&
		    port <= rule->port_hi) {
			verdict = rule->action - 1;
			break;
		}
	}
	slot = program * VERDICTS + (verdict & (VERDICTS - 1));
	count = bpf_map_lookup_elem(&counts, &slot);
	if (count)
		*count += 1;
	return verdict;
}

/* Stage K: its ACL `rules_K` and its program `stage_K`. */
#define STAGE(K)                                                                       \
	struct rule_table rules_##K SEC(".maps");                                      \
	SEC("xdp") int stage_##K(struct xdp_md *ctx) { return scan(ctx, &rules_##K, K); }
#define TEN_STAGES(D)                                                                  \
	STAGE(D##0) STAGE(D##1) STAGE(D##2) STAGE(D##3) STAGE(D##4)                    \
	STAGE(D##5) STAGE(D##6) STAGE(D##7) STAGE(D##8) STAGE(D##9)
#define SLOT(K) [K] = (void *)&stage_##K,
#define TEN_SLOTS(D)                                                                   \
	SLOT(D##0) SLOT(D##1) SLOT(D##2) SLOT(D##3) SLOT(D##4)                         \
	SLOT(D##5) SLOT(D##6) SLOT(D##7) SLOT(D##8) SLOT(D##9)

#if PROGRAMS >= 10
STAGE(1) STAGE(2) STAGE(3) STAGE(4) STAGE(5) STAGE(6) STAGE(7) STAGE(8) STAGE(9)
#endif
#if PROGRAMS > 10
TEN_STAGES(1)
#endif
#if PROGRAMS > 20
TEN_STAGES(2)
#endif
#if PROGRAMS > 30
TEN_STAGES(3)
#endif
#if PROGRAMS > 40
TEN_STAGES(4)
#endif
#if PROGRAMS > 50
TEN_STAGES(5)
#endif
#if PROGRAMS > 60
TEN_STAGES(6)
#endif
#if PROGRAMS > 70
TEN_STAGES(7)
#endif
#if PROGRAMS > 80
TEN_STAGES(8)
#endif
#if PROGRAMS > 90
TEN_STAGES(9)
#endif

#if PROGRAMS > 1 && !defined(INDEPENDENT)
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, PROGRAMS);
	__uint(key_size, sizeof(__u32));
	__array(values, int(void *));
} stages SEC(".maps") = {
	.values = {
		SLOT(1) SLOT(2) SLOT(3) SLOT(4) SLOT(5) SLOT(6) SLOT(7) SLOT(8) SLOT(9)
#if PROGRAMS > 10
		TEN_SLOTS(1)
#endif
#if PROGRAMS > 20
		TEN_SLOTS(2)
#endif
#if PROGRAMS > 30
		TEN_SLOTS(3)
#endif
#if PROGRAMS > 40
		TEN_SLOTS(4)
#endif
#if PROGRAMS > 50
		TEN_SLOTS(5)
#endif
#if PROGRAMS > 60
		TEN_SLOTS(6)
#endif
#if PROGRAMS > 70
		TEN_SLOTS(7)
#endif
#if PROGRAMS > 80
		TEN_SLOTS(8)
#endif
#if PROGRAMS > 90
		TEN_SLOTS(9)
#endif
	},
};
#endif

struct rule_table rules_0 SEC(".maps");

SEC("xdp")
int many_entry(struct xdp_md *ctx)
{
#if PROGRAMS > 1 && !defined(INDEPENDENT)
	struct iphdr *ip = ipv4_header(ctx);
	__u32 program;

	if (!ip)
		return XDP_PASS;
	program = (bpf_ntohl(ip->daddr) & 0xff) % PROGRAMS;
	if (program) {
		bpf_tail_call(ctx, &stages, program);
		return XDP_PASS; /* an empty slot: let it through */
	}
#endif
	return scan(ctx, &rules_0, 0);
}

char LICENSE[] SEC("license") = "GPL";
