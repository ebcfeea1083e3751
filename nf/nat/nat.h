/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The map layouts of nat, shared by the BPF program and the C++ control
 * plane and tests, so the two cannot drift apart. Addresses and ports inside
 * keys and values are in network byte order, as they sit in the packet.
 */
#ifndef NF_NAT_H
#define NF_NAT_H

#include <linux/if_ether.h>
#include <linux/types.h>

#define NAT_MAX_EXTERNAL 8 /* external addresses in the pool; a power of two */
#define NAT_PORT_PROBES 8  /* candidate ports tried for a new flow */

/* Slots of the nat_ports DEVMAP: where translated packets leave. */
enum nat_side {
	NAT_SIDE_INSIDE = 0,
	NAT_SIDE_OUTSIDE = 1,
	NAT_SIDES,
};

/* nat_config[0]; the data plane only reads it. */
struct nat_config {
	__u32 inside_ifindex;  /* outbound translation only for packets from here */
	__u32 outside_ifindex; /* inbound translation only for packets from here */
	__u16 port_min;        /* host order, inclusive: external ports (and */
	__u16 port_max;        /* ICMP echo identifiers) are chosen in here */
	__u32 external_count;  /* 0: not configured, every packet goes to the stack */
	__be32 external[NAT_MAX_EXTERNAL];
	__u8 outside_mac[ETH_ALEN];  /* our address on the outside port */
	__u8 next_hop_mac[ETH_ALEN]; /* the outside router every outbound packet goes to */
};

/* nat_inside: LPM key of an inside (private) prefix; the value is unused. */
struct nat_prefix_key {
	__u32 prefixlen;
	__be32 addr;
};

/*
 * One side of a flow as seen from the NAT: the local endpoint (inside
 * address and port in nat_out, external address and port in nat_in) and
 * the remote one. For ICMP echo the identifier is the local port and the
 * remote port is 0.
 */
struct nat_flow_key {
	__be32 addr;
	__be32 remote_addr;
	__be16 port;
	__be16 remote_port;
	__u8 proto;
	__u8 pad[3];
};

/* nat_out value: what an inside flow is translated to. */
struct nat_binding {
	__be32 external_addr;
	__be16 external_port;
	__u16 pad;
};

/*
 * nat_in value: where replies go back to. The MAC addresses are those of
 * the flow's first outbound frame: the inside neighbour that sent it and the
 * address it sent it to (ours on the inside port).
 */
struct nat_origin {
	__be32 inside_addr;
	__be16 inside_port;
	__u8 inside_mac[ETH_ALEN];
	__u8 local_mac[ETH_ALEN];
	__u16 pad;
};

/* nat_stats: per-CPU packet counters. */
enum nat_stat {
	NAT_STAT_OUTBOUND,        /* inside -> outside, translated and forwarded */
	NAT_STAT_INBOUND,         /* reply translated back and forwarded inside */
	NAT_STAT_NEW_FLOW,        /* a flow got an external port (counted in OUTBOUND too) */
	NAT_STAT_NO_MAPPING,      /* to an external address, no translation: passed */
	NAT_STAT_NOT_NAT,         /* nothing to translate (other traffic): passed */
	NAT_STAT_FRAGMENT,        /* IPv4 fragment: passed */
	NAT_STAT_IP_OPTIONS,      /* IPv4 header with options: passed */
	NAT_STAT_TTL_EXPIRED,     /* TTL <= 1 in a direction we translate: passed */
	NAT_STAT_PORTS_EXHAUSTED, /* no free external port found: dropped */
	NAT_STAT_MALFORMED,       /* truncated, inconsistent, bad IPv4 checksum: dropped */
	NAT_STAT_MAX,
};

#endif /* NF_NAT_H */
