/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The firewall's packet code, shared by the XDP program (firewall.bpf.c)
 * and the user-space handler (user/firewall_user.c) so that the two
 * classify alike by construction: the fields classification reads, the
 * VLAN test, and the bit-vector search's last step, the first rule all
 * five fields' rule sets share. What differs between them stays in each
 * file: the tables (BPF maps indexed by generation, the user API without
 * generations), the counters, connection tracking (kernel only), where a
 * packet goes, and the parse. The parse is the same C in both, but as a
 * function here it changed the XDP program's instructions (clang merges
 * its early returns: 499 -> 534 lines of disassembly), which this header
 * does not: the kernel object is the same, instruction for instruction.
 *
 * Plain C that both clang targets take (BPF and the host): no helpers,
 * and of libc only the byte-order functions (../common/byteorder.h). The
 * includer defines __always_inline (libbpf's bpf_helpers.h does for BPF).
 */
#ifndef NF_FIREWALL_PACKET_H
#define NF_FIREWALL_PACKET_H

#include <linux/if_ether.h>
#include <linux/types.h>
#include <stdbool.h>

#include "firewall.h"
#include "../common/byteorder.h"

#define IP_FRAGMENT_OFFSET 0x1fff
#define MAX_VLAN_TAGS 2
#define NO_RULE FW_MAX_RULES

struct vlan_tag {
	__be16 tci;
	__be16 encapsulated_proto;
};

/* What classification looks at; addresses in network order, ports in host
 * order (they index the port arrays). */
struct packet_fields {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 protocol;
	bool has_ports;
};

static __always_inline bool is_vlan(__be16 type)
{
	return type == nf_htons(ETH_P_8021Q) || type == nf_htons(ETH_P_8021AD);
}

#ifdef __bpf__
/* The number of trailing zeros of a non-zero word: the bits below the
 * lowest set bit, counted in parallel. Without branches, because each one
 * would multiply the paths the verifier walks through the AND loop; and
 * hidden from clang, which would recognise the idiom and lower it to a de
 * Bruijn table in .rodata. */
static __always_inline __u32 lowest_bit(__u64 bits)
{
	__u64 below = (bits & -bits) - 1;

	asm volatile("" : "+r"(below));
	below -= (below >> 1) & 0x5555555555555555ull;
	below = (below & 0x3333333333333333ull) + ((below >> 2) & 0x3333333333333333ull);
	below = (below + (below >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (below * 0x0101010101010101ull) >> 56;
}

/* `word` is already <= FW_MAX_WORDS - 1, but clang turns the loop's test
 * into forms the verifier cannot follow; a mask it cannot see through keeps
 * every bitmap access provably in bounds. */
static __always_inline __u32 in_bitmap(__u32 word)
{
	asm volatile("" : "+r"(word));
	return word & (FW_MAX_WORDS - 1);
}
#else
/* On the host: the instruction, and no verifier to convince. */
static __always_inline __u32 lowest_bit(__u64 bits)
{
	return __builtin_ctzll(bits);
}

static __always_inline __u32 in_bitmap(__u32 word)
{
	return word;
}
#endif

/*
 * The first rule in all five rule sets, or NO_RULE: the lowest bit of
 * their AND, over only the words where every set has rules.
 */
static __always_inline __u32 first_common_rule(const struct fw_rule_set *src,
					       const struct fw_rule_set *dst,
					       const struct fw_rule_set *proto,
					       const struct fw_rule_set *sport,
					       const struct fw_rule_set *dport)
{
	__u32 first, last, word;

	first = src->first_word;
	first = dst->first_word > first ? dst->first_word : first;
	first = proto->first_word > first ? proto->first_word : first;
	first = sport->first_word > first ? sport->first_word : first;
	first = dport->first_word > first ? dport->first_word : first;
	last = src->last_word;
	last = dst->last_word < last ? dst->last_word : last;
	last = proto->last_word < last ? proto->last_word : last;
	last = sport->last_word < last ? sport->last_word : last;
	last = dport->last_word < last ? dport->last_word : last;

	if (last >= FW_MAX_WORDS)
		last = FW_MAX_WORDS - 1;
	for (word = first; word <= last; word++) {
		__u32 at = in_bitmap(word);
		__u64 bits = src->bits[at] & dst->bits[at] & proto->bits[at] &
			     sport->bits[at] & dport->bits[at];

		if (bits)
			return at * FW_WORD_BITS + lowest_bit(bits);
	}
	return NO_RULE;
}

#endif /* NF_FIREWALL_PACKET_H */
