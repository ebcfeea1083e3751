// SPDX-License-Identifier: GPL-2.0
/* A read-only ACL larger than any compare chain whose rules name few
 * protocols: the protocol is tested before the lookup, and a packet of
 * another protocol gets no rule without the helper call. */
#include "common.h"

struct acl_key {
	__u8 protocol;
	__u8 padding[3];
	__u32 address;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct acl_key);
	__type(value, __u32);
} acl SEC(".maps");

SEC("xdp")
int acl_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct acl_key key = {};
	__u32 *verdict;

	if (!ip)
		return XDP_PASS;
	key.protocol = ip->protocol;
	key.address = ip->daddr;
	verdict = bpf_map_lookup_elem(&acl, &key);
	if (!verdict)
		return XDP_PASS;
	return *verdict == XDP_DROP ? XDP_DROP : XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
