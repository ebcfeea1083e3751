// SPDX-License-Identifier: GPL-2.0
/* Inline asm as real programs use it: a compiler barrier, and an
 * instruction written in BPF assembly. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} config SEC(".maps");

SEC("xdp")
int asm_prog(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *word = bpf_map_lookup_elem(&config, &zero);
	__u64 seven;

	asm volatile("" ::: "memory");
	asm volatile("%0 = 7" : "=r"(seven));
	if (!word)
		return XDP_ABORTED;
	return *word + seven == 8 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
