/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The map layouts of l2switch, shared by the BPF data plane and the C++
 * control plane and tests, so the two cannot drift apart.
 */
#ifndef L2SWITCH_H
#define L2SWITCH_H

#include <linux/types.h>

#define L2SW_PORTS_MAX 256         /* switch ports (interfaces) */
#define L2SW_FDB_MAX 4096          /* learned + static MAC entries */
#define L2SW_VLAN_IDS 4096         /* VLAN ids 1..4094 are usable */
#define L2SW_VLAN_WORDS (L2SW_VLAN_IDS / 64)
/* Two groups per VLAN (untagged and tagged members), twice over so a new
 * configuration's groups can be installed before the old ones are removed. */
#define L2SW_FLOOD_GROUPS_MAX (4 * L2SW_VLAN_IDS)

/* A learned entry is rewritten at most this often while its port is
 * unchanged, so steady traffic costs a lookup, not a write. */
#define L2SW_FDB_REFRESH_NS 1000000000ull

enum l2sw_port_mode {
	L2SW_ACCESS = 1, /* one VLAN, untagged on the wire; tagged frames dropped */
	L2SW_TRUNK = 2,  /* tagged VLANs; optionally one native VLAN untagged */
};

struct l2sw_port {
	__u32 mode;          /* enum l2sw_port_mode */
	__u16 untagged_vlan; /* access VLAN, or trunk native VLAN; 0: none */
	__u16 pad;
	__u64 member[L2SW_VLAN_WORDS]; /* bit v: the port carries VLAN v */
};

/* vlans[vid]: how many ports flood this VLAN's frames untagged and tagged,
 * and the flood_groups entries (DEVMAP_HASH of those ports) to redirect to.
 * One value, so a packet never sees counts that disagree with the groups. */
struct l2sw_vlan {
	__u16 untagged_ports;
	__u16 tagged_ports;
	__u32 untagged_group; /* flood_groups key; 0: none */
	__u32 tagged_group;
};

struct l2sw_fdb_key {
	__u8 mac[6];
	__u16 vlan;
};

#define L2SW_FDB_STATIC 1u /* configured: never learned over, never aged */

struct l2sw_fdb_entry {
	__u32 ifindex;
	__u32 flags;
	__u64 last_seen_ns; /* bpf_ktime_get_coarse_ns(), CLOCK_MONOTONIC */
};

/* 802.1Q tag as it follows the two MAC addresses. */
struct l2sw_vlan_tag {
	__be16 tci;
	__be16 encapsulated_proto;
};

/* Per-CPU counters. Every packet ends in exactly one of the outcomes before
 * STAT_OUTCOMES; the learning counters after it count FDB writes. */
enum l2sw_stat {
	STAT_FORWARD,            /* known unicast, redirected to its port */
	STAT_FLOOD,              /* broadcast / multicast / unknown unicast, redirected to a group */
	STAT_FLOOD_TO_STACK,     /* flood needs both encapsulations: XDP_PASS */
	STAT_PASS_NOT_A_PORT,    /* ingress interface not configured */
	STAT_PASS_LINK_LOCAL,    /* 01:80:c2:00:00:0x (STP, LACP, LLDP): the stack's */
	STAT_DROP_MALFORMED,     /* truncated Ethernet header or VLAN tag */
	STAT_DROP_TAGGED_ON_ACCESS,
	STAT_DROP_VLAN_NOT_ALLOWED, /* tagged VLAN not carried, or untagged without native */
	STAT_DROP_QINQ,          /* 802.1ad or stacked 802.1Q tags */
	STAT_DROP_BAD_SOURCE,    /* multicast source MAC */
	STAT_DROP_SAME_PORT,     /* destination lives on the ingress port */
	STAT_DROP_NO_MEMBERS,    /* flood with no other port in the VLAN */
	STAT_DROP_NO_ROOM,       /* the tag could not be pushed (no headroom) */
	STAT_DROP_NO_EGRESS,     /* egress port missing from tx_ports */
	STAT_OUTCOMES,
	STAT_LEARNED = STAT_OUTCOMES, /* new entry or a MAC that moved port */
	STAT_LEARN_FAILED,       /* FDB full */
	STAT_MAX,
};

#endif /* L2SWITCH_H */
