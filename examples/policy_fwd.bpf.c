// SPDX-License-Identifier: GPL-2.0
/*
 * policy_fwd: a small, generic XDP policy forwarder used by the Morpheus demo
 * and integration tests. It is written the way an operator would ship it:
 * every feature is compiled in and switched on or off through the `config`
 * array at run time, and the per-destination policy lives in a hash table
 * that the control plane fills. Morpheus never needs this file changed.
 *
 *   config  ARRAY[1]         feature flags (read-only from the data plane)
 *   policy  HASH             (dst addr, dst port, proto) -> action + MACs
 *   stats   PERCPU_ARRAY     per-verdict packet counters (written per packet)
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "policy_fwd.h"

#ifndef POLICY_MAX_ENTRIES
#define POLICY_MAX_ENTRIES 1024
#endif

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POLICY_MAX_ENTRIES);
	__type(key, struct policy_key);
	__type(value, struct policy_value);
} policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline int count(__u32 index, int verdict)
{
	__u64 *counter = bpf_map_lookup_elem(&stats, &index);
	if (counter)
		*counter += 1;
	return verdict;
}

static __always_inline int apply(struct xdp_md *ctx, struct ethhdr *eth,
				 const struct policy_value *value)
{
	switch (value->action) {
	case ACTION_DROP:
		return count(STAT_DROP, XDP_DROP);
	case ACTION_TX:
		__builtin_memcpy(eth->h_dest, value->dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, value->smac, ETH_ALEN);
		return count(STAT_TX, XDP_TX);
	default:
		return count(STAT_PASS, XDP_PASS);
	}
}

SEC("xdp")
int policy_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct policy_key key = {};
	struct policy_value fallback = {};
	const struct policy_value *value;
	struct config *cfg;
	__u32 zero = 0;

	if ((void *)(eth + 1) > data_end)
		return count(STAT_MALFORMED, XDP_DROP);
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return count(STAT_PASS, XDP_PASS);
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end || iph->ihl < 5)
		return count(STAT_MALFORMED, XDP_DROP);

	cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return count(STAT_PASS, XDP_PASS);

	if ((cfg->flags & CFG_DROP_FRAGMENTS) &&
	    (iph->frag_off & bpf_htons(0x3fff)))
		return count(STAT_DROP, XDP_DROP);
	if ((cfg->flags & CFG_TTL_CHECK) && iph->ttl <= 1)
		return count(STAT_PASS, XDP_PASS);

	fallback.action = cfg->default_action;
	if (!(cfg->flags & CFG_POLICY_ENABLED))
		return apply(ctx, eth, &fallback);

	key.daddr = iph->daddr;
	key.proto = iph->protocol;
	if (iph->protocol == IPPROTO_TCP || iph->protocol == IPPROTO_UDP) {
		/* Both headers start with the two 16-bit ports. */
		struct udphdr *l4 = (void *)iph + iph->ihl * 4;
		if ((void *)(l4 + 1) > data_end)
			return count(STAT_MALFORMED, XDP_DROP);
		key.dport = l4->dest;
	}

	value = bpf_map_lookup_elem(&policy, &key);
	return apply(ctx, eth, value ? value : &fallback);
}

char LICENSE[] SEC("license") = "GPL";
