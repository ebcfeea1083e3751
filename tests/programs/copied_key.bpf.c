// SPDX-License-Identifier: GPL-2.0
/* Keys built as Katran's packet path builds them: a packet description on
 * the stack (kept in memory: its flow is the connection table's key), the
 * VIP key zeroed and then copied from it (a 16-byte memcpy of the IPv6
 * destination, a field for IPv4), and the control array's position,
 * `__u32 mac_pos = 0` at the top, read at the end past the other lookups.
 * Every byte of the VIP key is written and the control key is a constant:
 * both are proven through the copies, in each inlined copy of the path. */
#include "common.h"
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

struct flow_key {
	union {
		__u32 src;
		__u32 srcv6[4];
	};
	union {
		__u32 dst;
		__u32 dstv6[4];
	};
	__u16 ports[2];
	__u8 proto;
};

struct packet_description {
	struct flow_key flow;
	__u8 tos;
};

struct vip_definition {
	union {
		__u32 vip;
		__u32 vipv6[4];
	};
	__u16 port;
	__u8 proto;
};

struct vip_meta {
	__u32 flags;
	__u32 vip_num;
};

struct ctl_value {
	__u8 mac[6];
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct vip_definition);
	__type(value, struct vip_meta);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct ctl_value);
} ctl_array SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 64);
	__type(key, struct flow_key);
	__type(value, __u32);
} connections SEC(".maps");

static __always_inline int process(struct xdp_md *ctx, int is_ipv6)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct packet_description pckt = {};
	struct vip_definition vip = {};
	struct ethhdr *eth = data;
	struct ctl_value *cval;
	struct vip_meta *meta;
	struct udphdr *udp;
	__u32 mac_pos = 0;
	__u32 *seen;

	if (is_ipv6) {
		struct ipv6hdr *ip6 = data + sizeof(*eth);

		if ((void *)(ip6 + 1) > data_end)
			return XDP_DROP;
		/* An ICMPv6 error describes the packet it answers: its
		 * addresses swapped (Katran's handle_icmp, reduced). */
		if (ip6->nexthdr == IPPROTO_ICMPV6) {
			__builtin_memcpy(pckt.flow.srcv6, &ip6->daddr, 16);
			__builtin_memcpy(pckt.flow.dstv6, &ip6->saddr, 16);
		} else {
			__builtin_memcpy(pckt.flow.srcv6, &ip6->saddr, 16);
			__builtin_memcpy(pckt.flow.dstv6, &ip6->daddr, 16);
		}
		pckt.flow.proto = ip6->nexthdr == IPPROTO_ICMPV6 ? IPPROTO_UDP : ip6->nexthdr;
		udp = (void *)(ip6 + 1);
	} else {
		struct iphdr *ip = data + sizeof(*eth);

		if ((void *)(ip + 1) > data_end || ip->ihl != 5)
			return XDP_DROP;
		pckt.flow.src = ip->saddr;
		pckt.flow.dst = ip->daddr;
		pckt.flow.proto = ip->protocol;
		pckt.tos = ip->tos;
		udp = (void *)(ip + 1);
	}
	if (pckt.flow.proto != IPPROTO_UDP)
		return XDP_PASS;
	if ((void *)(udp + 1) > data_end)
		return XDP_DROP;
	pckt.flow.ports[0] = udp->source;
	pckt.flow.ports[1] = udp->dest;

	if (is_ipv6)
		__builtin_memcpy(vip.vipv6, pckt.flow.dstv6, 16);
	else
		vip.vip = pckt.flow.dst;
	vip.port = pckt.flow.ports[1];
	vip.proto = pckt.flow.proto;
	meta = bpf_map_lookup_elem(&vips, &vip);
	if (!meta)
		return XDP_PASS;
	seen = bpf_map_lookup_elem(&connections, &pckt.flow);
	if (!seen)
		bpf_map_update_elem(&connections, &pckt.flow, &meta->vip_num, BPF_ANY);

	cval = bpf_map_lookup_elem(&ctl_array, &mac_pos);
	if (!cval)
		return XDP_DROP;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__builtin_memcpy(eth->h_dest, cval->mac, sizeof(eth->h_dest));
	return meta->flags ? XDP_TX : XDP_PASS;
}

SEC("xdp")
int copied_key(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		return process(ctx, 0);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return process(ctx, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
