// SPDX-License-Identifier: GPL-2.0
/*
 * firewall, for Morpheus's user-space data plane (backend/user): the
 * classification of ../firewall.bpf.c in plain C against the table API of
 * morpheus_user.h, on the tables the firewall's control plane computes
 * (../Classifier.h: buildTables), so the kernel and user versions classify
 * any rule file alike; the fields, the VLAN test and the rule sets'
 * intersection are one copy for both (../firewall_packet.h). Read the header of ../firewall.bpf.c for the
 * bit-vector search: one lookup per 5-tuple field gives the rules that
 * accept the packet's value of that field, as a bitmap by priority; the
 * lowest bit of their AND is the first matching rule.
 *
 *   up to 2 VLAN tags parsed; deeper ─ DROP;  truncated, IHL < 5 ─ DROP
 *   IPv6 ─ PASS with FW_FLAG_IPV6_ACCEPT, else DROP;  other non-IPv4 ─ PASS
 *   non-first fragments ─ classified without ports (port-less rules only)
 *   first matching rule's action, or the default ─ ACCEPT: TX out of the
 *   other port of the pair (port ^ 1, a bump in the wire); DROP: DROP
 *
 * Differences from the kernel version: no generations (fw_user_prefix_key
 * in ../firewall.h says why),
 * and no connection tracking (FW_FLAG_CONNTRACK is ignored: it needs a
 * clock and an LRU table, which the user tables do not have).
 *
 * FW_LPM picks the prefix tables' implementation: MU_LPM_DIR24 (default)
 * or MU_LPM_LINEAR.
 *
 *   fw_config     ARRAY[1]       default action, flags        (read only)
 *   src_prefixes  LPM            prefix -> rule set           (read only)
 *   dst_prefixes  LPM            prefix -> rule set           (read only)
 *   protocols     ARRAY[256]     protocol -> rule set         (read only)
 *   sport_class   ARRAY[65536]   source port -> port class    (read only)
 *   sport_sets    ARRAY[8193]    port class -> rule set       (read only)
 *   dport_class, dport_sets      the same for the destination port
 *   rule_actions  ARRAY[4096]    rule -> enum fw_action       (read only)
 *   rule_hits     ARRAY[4097]    packets per rule, then the default
 *                                                     (written per packet)
 *   fw_stats      ARRAY          packets not classified, by reason
 */
#include <morpheus_user.h>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <stdbool.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#include "../firewall.h"
#include "../firewall_packet.h"

#ifndef FW_LPM
#define FW_LPM MU_LPM_DIR24
#endif

MU_TABLE(fw_config, MU_ARRAY, __u32, struct fw_config, 1);
MU_TABLE(src_prefixes, FW_LPM, struct fw_user_prefix_key, struct fw_rule_set, FW_MAX_RULES);
MU_TABLE(dst_prefixes, FW_LPM, struct fw_user_prefix_key, struct fw_rule_set, FW_MAX_RULES);
MU_TABLE(protocols, MU_ARRAY, __u32, struct fw_rule_set, FW_PROTOCOLS);
MU_TABLE(sport_class, MU_ARRAY, __u32, __u32, FW_PORTS);
MU_TABLE(sport_sets, MU_ARRAY, __u32, struct fw_rule_set, FW_PORT_SETS);
MU_TABLE(dport_class, MU_ARRAY, __u32, __u32, FW_PORTS);
MU_TABLE(dport_sets, MU_ARRAY, __u32, struct fw_rule_set, FW_PORT_SETS);
MU_TABLE(rule_actions, MU_ARRAY, __u32, __u32, FW_MAX_RULES);
MU_TABLE(rule_hits, MU_ARRAY, __u32, __u64, FW_HIT_SLOTS);
MU_TABLE(fw_stats, MU_ARRAY, __u32, __u64, FW_STAT_MAX);

static __always_inline void bump(struct mu_table_def *counters, __u32 slot)
{
	__u64 *counter = mu_lookup(counters, &slot);

	if (counter)
		*counter += 1;
}

static __always_inline int count(__u32 stat, int verdict)
{
	bump(&fw_stats, stat);
	return verdict;
}

static __always_inline const struct fw_rule_set *
port_rules(struct mu_table_def *classes, struct mu_table_def *sets, __u32 port, bool has_port)
{
	__u32 class = FW_PORTLESS_SET;

	if (has_port) {
		const __u32 *found = mu_lookup(classes, &port);

		if (!found)
			return 0;
		class = *found;
	}
	return mu_lookup(sets, &class);
}

/* The index of the first rule matching the packet, or NO_RULE: the
 * kernel's classify() without generations. */
static __always_inline __u32 classify(const struct packet_fields *pkt)
{
	struct fw_user_prefix_key key = { .prefixlen = 32, .addr = pkt->saddr };
	const struct fw_rule_set *src, *dst, *proto, *sport, *dport;
	__u32 index;

	src = mu_lookup(&src_prefixes, &key);
	if (!src)
		return NO_RULE;
	key.addr = pkt->daddr;
	dst = mu_lookup(&dst_prefixes, &key);
	if (!dst)
		return NO_RULE;
	index = pkt->protocol;
	proto = mu_lookup(&protocols, &index);
	sport = port_rules(&sport_class, &sport_sets, pkt->sport, pkt->has_ports);
	dport = port_rules(&dport_class, &dport_sets, pkt->dport, pkt->has_ports);
	if (!proto || !sport || !dport)
		return NO_RULE;

	return first_common_rule(src, dst, proto, sport, dport);
}

MU_HANDLER int firewall(struct mu_packet *packet)
{
	__u8 *end = packet->data + packet->len;
	struct ethhdr *eth = (struct ethhdr *)packet->data;
	struct packet_fields pkt = {};
	const struct fw_config *cfg;
	const __u32 *rule_action;
	struct iphdr *iph;
	__u8 *cursor, *l4;
	__u32 zero = 0, rule, action, slot;
	__be16 type;

	if (packet->len < sizeof(*eth))
		return count(FW_STAT_MALFORMED, MU_DROP);
	type = eth->h_proto;
	cursor = (__u8 *)(eth + 1);
	for (int i = 0; i < MAX_VLAN_TAGS; i++) {
		struct vlan_tag *tag = (struct vlan_tag *)cursor;

		if (!is_vlan(type))
			break;
		if ((__u8 *)(tag + 1) > end)
			return count(FW_STAT_MALFORMED, MU_DROP);
		type = tag->encapsulated_proto;
		cursor = (__u8 *)(tag + 1);
	}
	/* Deeper stacks are not parsed, and unparsed traffic must not slip
	 * past a firewall. */
	if (is_vlan(type))
		return count(FW_STAT_MALFORMED, MU_DROP);

	cfg = mu_lookup(&fw_config, &zero);
	if (!cfg)
		return MU_DROP;
	if (type == htons(ETH_P_IPV6))
		return count(FW_STAT_IPV6, cfg->flags & FW_FLAG_IPV6_ACCEPT ? MU_PASS : MU_DROP);
	if (type != htons(ETH_P_IP))
		return count(FW_STAT_NON_IP, MU_PASS);

	iph = (struct iphdr *)cursor;
	if ((__u8 *)(iph + 1) > end || iph->version != 4 || iph->ihl < 5)
		return count(FW_STAT_MALFORMED, MU_DROP);
	l4 = (__u8 *)iph + iph->ihl * 4;
	if (l4 > end)
		return count(FW_STAT_MALFORMED, MU_DROP);

	pkt.saddr = iph->saddr;
	pkt.daddr = iph->daddr;
	pkt.protocol = iph->protocol;
	if (iph->frag_off & htons(IP_FRAGMENT_OFFSET)) {
		/* No L4 header here: only port-less rules can match. */
		bump(&fw_stats, FW_STAT_FRAGMENT);
	} else if (iph->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = (struct tcphdr *)l4;

		if ((__u8 *)(tcp + 1) > end)
			return count(FW_STAT_MALFORMED, MU_DROP);
		pkt.sport = ntohs(tcp->source);
		pkt.dport = ntohs(tcp->dest);
		pkt.has_ports = true;
	} else if (iph->protocol == IPPROTO_UDP) {
		struct udphdr *udp = (struct udphdr *)l4;

		if ((__u8 *)(udp + 1) > end)
			return count(FW_STAT_MALFORMED, MU_DROP);
		pkt.sport = ntohs(udp->source);
		pkt.dport = ntohs(udp->dest);
		pkt.has_ports = true;
	}

	rule = classify(&pkt);
	action = cfg->default_action;
	slot = FW_DEFAULT_SLOT;
	if (rule < FW_MAX_RULES) {
		rule_action = mu_lookup(&rule_actions, &rule);
		if (rule_action) {
			action = *rule_action;
			slot = rule;
		}
	}
	bump(&rule_hits, slot);
	if (action != FW_ACCEPT)
		return MU_DROP;
	packet->port ^= 1;
	return MU_TX;
}
