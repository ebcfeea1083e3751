// SPDX-License-Identifier: GPL-2.0
/*
 * A bit-vector classifier in miniature: the rule sets of two fields, one
 * looked up by the IP protocol and one by the TOS, are ANDed word by word
 * over the words both have, and the first rule they share picks a verdict.
 * What runs after the two lookups reads only their answers (region-as-table
 * turns it into a table indexed by which entries answered); the verdict
 * array and the per-verdict counter are after it.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define WORDS 4
#define NO_RULE (WORDS * 64)

struct rule_set {
	__u16 first_word;
	__u16 last_word;
	__u32 pad;
	__u64 bits[WORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct rule_set);
} by_protocol SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct rule_set);
} by_tos SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NO_RULE + 1);
	__type(key, __u32);
	__type(value, __u32);
} verdicts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} verdict_counts SEC(".maps");

/* The index of the lowest set bit of a non-zero word: a de Bruijn
 * multiply and a table in .rodata (what the region reads besides the two
 * answers is constant). */
static const __u8 lowest_of[64] = {
	0,  1,  48, 2,  57, 49, 28, 3,  61, 58, 50, 42, 38, 29, 17, 4,
	62, 55, 59, 36, 53, 51, 43, 22, 45, 39, 33, 30, 24, 18, 12, 5,
	63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11,
	46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9,  13, 8,  7,  6,
};

static __always_inline __u32 lowest_bit(__u64 bits)
{
	return lowest_of[((bits & -bits) * 0x03f79d71b4cb0a89ull) >> 58];
}

/* A bound the verifier can follow through clang's loop rewriting. */
static __always_inline __u32 in_words(__u32 word)
{
	asm volatile("" : "+r"(word));
	return word & (WORDS - 1);
}

SEC("xdp")
int rule_sets(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	const struct rule_set *protocol_rules, *tos_rules;
	__u32 protocol, tos, first, last, word, rule = NO_RULE, verdict = XDP_PASS;
	__u32 *found;
	__u64 *count;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	protocol = ip->protocol & 15;
	tos = ip->tos & 15;
	protocol_rules = bpf_map_lookup_elem(&by_protocol, &protocol);
	tos_rules = bpf_map_lookup_elem(&by_tos, &tos);
	if (!protocol_rules || !tos_rules)
		return XDP_ABORTED;

	first = protocol_rules->first_word > tos_rules->first_word ? protocol_rules->first_word
								   : tos_rules->first_word;
	last = protocol_rules->last_word < tos_rules->last_word ? protocol_rules->last_word
								: tos_rules->last_word;
	if (last >= WORDS)
		last = WORDS - 1;
	for (word = first; word <= last; word++) {
		__u32 at = in_words(word);
		__u64 bits = protocol_rules->bits[at] & tos_rules->bits[at];

		if (bits) {
			rule = at * 64 + lowest_bit(bits);
			break;
		}
	}

	found = bpf_map_lookup_elem(&verdicts, &rule);
	if (found)
		verdict = *found & 3;
	count = bpf_map_lookup_elem(&verdict_counts, &verdict);
	if (count)
		*count += 1;
	return verdict;
}

char LICENSE[] SEC("license") = "GPL";
