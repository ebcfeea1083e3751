// SPDX-License-Identifier: GPL-2.0
/* Built as Katran builds its data plane: `clang -O2 -g -emit-llvm -c`
 * for the host (no --target=bpf), then lowered for BPF. A backend table of
 * structs whose fields have every width (their offsets are the data
 * layout's), a packet rewrite and a counter the program writes: the
 * retargeted build must do what the BPF build of this source does. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct backend {
	__u8 flags;	/* 1: bounce (XDP_TX), else pass */
	__u16 tos;	/* written into the header */
	__u32 address;	/* the new destination */
	__u64 packets;	/* written by the program */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unknown_verdict SEC(".maps");

SEC("xdp")
int balance(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u32 zero = 0, *verdict;
	struct backend *backend;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	backend = bpf_map_lookup_elem(&backends, &ip->daddr);
	if (!backend) {
		verdict = bpf_map_lookup_elem(&unknown_verdict, &zero);
		return verdict && *verdict ? *verdict : XDP_DROP;
	}
	ip->daddr = backend->address;
	ip->tos = (__u8)backend->tos;
	__sync_fetch_and_add(&backend->packets, 1);
	return backend->flags & 1 ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
