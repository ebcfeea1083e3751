// SPDX-License-Identifier: GPL-2.0
/* Three read-only LPM tries whose prefixes the tests give one length each,
 * the shapes lpm-as-hash serves and lpm-as-array does not all: IPv4
 * (routes4), IPv6 (routes6) and a 32-bit leading word then an IPv4 address
 * (tagged: the packet's IP id, then its destination; any number of leading
 * words). Each is looked up with the packet's destination and a prefix
 * length the packet chooses: the whole key unless the IPv4 TOS byte is
 * non-zero or the IPv6 hop limit is not 64, which then is the prefix length
 * (beyond the trie's maximum too). The values found are written into the
 * packet, so every answer shows in the output bytes. */
#include "common.h"

#include <linux/ipv6.h>

struct v4_key {
	__u32 prefixlen;
	__u32 addr;
};

struct v6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct tagged_key {
	__u32 prefixlen;
	__u32 tag;  /* host order */
	__u32 addr; /* network order */
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct v4_key);
	__type(value, __u32);
} routes4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct v6_key);
	__type(value, __u32);
} routes6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tagged_key);
	__type(value, __u32);
} tagged SEC(".maps");

SEC("xdp")
int lpm_single_length(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 *found, *found_tagged;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		struct v6_key key6;

		if ((void *)(ip6 + 1) > data_end)
			return XDP_PASS;
		key6.prefixlen = ip6->hop_limit == 64 ? 128 : ip6->hop_limit;
		__builtin_memcpy(key6.addr, &ip6->daddr, sizeof(key6.addr));
		found = bpf_map_lookup_elem(&routes6, &key6);
		ip6->flow_lbl[1] = found ? (__u8)*found : 0xff;
		ip6->flow_lbl[2] = found ? (__u8)(*found >> 8) : 0xff;
		return found ? XDP_TX : XDP_DROP;
	}
	struct iphdr *ip = ipv4_header(ctx);
	struct v4_key key4;
	struct tagged_key key12;

	if (!ip)
		return XDP_PASS;
	key4.prefixlen = ip->tos ? ip->tos : 32;
	key4.addr = ip->daddr;
	found = bpf_map_lookup_elem(&routes4, &key4);
	key12.prefixlen = ip->tos ? ip->tos : 64;
	key12.tag = bpf_ntohs(ip->id);
	key12.addr = ip->daddr;
	found_tagged = bpf_map_lookup_elem(&tagged, &key12);
	ip->check = found ? (__u16)*found : 0xffff;
	ip->saddr = found_tagged ? *found_tagged : 0xffffffff;
	return found ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
