// SPDX-License-Identifier: GPL-2.0
/* Includes a glibc header, as Katran's balancer.bpf.c does (<string.h>
 * for memcpy): for the BPF target glibc's gnu/stubs.h asks for the 32-bit
 * x86 stubs, which are not installed; -D__x86_64__ takes its 64-bit path. */
#include <string.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} verdict SEC(".maps");

SEC("xdp")
int copy_verdict(struct xdp_md *ctx)
{
	__u32 zero = 0, copied = XDP_PASS, *held;

	held = bpf_map_lookup_elem(&verdict, &zero);
	if (held)
		memcpy(&copied, held, sizeof(copied));
	return copied;
}

char LICENSE[] SEC("license") = "GPL";
