// SPDX-License-Identifier: GPL-2.0
/* A read-only LPM trie whose keys are a 32-bit leading word then an IPv4
 * address, like the firewall's (generation, prefix) tries: the leading word
 * is the packet's IP id, the address its destination, the prefix length 64
 * (the whole key) unless the TOS byte is non-zero, which then is the prefix
 * length (beyond the trie's maximum too, where the kernel answers NULL).
 * The value found is written into the packet's checksum field, so every
 * answer shows in the output bytes. */
#include "common.h"

struct leading_key {
	__u32 prefixlen;
	__u32 leading; /* host order, like the firewall's generation */
	__u32 addr;    /* network order */
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct leading_key);
	__type(value, __u32);
} prefixes SEC(".maps");

SEC("xdp")
int lpm_leading(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct leading_key key;
	__u32 *found;

	if (!ip)
		return XDP_PASS;
	key.prefixlen = ip->tos ? ip->tos : 64;
	key.leading = bpf_ntohs(ip->id);
	key.addr = ip->daddr;
	found = bpf_map_lookup_elem(&prefixes, &key);
	ip->check = found ? (__u16)*found : 0xffff;
	return found ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
