/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Packet counters for XDP programs, shared by the network functions' data
 * planes: a per-CPU array of u64 counters, one slot per outcome, and the
 * helpers that bump a slot. Plain libbpf-style BPF C that needs nothing of
 * Morpheus; copy it along with your program if you like.
 *
 *	NF_COUNTERS(stats, STAT_MAX);			declares the map
 *	nf_bump(&stats, STAT_LEARNED);			counts an event
 *	return nf_count(&stats, STAT_DROP, XDP_DROP);	counts an outcome
 *
 * Per-CPU slots need no atomics: each CPU adds to its own copy, and user
 * space sums the copies.
 */
#ifndef NF_COMMON_COUNTERS_BPF_H
#define NF_COMMON_COUNTERS_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* A per-CPU array map `name` of `slots` u64 counters, indexed by a __u32. */
#define NF_COUNTERS(name, slots)                                               \
	struct {                                                               \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                       \
		__uint(max_entries, slots);                                    \
		__type(key, __u32);                                            \
		__type(value, __u64);                                          \
	} name SEC(".maps")

/* Adds one to slot `index` of `counters` (an array of u64 counters). */
static __always_inline void nf_bump(void *counters, __u32 index)
{
	__u64 *counter = bpf_map_lookup_elem(counters, &index);

	if (counter)
		*counter += 1;
}

/* Counts outcome `index` and returns `verdict`, so a return site reads
 * `return nf_count(&stats, STAT_DROP, XDP_DROP);`. */
static __always_inline int nf_count(void *counters, __u32 index, int verdict)
{
	nf_bump(counters, index);
	return verdict;
}

#endif /* NF_COMMON_COUNTERS_BPF_H */
