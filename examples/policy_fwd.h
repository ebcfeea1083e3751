/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The map layouts of policy_fwd, shared by the BPF program and the C++ code
 * that configures and tests it, so the two cannot drift apart.
 */
#ifndef POLICY_FWD_H
#define POLICY_FWD_H

#include <linux/if_ether.h>
#include <linux/types.h>

#define CFG_DROP_FRAGMENTS (1u << 0) /* drop IPv4 fragments outright */
#define CFG_POLICY_ENABLED (1u << 1) /* consult the policy table */
#define CFG_TTL_CHECK (1u << 2)      /* TTL <= 1: leave to the stack (ICMP) */

enum policy_action {
	ACTION_PASS = 0,
	ACTION_DROP = 1,
	ACTION_TX = 2, /* rewrite MACs and bounce out of the ingress port */
};

struct config {
	__u32 flags;
	__u32 default_action;
};

struct policy_key {
	__u32 daddr; /* network byte order */
	__u16 dport; /* network byte order, 0 for protocols without ports */
	__u8 proto;
	__u8 pad;
};

struct policy_value {
	__u32 action;
	__u8 dmac[ETH_ALEN];
	__u8 smac[ETH_ALEN];
};

enum stat_index {
	STAT_PASS,
	STAT_DROP,
	STAT_TX,
	STAT_MALFORMED,
	STAT_MAX,
};

#endif /* POLICY_FWD_H */
