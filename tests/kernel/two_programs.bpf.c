// SPDX-License-Identifier: GPL-2.0
// An object with two program types sharing a map: the XDP entry, and a
// devmap egress program (which cannot share the entry's fallback array).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} verdict SEC(".maps");

SEC("xdp")
int entry(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *value = bpf_map_lookup_elem(&verdict, &zero);

	return value ? *value : XDP_ABORTED;
}

SEC("xdp/devmap")
int egress(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *value = bpf_map_lookup_elem(&verdict, &zero);

	return value && *value == XDP_DROP ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
