// SPDX-License-Identifier: GPL-2.0
/* A TC program that changes the packet it is given, as translators and
 * load balancers do: it stamps the IPv4 TOS byte with the value a
 * read-only table holds (bpf_skb_store_bytes) and clears the skb's mark,
 * after counting whether the packet already carried its stamp. Run twice
 * on one skb (BPF_PROG_TEST_RUN with repeat, which resets neither bytes
 * nor mark), the second run sees its own output: `arrivals[1]` counts
 * those, `arrivals[0]` the packets that came fresh. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stamp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} arrivals SEC(".maps");

SEC("tc")
int stamp_tos(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u32 zero = 0, seen;
	__u32 *tos = bpf_map_lookup_elem(&stamp, &zero);
	__u64 *count;
	__u8 byte;

	if (!tos || (void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	byte = (__u8)*tos;
	seen = ip->tos == byte;
	count = bpf_map_lookup_elem(&arrivals, &seen);
	if (count)
		__sync_fetch_and_add(count, 1);
	if (bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, tos), &byte, 1, 0))
		return TC_ACT_SHOT;
	skb->mark = 0;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
