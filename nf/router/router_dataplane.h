/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The router's maps and per-packet helpers, for router.bpf.c and for the
 * benchmark's hand-specialized router (src/bench/oracles), which must
 * share the maps and behave exactly alike.
 */
#ifndef NF_ROUTER_DATAPLANE_H
#define NF_ROUTER_DATAPLANE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "router.h"
#include "../common/counters.bpf.h"
#include "../common/ipv4.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, ROUTER_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* required for LPM tries */
	__type(key, struct route_key);
	__type(value, struct route);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ROUTER_MAX_NEIGHBORS);
	__type(key, struct neighbor_key);
	__type(value, struct neighbor);
} neighbors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, ROUTER_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32); /* ifindex */
} ports SEC(".maps");

NF_COUNTERS(stats, STAT_MAX);

/*
 * RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), for the word m = TTL:protocol
 * becoming m' = m - 0x0100: ~m + m' is 0xfeff whatever m is. Unlike the
 * shortcut HC + 0x0100 it never yields 0xffff where a full recomputation
 * gives 0x0000, so the output equals a freshly checksummed header.
 */
static __always_inline void ipv4_decrement_ttl(struct iphdr *iph)
{
	__u32 sum = (__u16)~bpf_ntohs(iph->check) + 0xfeff;

	sum = (sum & 0xffff) + (sum >> 16);
	iph->check = bpf_htons((__u16)~sum);
	iph->ttl--;
}

static __always_inline int is_multicast_or_broadcast(__be32 daddr)
{
	return (daddr & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) ||
	       daddr == bpf_htonl(0xffffffff);
}

#define ADMITTED -1

/* Everything a datagram must pass before a route is looked up (RFC 1812),
 * in the router's order: returns the counted verdict for a packet that
 * stops here, or ADMITTED with *ethp and *iphp pointing into it. */
static __always_inline int admit_for_forwarding(struct xdp_md *ctx, struct ethhdr **ethp,
						struct iphdr **iphp)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u32 total_length;

	if ((void *)(eth + 1) > data_end)
		return nf_count(&stats, STAT_MALFORMED, XDP_DROP);
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return nf_count(&stats, STAT_NOT_IPV4, XDP_PASS);

	/* RFC 1812 5.2.2: a datagram failing these is silently discarded. */
	if ((void *)(iph + 1) > data_end || iph->version != 4 || iph->ihl < 5)
		return nf_count(&stats, STAT_MALFORMED, XDP_DROP);
	total_length = bpf_ntohs(iph->tot_len);
	if (total_length < iph->ihl * 4u || total_length > (__u32)(data_end - (void *)iph))
		return nf_count(&stats, STAT_MALFORMED, XDP_DROP);
	if (iph->ihl > 5)
		return nf_count(&stats, STAT_IP_OPTIONS, XDP_PASS);
	if (ipv4_header_sum(iph) != 0xffff)
		return nf_count(&stats, STAT_MALFORMED, XDP_DROP);

	if (is_multicast_or_broadcast(iph->daddr))
		return nf_count(&stats, STAT_LOCAL, XDP_PASS);
	if (iph->ttl <= 1)
		return nf_count(&stats, STAT_TTL_EXCEEDED, XDP_PASS);

	*ethp = eth;
	*iphp = iph;
	return ADMITTED;
}

#endif /* NF_ROUTER_DATAPLANE_H */
