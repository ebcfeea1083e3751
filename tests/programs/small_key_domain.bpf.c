// SPDX-License-Identifier: GPL-2.0
/* Read-only hash tables of small key domains, the shapes hash-as-array
 * serves: `ports` keyed by the UDP destination port (16 bits, network
 * order as the packet holds it), `ids` by a 32-bit key the tests fill
 * within a small range (the IP id in host order plus 100,000: a bounds
 * check first), `marks` (per-CPU, one value on every CPU) by the TOS byte.
 * The values found are written into the packet, so every answer shows in
 * the output bytes. */
#include "common.h"

#include <linux/in.h>
#include <linux/udp.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u16);
	__type(value, __u32);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 256);
	__type(key, __u8);
	__type(value, __u32);
} marks SEC(".maps");

SEC("xdp")
int small_key_domain(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = ipv4_header(ctx);
	struct udphdr *udp;
	__u32 *action, *mark, id;
	__u64 *tag;
	__u16 port;
	__u8 tos;

	if (!ip || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return XDP_PASS;
	port = udp->dest;
	action = bpf_map_lookup_elem(&ports, &port);
	id = bpf_ntohs(ip->id) + 100000;
	tag = bpf_map_lookup_elem(&ids, &id);
	tos = ip->tos;
	mark = bpf_map_lookup_elem(&marks, &tos);
	udp->source = action ? (__u16)*action : 0xffff;
	ip->saddr = tag ? (__u32)*tag : 0xffffffff;
	ip->daddr = tag ? (__u32)(*tag >> 32) : 0xffffffff;
	udp->check = mark ? (__u16)*mark : 0xffff;
	return action ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
