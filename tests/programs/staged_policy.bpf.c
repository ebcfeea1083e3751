/* Two tail-called stages behind one entry, each reading its own table:
 * what a cycle after a change in one stage's table validates (that stage,
 * and the entry that reaches it) and leaves out (the other stage, whose
 * code and table did not change). The entry sends UDP to `udp_stage`
 * (a small hash of destinations: a compare chain once specialized) and TCP
 * to `tcp_stage` (one configuration slot: folded, no chain). The entry,
 * staged_entry, is the object's last program: name it to Morpheus. */
#include "common.h"
#include <linux/in.h>
#include <linux/udp.h>

struct destination {
	__u32 daddr; /* network order */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct destination);
	__type(value, __u32); /* XDP verdict */
} udp_policy SEC(".maps");

struct tcp_rule {
	__u16 blocked_port; /* host order; 0: none */
	__u16 pad;
	__u32 verdict;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tcp_rule);
} tcp_config SEC(".maps");

SEC("xdp")
int udp_stage(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct destination key = {};
	__u32 *verdict;

	if (!ip)
		return XDP_PASS;
	key.daddr = ip->daddr;
	verdict = bpf_map_lookup_elem(&udp_policy, &key);
	return verdict ? *verdict : XDP_PASS;
}

SEC("xdp")
int tcp_stage(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct udphdr *ports;
	struct tcp_rule *rule;
	__u32 zero = 0;

	if (!ip || ip->ihl != 5)
		return XDP_PASS;
	ports = (void *)(ip + 1);
	if ((void *)(ports + 1) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	rule = bpf_map_lookup_elem(&tcp_config, &zero);
	if (rule && rule->blocked_port && bpf_ntohs(ports->dest) == rule->blocked_port)
		return rule->verdict;
	return XDP_PASS;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__uint(key_size, sizeof(__u32));
	__array(values, int(void *));
} stages SEC(".maps") = {
	.values = { (void *)&udp_stage, (void *)&tcp_stage },
};

SEC("xdp")
int staged_entry(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);

	if (!ip)
		return XDP_PASS;
	if (ip->protocol == IPPROTO_UDP)
		bpf_tail_call(ctx, &stages, 0);
	else if (ip->protocol == IPPROTO_TCP)
		bpf_tail_call(ctx, &stages, 1);
	return XDP_PASS; /* other protocols, or an empty slot */
}

char LICENSE[] SEC("license") = "GPL";
