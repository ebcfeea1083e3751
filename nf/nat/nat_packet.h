/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The NAT's packet code, shared by the XDP program (nat.bpf.c) and the
 * user-space handler (user/nat_user.c) so that the two parse, hash and
 * rewrite alike by construction: the parse with its outcomes, the
 * external-address test, the flow hash that picks addresses and ports,
 * and the header rewrite with its incremental checksums. What differs
 * between them stays in each file: the tables (BPF maps, the user API),
 * the counters, how a port is claimed and where a packet leaves.
 *
 * Plain C that both clang targets take (BPF and the host): no helpers,
 * and of libc only the byte-order functions (../common/byteorder.h). The
 * includer defines __always_inline (libbpf's bpf_helpers.h does for BPF).
 */
#ifndef NF_NAT_PACKET_H
#define NF_NAT_PACKET_H

#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/types.h>
#include <linux/udp.h>

#include "nat.h"
#include "nat_checksum.h"
#include "../common/byteorder.h"
#include "../common/ipv4.bpf.h"


/* <linux/icmp.h> pulls in libc's socket headers, which do not build for BPF. */
struct icmp_echo {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be16 id;
	__be16 sequence;
};
#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8

#define IPV4_MORE_FRAGMENTS 0x2000
#define IPV4_FRAGMENT_OFFSET 0x1fff

/* The parsed packet: fixed 20-byte IPv4 header, L4 header bounds-checked. */
struct packet {
	struct ethhdr *eth;
	struct iphdr *ip;
	void *l4;
	__be16 *sport; /* TCP/UDP source port; ICMP echo identifier */
	__be16 *dport; /* TCP/UDP destination port; ICMP echo identifier */
	__sum16 *check;
	__u8 proto;
};

static __always_inline __be16 remote_port(const struct packet *pkt, const __be16 *field)
{
	return pkt->proto == IPPROTO_ICMP ? 0 : *field;
}

/*
 * The frame from `data` to `data_end`. Returns -1 for a malformed packet,
 * 0 for one that may be translated, or the counter (never 0) under which
 * the packet goes to the stack (the slow path).
 */
static __always_inline int parse(void *data, void *data_end, struct packet *pkt)
{
	struct ethhdr *eth = data;
	struct iphdr *ip;
	void *l4;
	__u16 total;

	if ((void *)(eth + 1) > data_end)
		return -1;
	if (eth->h_proto != nf_htons(ETH_P_IP))
		return NAT_STAT_NOT_NAT;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->version != 4 || ip->ihl < 5)
		return -1;
	total = nf_ntohs(ip->tot_len);
	if (total < ip->ihl * 4 || (void *)ip + total > data_end)
		return -1;
	if (ip->ihl != 5)
		return NAT_STAT_IP_OPTIONS;
	if (ipv4_header_sum(ip) != 0xffff)
		return -1;
	if (ip->frag_off & nf_htons(IPV4_MORE_FRAGMENTS | IPV4_FRAGMENT_OFFSET))
		return NAT_STAT_FRAGMENT;

	l4 = ip + 1;
#ifdef __bpf__
	/* Clang would prove each L4 bound below from tot_len and drop it; the
	 * verifier tracks no such relation and needs the direct check. */
	asm volatile("" : "+r"(l4));
#endif
	pkt->eth = eth;
	pkt->ip = ip;
	pkt->l4 = l4;
	pkt->proto = ip->protocol;
	switch (ip->protocol) {
	case IPPROTO_TCP: {
		struct tcphdr *tcp = l4;

		if ((void *)(tcp + 1) > data_end || total < sizeof(*ip) + sizeof(*tcp) ||
		    tcp->doff < 5)
			return -1;
		pkt->sport = &tcp->source;
		pkt->dport = &tcp->dest;
		pkt->check = &tcp->check;
		return 0;
	}
	case IPPROTO_UDP: {
		struct udphdr *udp = l4;

		if ((void *)(udp + 1) > data_end || total < sizeof(*ip) + sizeof(*udp))
			return -1;
		pkt->sport = &udp->source;
		pkt->dport = &udp->dest;
		pkt->check = &udp->check;
		return 0;
	}
	case IPPROTO_ICMP: {
		struct icmp_echo *icmp = l4;

		if ((void *)(icmp + 1) > data_end || total < sizeof(*ip) + sizeof(*icmp))
			return -1;
		pkt->sport = &icmp->id;
		pkt->dport = &icmp->id;
		pkt->check = &icmp->checksum;
		return 0;
	}
	default:
		return NAT_STAT_NOT_NAT;
	}
}

static __always_inline int is_external(const struct nat_config *cfg, __be32 addr)
{
#pragma unroll
	for (__u32 i = 0; i < NAT_MAX_EXTERNAL; i++) {
		if (i >= cfg->external_count)
			break;
		if (cfg->external[i] == addr)
			return 1;
	}
	return 0;
}

static __always_inline __u32 mix32(__u32 x)
{
	x ^= x >> 16;
	x *= 0x85ebca6b;
	x ^= x >> 13;
	x *= 0xc2b2ae35;
	x ^= x >> 16;
	return x;
}

static __always_inline __u32 flow_hash(const struct nat_flow_key *flow)
{
	__u32 ports = ((__u32)flow->port << 16 | flow->remote_port) ^ flow->proto;

	return mix32(flow->addr ^ mix32(flow->remote_addr ^ mix32(ports)));
}

/* Whether nat_in's entry `owner` (NULL: none) is the inside `flow`'s. */
static __always_inline int owned_by(const struct nat_origin *owner, const struct nat_flow_key *flow)
{
	return owner && owner->inside_addr == flow->addr && owner->inside_port == flow->port;
}

/*
 * Rewrites one address and one port (or ICMP identifier) of the packet,
 * decrements the TTL, and updates both checksums incrementally (RFC 1624).
 */
static __always_inline void rewrite(struct packet *pkt, __be32 *addr, __be32 new_addr,
				    __be16 *port, __be16 new_port)
{
	struct iphdr *ip = pkt->ip;
	__u16 *ttl_word = (__u16 *)&ip->ttl; /* TTL and protocol */
	__u16 old_ttl_word = *ttl_word;
	__u32 address_delta = csum_delta32(*addr, new_addr);
	__u32 l4_delta = csum_delta16(*port, new_port);

	ip->ttl--;
	ip->check = csum_apply(ip->check, address_delta + csum_delta16(old_ttl_word, *ttl_word));
	/* The TCP and UDP checksums cover the addresses (pseudo-header); ICMP's does not. */
	if (pkt->proto != IPPROTO_ICMP)
		l4_delta += address_delta;
	if (pkt->proto != IPPROTO_UDP || *pkt->check != 0) {
		__u16 check = csum_apply(*pkt->check, l4_delta);

		/* In UDP, 0 means "no checksum": a computed 0 is sent as 0xffff. */
		if (pkt->proto == IPPROTO_UDP && check == 0)
			check = 0xffff;
		*pkt->check = check;
	}
	*addr = new_addr;
	*port = new_port;
}

static __always_inline int is_icmp_type(const struct packet *pkt, __u8 type)
{
	return ((struct icmp_echo *)pkt->l4)->type == type;
}

#endif /* NF_NAT_PACKET_H */
