/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Wrapping the client's IPv4 packet, untouched, in an outer IPv4 header
 * toward the chosen real: IP-in-IP (protocol 4, RFC 2003), or GUE variant 1
 * (RFC draft-ietf-intarea-gue: a UDP header directly followed by the inner
 * IP packet, whose version nibble 4 = 0b01.. marks the variant) for reals
 * whose decapsulation wants UDP.
 *
 * Outer header: TOS copied from the inner packet (DSCP/ECN survive, RFC
 * 2003 3.1), DF copied so path-MTU discovery keeps working end to end, ID 0,
 * TTL from the configuration. The inner TTL is not decremented: the inner
 * packet is not routed here, it is tunnelled. GUE's UDP checksum is 0
 * (allowed over IPv4), its source port carries flow entropy.
 */
#ifndef NF_LB_ENCAP_H
#define NF_LB_ENCAP_H

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include "lb.h"

#define IPV4_DF 0x4000

/* What encapsulation needs of the packet, read before the headroom moves. */
struct encap_inner {
	__u8 our_mac[ETH_ALEN]; /* the received frame's destination */
	__be32 client;
	__u16 length; /* inner IP total length, host order */
	__u8 tos;
	__be16 df;
	__u32 hash;
};

/* Prepends the outer headers; returns 0, or -1 when the packet cannot grow
 * (the caller then drops it). */
static __always_inline int encapsulate(struct xdp_md *ctx, const struct lb_config *cfg,
				       const struct lb_real *real,
				       const struct encap_inner *inner)
{
	int gue = real->flags & LB_REAL_GUE;
	int overhead = sizeof(struct iphdr) + (gue ? sizeof(struct udphdr) : 0);
	struct ethhdr *eth;
	struct iphdr *outer;
	void *data, *data_end;

	if (bpf_xdp_adjust_head(ctx, -overhead))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	/* The inner IPv4 header alone is longer than the UDP header, so one
	 * constant bound covers both encapsulations. */
	if (data + ETH_HLEN + sizeof(struct iphdr) + sizeof(struct udphdr) > data_end)
		return -1;

	eth = data;
	__builtin_memcpy(eth->h_dest, cfg->gateway_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, inner->our_mac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);

	outer = (void *)(eth + 1);
	outer->version = 4;
	outer->ihl = sizeof(*outer) / 4;
	outer->tos = inner->tos;
	outer->tot_len = bpf_htons(inner->length + overhead);
	outer->id = 0;
	outer->frag_off = inner->df;
	outer->ttl = cfg->ttl;
	outer->protocol = gue ? IPPROTO_UDP : IPPROTO_IPIP;
	outer->check = 0;
	outer->saddr = cfg->source | (inner->client & cfg->source_mask);
	outer->daddr = real->addr;
	outer->check = ~ipv4_header_sum(outer);

	if (gue) {
		struct udphdr *udp = (void *)(outer + 1);

		udp->source = bpf_htons(LB_GUE_SPORT_BASE |
					(inner->hash & LB_GUE_SPORT_HASH_MASK));
		udp->dest = cfg->gue_port;
		udp->len = bpf_htons(inner->length + sizeof(*udp));
		udp->check = 0;
	}
	return 0;
}

#endif /* NF_LB_ENCAP_H */
