// SPDX-License-Identifier: GPL-2.0
// Two programs, the second of which the verifier refuses (it reads the
// packet without checking its end), and a map: the load errors of
// FailureTest name the program refused and the map's differing fields.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

SEC("xdp")
int accepted(struct xdp_md *ctx)
{
	__u32 key = 0;

	return bpf_map_lookup_elem(&seen, &key) ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int refused(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;

	return data[12] == 8 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
