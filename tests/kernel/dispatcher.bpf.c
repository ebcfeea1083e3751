// SPDX-License-Identifier: GPL-2.0
// Runs whatever program slot 0 of `current` holds: a stand-in for the XDP
// link in tests that replace the program while packets are being tested.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} current SEC(".maps");

SEC("xdp")
int dispatch(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &current, 0);
	return 255; /* no program installed: a verdict no program returns */
}

char LICENSE[] SEC("license") = "GPL";
