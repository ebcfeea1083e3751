// SPDX-License-Identifier: GPL-2.0
/*
 * firewall: an iptables-like IPv4 ACL in XDP. Rules match a source prefix, a
 * destination prefix, an L4 protocol and source/destination port ranges; the
 * first matching rule (in file order) decides ACCEPT or DROP, and a
 * configurable default decides when none matches.
 *
 * Classification is a bit-vector search that costs the same for any rule
 * set up to FW_MAX_RULES: for each of the five fields, one lookup returns the
 * set of rules that accept the packet's value of that field, as a bitmap
 * indexed by rule priority; the rules matching the packet are the
 * intersection of the five sets, and the matching rule is its lowest set bit.
 *
 *   src/dst address  LPM trie of the rules' distinct prefixes. The longest
 *                    prefix P holding the address stands for every address
 *                    its rules see alike: its set is every rule whose prefix
 *                    contains P (all rule prefixes containing the address are
 *                    nested, so they all contain P). No match: no rule.
 *   protocol         array indexed by protocol number.
 *   sport/dport      array port -> port class, then array class -> set. The
 *                    classes are the intervals cut by the rules' range
 *                    boundaries (ports of one interval match the same rules),
 *                    with equal sets merged. Class 0 is the set of rules that
 *                    ignore the port; packets without ports use it, so a rule
 *                    with a port range never matches them (like iptables).
 *
 * Each set carries the span of its non-zero 64-bit words, so the AND loop
 * only visits words where every field has candidates. The control plane
 * computes all of this from the rule list; the data plane only reads it.
 *
 * Maps (the data plane writes only rule_hits, fw_stats and conntrack):
 *   fw_config     ARRAY[1]            live generation, default action, flags
 *   src_prefixes  LPM_TRIE            (generation, prefix) -> rule set
 *   dst_prefixes  LPM_TRIE            (generation, prefix) -> rule set
 *   protocols     ARRAY[2 x 256]      protocol -> rule set
 *   sport_class   ARRAY[2 x 65536]    source port -> port class
 *   sport_sets    ARRAY[2 x 8193]     port class -> rule set
 *   dport_class, dport_sets           the same for the destination port
 *   rule_actions  ARRAY[2 x 4096]     rule index -> enum fw_action
 *   rule_hits     PERCPU_ARRAY        packets per rule (+ default), per generation
 *   fw_stats      PERCPU_ARRAY        packets not classified by rules, by reason
 *   conntrack     LRU_HASH            reply tuples of accepted TCP/UDP flows
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <stdbool.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "firewall.h"
#include "firewall_packet.h"
#include "../common/counters.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_config);
} fw_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FW_GENERATIONS * FW_MAX_RULES);
	__type(key, struct fw_prefix_key);
	__type(value, struct fw_rule_set);
} src_prefixes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FW_GENERATIONS * FW_MAX_RULES);
	__type(key, struct fw_prefix_key);
	__type(value, struct fw_rule_set);
} dst_prefixes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENERATIONS * FW_PROTOCOLS);
	__type(key, __u32);
	__type(value, struct fw_rule_set);
} protocols SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENERATIONS * FW_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} sport_class SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENERATIONS * FW_PORT_SETS);
	__type(key, __u32);
	__type(value, struct fw_rule_set);
} sport_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENERATIONS * FW_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} dport_class SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENERATIONS * FW_PORT_SETS);
	__type(key, __u32);
	__type(value, struct fw_rule_set);
} dport_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENERATIONS * FW_MAX_RULES);
	__type(key, __u32);
	__type(value, __u32);
} rule_actions SEC(".maps");

NF_COUNTERS(rule_hits, FW_GENERATIONS * FW_HIT_SLOTS);
NF_COUNTERS(fw_stats, FW_STAT_MAX);

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FW_CONNTRACK_FLOWS);
	__type(key, struct fw_flow);
	__type(value, struct fw_flow_state);
} conntrack SEC(".maps");

static __always_inline const struct fw_rule_set *
port_rules(void *classes, void *sets, __u32 generation, __u16 port, bool has_port)
{
	__u32 class = FW_PORTLESS_SET;
	__u32 index;

	if (has_port) {
		__u32 *found;

		index = generation * FW_PORTS + port;
		found = bpf_map_lookup_elem(classes, &index);
		if (!found)
			return NULL;
		class = *found;
	}
	index = generation * FW_PORT_SETS + class;
	return bpf_map_lookup_elem(sets, &index);
}

/* The index of the first rule matching the packet, or NO_RULE. */
static __always_inline __u32 classify(__u32 generation, const struct packet_fields *pkt)
{
	struct fw_prefix_key key = {
		.prefixlen = FW_GENERATION_BITS + 32,
		.generation = generation,
		.addr = pkt->saddr,
	};
	const struct fw_rule_set *src, *dst, *proto, *sport, *dport;
	__u32 index;

	src = bpf_map_lookup_elem(&src_prefixes, &key);
	if (!src)
		return NO_RULE;
	key.addr = pkt->daddr;
	dst = bpf_map_lookup_elem(&dst_prefixes, &key);
	if (!dst)
		return NO_RULE;
	index = generation * FW_PROTOCOLS + pkt->protocol;
	proto = bpf_map_lookup_elem(&protocols, &index);
	sport = port_rules(&sport_class, &sport_sets, generation, pkt->sport, pkt->has_ports);
	dport = port_rules(&dport_class, &dport_sets, generation, pkt->dport, pkt->has_ports);
	if (!proto || !sport || !dport)
		return NO_RULE;

	return first_common_rule(src, dst, proto, sport, dport);
}

static __always_inline bool established(const struct packet_fields *pkt, __u64 now)
{
	struct fw_flow flow = {
		.saddr = pkt->saddr,
		.daddr = pkt->daddr,
		.sport = bpf_htons(pkt->sport),
		.dport = bpf_htons(pkt->dport),
		.protocol = pkt->protocol,
	};
	struct fw_flow_state *state = bpf_map_lookup_elem(&conntrack, &flow);

	if (!state)
		return false;
	state->last_seen_ns = now;
	return true;
}

static __always_inline void expect_replies(const struct packet_fields *pkt, __u64 now)
{
	struct fw_flow reply = {
		.saddr = pkt->daddr,
		.daddr = pkt->saddr,
		.sport = bpf_htons(pkt->dport),
		.dport = bpf_htons(pkt->sport),
		.protocol = pkt->protocol,
	};
	struct fw_flow_state fresh = { .last_seen_ns = now };
	struct fw_flow_state *state = bpf_map_lookup_elem(&conntrack, &reply);

	if (state)
		state->last_seen_ns = now;
	else
		bpf_map_update_elem(&conntrack, &reply, &fresh, BPF_ANY);
}

SEC("xdp")
int firewall(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct packet_fields pkt = {};
	const struct fw_config *cfg;
	struct iphdr *iph;
	void *cursor, *l4;
	__u32 zero = 0, rule, action, slot, *rule_action;
	bool tracking;
	__u64 now = 0;
	__be16 type;

	if ((void *)(eth + 1) > data_end)
		return nf_count(&fw_stats, FW_STAT_MALFORMED, XDP_DROP);
	type = eth->h_proto;
	cursor = eth + 1;
#pragma unroll
	for (int i = 0; i < MAX_VLAN_TAGS; i++) {
		struct vlan_tag *tag = cursor;

		if (!is_vlan(type))
			break;
		if ((void *)(tag + 1) > data_end)
			return nf_count(&fw_stats, FW_STAT_MALFORMED, XDP_DROP);
		type = tag->encapsulated_proto;
		cursor = tag + 1;
	}
	/* Deeper stacks are not parsed, and unparsed traffic must not slip
	 * past a firewall. */
	if (is_vlan(type))
		return nf_count(&fw_stats, FW_STAT_MALFORMED, XDP_DROP);

	cfg = bpf_map_lookup_elem(&fw_config, &zero);
	if (!cfg)
		return XDP_DROP;
	if (type == bpf_htons(ETH_P_IPV6))
		return nf_count(&fw_stats, FW_STAT_IPV6,
			     cfg->flags & FW_FLAG_IPV6_ACCEPT ? XDP_PASS : XDP_DROP);
	if (type != bpf_htons(ETH_P_IP))
		return nf_count(&fw_stats, FW_STAT_NON_IP, XDP_PASS);

	iph = cursor;
	if ((void *)(iph + 1) > data_end || iph->version != 4 || iph->ihl < 5)
		return nf_count(&fw_stats, FW_STAT_MALFORMED, XDP_DROP);
	l4 = (void *)iph + iph->ihl * 4;
	if (l4 > data_end)
		return nf_count(&fw_stats, FW_STAT_MALFORMED, XDP_DROP);

	pkt.saddr = iph->saddr;
	pkt.daddr = iph->daddr;
	pkt.protocol = iph->protocol;
	if (iph->frag_off & bpf_htons(IP_FRAGMENT_OFFSET)) {
		/* No L4 header here: only port-less rules can match. */
		nf_bump(&fw_stats, FW_STAT_FRAGMENT);
	} else if (iph->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = l4;

		if ((void *)(tcp + 1) > data_end)
			return nf_count(&fw_stats, FW_STAT_MALFORMED, XDP_DROP);
		pkt.sport = bpf_ntohs(tcp->source);
		pkt.dport = bpf_ntohs(tcp->dest);
		pkt.has_ports = true;
	} else if (iph->protocol == IPPROTO_UDP) {
		struct udphdr *udp = l4;

		if ((void *)(udp + 1) > data_end)
			return nf_count(&fw_stats, FW_STAT_MALFORMED, XDP_DROP);
		pkt.sport = bpf_ntohs(udp->source);
		pkt.dport = bpf_ntohs(udp->dest);
		pkt.has_ports = true;
	}

	tracking = (cfg->flags & FW_FLAG_CONNTRACK) && pkt.has_ports;
	if (tracking) {
		now = bpf_ktime_get_ns();
		if (established(&pkt, now))
			return nf_count(&fw_stats, FW_STAT_ESTABLISHED, XDP_PASS);
	}

	rule = classify(cfg->generation, &pkt);
	action = cfg->default_action;
	slot = FW_DEFAULT_SLOT;
	if (rule < FW_MAX_RULES) {
		__u32 index = cfg->generation * FW_MAX_RULES + rule;

		rule_action = bpf_map_lookup_elem(&rule_actions, &index);
		if (rule_action) {
			action = *rule_action;
			slot = rule;
		}
	}
	nf_bump(&rule_hits, cfg->generation * FW_HIT_SLOTS + slot);
	if (action != FW_ACCEPT)
		return XDP_DROP;
	if (tracking && slot != FW_DEFAULT_SLOT)
		expect_replies(&pkt, now);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
