/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The map layouts of the firewall, shared by the BPF data plane and the C++
 * control plane and tests, so the two cannot drift apart.
 *
 * Every classification table exists twice, once per generation: the control
 * plane writes a new rule set into the generation that is not live and then
 * flips `fw_config.generation`, so a packet is always classified by one
 * complete rule set, never by a mix of the old and the new.
 */
#ifndef NF_FIREWALL_H
#define NF_FIREWALL_H

#include <linux/types.h>

#define FW_MAX_RULES 4096
#define FW_WORD_BITS 64
#define FW_MAX_WORDS (FW_MAX_RULES / FW_WORD_BITS)
#define FW_GENERATIONS 2
#define FW_PORTS 65536
#define FW_PROTOCOLS 256
/* N port ranges cut the port space into at most 2N+1 intervals, so this many
 * distinct rule sets per port field always suffice. */
#define FW_PORT_SETS (2 * FW_MAX_RULES + 1)
/* Port set 0 holds the rules that ignore the port (range 0:65535); packets
 * without ports (ICMP, GRE, non-first fragments, ...) use it. */
#define FW_PORTLESS_SET 0
/* rule_hits slots per generation: one per rule, then the default action. */
#define FW_HIT_SLOTS (FW_MAX_RULES + 1)
#define FW_DEFAULT_SLOT FW_MAX_RULES
#define FW_CONNTRACK_FLOWS 65536

enum fw_action {
	FW_DROP = 0, /* also what an unconfigured firewall does: fail closed */
	FW_ACCEPT = 1,
};

#define FW_FLAG_CONNTRACK (1u << 0)   /* accept replies of accepted TCP/UDP flows */
#define FW_FLAG_IPV6_ACCEPT (1u << 1) /* IPv6 is not classified: accept or drop it all */

struct fw_config {
	__u32 generation;     /* 0 or 1: the live half of every table */
	__u32 default_action; /* enum fw_action, when no rule matches */
	__u32 flags;          /* FW_FLAG_* */
	__u32 rule_count;     /* for tools reading rule_hits; the data plane ignores it */
};

/*
 * The rules (by index = priority) that match one value of one field, as a
 * bitmap. first_word..last_word bound the non-zero words, so an intersection
 * only scans the words where all five fields have rules; an empty set has
 * first_word > last_word.
 */
struct fw_rule_set {
	__u16 first_word;
	__u16 last_word;
	__u32 pad;
	__u64 bits[FW_MAX_WORDS];
};

/* LPM key of src_prefixes / dst_prefixes: the generation is matched as the
 * first 32 bits, so prefixlen = 32 + the rule's prefix length. */
struct fw_prefix_key {
	__u32 prefixlen;
	__u32 generation;
	__u32 addr; /* network byte order */
};
#define FW_GENERATION_BITS 32

/* LPM key of the user-space firewall's (user/firewall_user.c) prefix
 * tables: no generation there, since a rule set is written inside one
 * guarded change of backend/user's tables and the handler runs between
 * bursts, so no packet sees half a rule set. { prefix length, IPv4 address
 * in network byte order }, the layout MU_LPM_DIR24 and MU_LPM_LINEAR take. */
struct fw_user_prefix_key {
	__u32 prefixlen;
	__u32 addr;
};

/* A flow in the direction of the packets conntrack expects (the replies). */
struct fw_flow {
	__u32 saddr; /* network byte order, like the ports */
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 protocol;
	__u8 pad[3];
};

struct fw_flow_state {
	__u64 last_seen_ns; /* bpf_ktime_get_ns() of the flow's latest packet */
};

enum fw_stat {
	FW_STAT_NON_IP,      /* passed: not IPv4 or IPv6 (ARP, LLDP, ...) */
	FW_STAT_MALFORMED,   /* dropped: truncated headers, IHL < 5, > 2 VLAN tags */
	FW_STAT_IPV6,        /* accepted or dropped per FW_FLAG_IPV6_ACCEPT */
	FW_STAT_ESTABLISHED, /* accepted as the reply of an accepted flow */
	FW_STAT_FRAGMENT,    /* non-first fragments, classified without ports
				(also counted in rule_hits) */
	FW_STAT_MAX,
};

#endif /* NF_FIREWALL_H */
