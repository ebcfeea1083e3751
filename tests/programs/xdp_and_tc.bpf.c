// SPDX-License-Identifier: GPL-2.0
/* Two program types in one object, reading one read-only switch: an XDP
 * program and a TC classifier. A guard that falls back by a tail call
 * needs a program array, and a program array takes programs of one type
 * (and expected attach type) only: the two cannot fall back through one. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} drop_all SEC(".maps");

SEC("xdp")
int xdp_side(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *drop = bpf_map_lookup_elem(&drop_all, &zero);

	if (!drop)
		return XDP_ABORTED;
	return *drop ? XDP_DROP : XDP_PASS;
}

SEC("tc")
int tc_side(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u32 *drop = bpf_map_lookup_elem(&drop_all, &zero);

	if (!drop)
		return TC_ACT_SHOT;
	return *drop ? TC_ACT_SHOT : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
