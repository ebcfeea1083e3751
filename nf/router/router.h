/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The map layouts of the router, shared by the XDP program and the C++
 * control plane and tests (which static_assert the sizes), so the two
 * cannot drift apart. Addresses are in network byte order, as the packet
 * carries them; everything else is in host order.
 */
#ifndef NF_ROUTER_H
#define NF_ROUTER_H

#include <linux/if_ether.h>
#include <linux/types.h>

#ifndef ROUTER_MAX_ROUTES
#define ROUTER_MAX_ROUTES 65536
#endif
#ifndef ROUTER_MAX_NEIGHBORS
#define ROUTER_MAX_NEIGHBORS 4096
#endif
#ifndef ROUTER_MAX_PORTS
#define ROUTER_MAX_PORTS 64
#endif

/* The LPM_TRIE key: the prefix length first, then the address bits. */
struct route_key {
	__u32 prefixlen;
	__be32 addr;
};

enum route_kind {
	/* Forward to `gateway` out of `port`; gateway 0 = on-link, the
	 * destination itself is the neighbour. */
	ROUTE_FORWARD = 0,
	/* An address of the router itself: the stack delivers it. */
	ROUTE_LOCAL = 1,
};

struct route {
	__be32 gateway;
	__u32 port;
	__u32 kind; /* enum route_kind */
};

/* A neighbour is an address on the link behind one port, so the same
 * address may be a neighbour on several ports (each with its own MACs). */
struct neighbor_key {
	__be32 addr;
	__u32 port;
};

struct neighbor {
	__u8 dst_mac[ETH_ALEN]; /* the neighbour's */
	__u8 src_mac[ETH_ALEN]; /* the egress port's own */
};

/* One per-CPU counter per outcome; every packet counts exactly once. */
enum router_stat {
	STAT_FORWARDED,    /* XDP_REDIRECT out of a port */
	STAT_LOCAL,        /* XDP_PASS: local route, multicast or broadcast */
	STAT_NO_ROUTE,     /* XDP_PASS: the stack answers (unreachable) */
	STAT_NO_NEIGHBOR,  /* XDP_PASS: the stack resolves it (ARP) */
	STAT_NO_PORT,      /* XDP_PASS: the route's port has no interface */
	STAT_TTL_EXCEEDED, /* XDP_PASS: the stack sends ICMP time exceeded */
	STAT_IP_OPTIONS,   /* XDP_PASS: options are the slow path's job */
	STAT_NOT_IPV4,     /* XDP_PASS: ARP, IPv6, VLAN-tagged, anything else */
	STAT_MALFORMED,    /* XDP_DROP: fails the RFC 1812 header checks */
	STAT_MAX,
};

#endif /* NF_ROUTER_H */
