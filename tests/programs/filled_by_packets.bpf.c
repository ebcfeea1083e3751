// SPDX-License-Identifier: GPL-2.0
// A small hash the program fills from packets (the last TTL per source):
// after a state's packets it is often full, so the fuzzer's change behind
// the guard, which adds a key, finds no room (E2BIG). The fuzzer must leave
// that key out, not stop. The verdict reads a configuration array.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} last_ttl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} min_ttl SEC(".maps");

SEC("xdp")
int filled_by_packets(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;

	if (data + 34 > data_end)
		return XDP_PASS;
	__u32 source = *(__u32 *)(data + 26);
	__u32 ttl = data[22];
	bpf_map_update_elem(&last_ttl, &source, &ttl, BPF_ANY);
	__u32 *least = bpf_map_lookup_elem(&min_ttl, &zero);
	return least && ttl < *least ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
