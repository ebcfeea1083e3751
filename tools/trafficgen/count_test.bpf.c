// SPDX-License-Identifier: GPL-2.0
/*
 * count_test: the receiving end of LiveFramesTest. Drops every frame after
 * checking it the way the generator promises to build it and counting it by
 * verdict and by 5-tuple.
 *
 *   expected_macs  ARRAY[1]  destination and source MAC every frame must carry
 *   counters       ARRAY     one u64 per enum count_slot
 *   by_flow        HASH      5-tuple (struct livegen_flow) -> frames seen
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "checksum.bpf.h"
#include "livegen.h"

enum count_slot {
	COUNT_VALID = 0,   /* IPv4 frame that passed every check */
	COUNT_NOT_IPV4 = 1,
	COUNT_BAD_MAC = 2,
	COUNT_BAD_IP = 3,  /* wrong version/ihl/length or IPv4 checksum */
	COUNT_BAD_L4 = 4,  /* wrong protocol, length or L4 checksum */
	COUNT_SLOTS = 5,
};

struct macs {
	__u8 dst[ETH_ALEN];
	__u8 src[ETH_ALEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct macs);
} expected_macs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COUNT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct livegen_flow);
	__type(value, __u64);
} by_flow SEC(".maps");

static __always_inline int count(__u32 slot)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &slot);

	if (value)
		__sync_fetch_and_add(value, 1);
	return XDP_DROP;
}

static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	return __builtin_memcmp(a, b, ETH_ALEN) == 0;
}

SEC("xdp")
int count_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *tcp = (void *)(ip + 1);
	struct udphdr *udp = (void *)(ip + 1);
	__u32 zero = 0;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return count(COUNT_NOT_IPV4);

	struct macs *macs = bpf_map_lookup_elem(&expected_macs, &zero);
	if (!macs || !same_mac(eth->h_dest, macs->dst) ||
	    !same_mac(eth->h_source, macs->src))
		return count(COUNT_BAD_MAC);

	/* A valid header sums to 0xffff, its own checksum included. */
	if (ip->version != 4 || ip->ihl != 5 ||
	    fold(sum16(ip, sizeof(*ip) / 2)) != 0xffff)
		return count(COUNT_BAD_IP);

	__u16 l4_len = bpf_ntohs(ip->tot_len) - sizeof(*ip);
	__u32 pseudo = sum16(&ip->saddr, 4) + bpf_htons(ip->protocol) +
		       bpf_htons(l4_len);
	struct livegen_flow key = {
		.saddr = ip->saddr,
		.daddr = ip->daddr,
		.proto = ip->protocol,
	};

	/* The generator sends headers only, so the L4 length is fixed. */
	if (ip->protocol == IPPROTO_TCP && l4_len == sizeof(*tcp)) {
		if ((void *)(tcp + 1) > data_end || tcp->doff != 5 ||
		    fold(pseudo + sum16(tcp, sizeof(*tcp) / 2)) != 0xffff)
			return count(COUNT_BAD_L4);
		key.sport = tcp->source;
		key.dport = tcp->dest;
	} else if (ip->protocol == IPPROTO_UDP && l4_len == sizeof(*udp)) {
		if ((void *)(udp + 1) > data_end ||
		    udp->len != bpf_htons(sizeof(*udp)) || udp->check == 0 ||
		    fold(pseudo + sum16(udp, sizeof(*udp) / 2)) != 0xffff)
			return count(COUNT_BAD_L4);
		key.sport = udp->source;
		key.dport = udp->dest;
	} else {
		return count(COUNT_BAD_L4);
	}

	__u64 *seen = bpf_map_lookup_elem(&by_flow, &key);
	if (!seen) {
		/* NOEXIST: another CPU may have inserted it meanwhile. */
		__u64 none = 0;

		bpf_map_update_elem(&by_flow, &key, &none, BPF_NOEXIST);
		seen = bpf_map_lookup_elem(&by_flow, &key);
	}
	if (seen)
		__sync_fetch_and_add(seen, 1);
	return count(COUNT_VALID);
}

char LICENSE[] SEC("license") = "GPL";
