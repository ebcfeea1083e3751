// SPDX-License-Identifier: GPL-2.0
// Constants its loader sets before load, as libbpf skeletons do
// (`skel->rodata->blocked_port = 80`): the owner's .rodata then differs
// from the source's, and an adopted program's versions must compute with
// the owner's bytes. Beside them a configuration map the program only
// reads (specialized), so the versions differ from the original.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

const volatile __u16 blocked_port = 0;          /* 0: none */
const volatile __u32 verdict_otherwise = XDP_PASS;

struct settings {
	__u32 enabled;
	__u32 ttl_floor; /* below it: dropped */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct settings);
} settings SEC(".maps");

SEC("xdp")
int loader_constants(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp = (void *)(ip + 1);
	struct settings *config;
	__u32 zero = 0;

	if ((void *)(udp + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5)
		return XDP_ABORTED;
	config = bpf_map_lookup_elem(&settings, &zero);
	if (!config || !config->enabled)
		return verdict_otherwise;
	if (ip->ttl < config->ttl_floor)
		return XDP_DROP;
	if (blocked_port && ip->protocol == IPPROTO_UDP && udp->dest == bpf_htons(blocked_port))
		return XDP_DROP;
	return verdict_otherwise;
}

char LICENSE[] SEC("license") = "GPL";
