// SPDX-License-Identifier: GPL-2.0
/* An XDP program and a tracepoint program in one object, reading one
 * read-only switch (the tracepoint counts the XDP exceptions it sees while
 * the switch is on). Like XDP beside TC: one program array cannot take
 * both as the originals their guards fall back to. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} drop_all SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} exceptions SEC(".maps");

SEC("xdp")
int xdp_side(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *drop = bpf_map_lookup_elem(&drop_all, &zero);

	if (!drop)
		return XDP_ABORTED;
	return *drop ? XDP_DROP : XDP_PASS;
}

SEC("tracepoint/xdp/xdp_exception")
int count_exceptions(void *ctx)
{
	__u32 zero = 0;
	__u32 *drop = bpf_map_lookup_elem(&drop_all, &zero);
	__u64 *count = bpf_map_lookup_elem(&exceptions, &zero);

	if (drop && *drop && count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
