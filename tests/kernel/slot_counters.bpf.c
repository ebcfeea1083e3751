// SPDX-License-Identifier: GPL-2.0
// Two slot programs for the dispatcher tests: each counts the packets it
// sees in its own per-CPU counter and passes them on (XDP_PASS), one meant
// for the slot before the adopted program, one for the slot after it, so
// a test sees that every packet entered the dispatcher and that exactly
// those the adopted program passed went on.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} slot_counts SEC(".maps");

static __always_inline int count(__u32 which)
{
	__u64 *counter = bpf_map_lookup_elem(&slot_counts, &which);

	if (counter)
		*counter += 1;
	return XDP_PASS;
}

SEC("xdp")
int count_in(struct xdp_md *ctx)
{
	return count(0);
}

SEC("xdp")
int count_out(struct xdp_md *ctx)
{
	return count(1);
}

char LICENSE[] SEC("license") = "GPL";
