// SPDX-License-Identifier: GPL-2.0
/* A table declared with one entry that the program's own loader sizes
 * before load (bpf_map__set_max_entries), as a NAT64 gateway sizes its
 * pool from its configuration: the verdict per DSCP value. Specialized for
 * the declared size, the one entry would be inlined whole and every other
 * DSCP answered as absent; `--max-entries verdict_by_dscp=64` sizes it as
 * the loader does. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} verdict_by_dscp SEC(".maps");

SEC("xdp")
int by_dscp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u32 dscp, *verdict;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	dscp = ip->tos >> 2;
	verdict = bpf_map_lookup_elem(&verdict_by_dscp, &dscp);
	return verdict && *verdict ? *verdict : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
