// SPDX-License-Identifier: GPL-2.0
/* A TC program that rewrites a packet's destination with a backend's
 * address read from a table, through bpf_skb_store_bytes (as Cilium's
 * lb4 DNAT does): the helper only reads the bytes it copies, so the
 * table stays read-only. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <stddef.h>
#include <bpf/bpf_helpers.h>

struct backend {
	__be32 address;
	__u32 weight;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

SEC("tc")
int store_backend(struct __sk_buff *skb)
{
	__u32 slot = skb->mark;
	struct backend *backend = bpf_map_lookup_elem(&backends, &slot);

	if (!backend)
		return TC_ACT_OK;
	if (bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, daddr), &backend->address,
				sizeof(backend->address), 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
