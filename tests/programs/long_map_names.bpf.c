// SPDX-License-Identifier: GPL-2.0
/* Map names longer than the kernel keeps (15 characters): a control plane
 * that dumps `blocked_source_addresses` and hands the dump to an offline
 * `morpheus specialize --snapshot` must find it under its whole name. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} blocked_source_addresses SEC(".maps");

SEC("xdp")
int filter_sources(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u32 *verdict;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	verdict = bpf_map_lookup_elem(&blocked_source_addresses, &ip->saddr);
	return verdict ? *verdict : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
