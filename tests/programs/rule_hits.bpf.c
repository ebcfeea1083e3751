/* A packet filter in the style of xdp-filter: rules the control plane
 * writes into hash tables (blocked source addresses, per-CPU; denied
 * destination ports), each value a verdict beside a hit counter the
 * program bumps in place. The program never inserts or deletes a rule, so
 * which keys the tables hold is the control plane's alone, though it
 * writes every value it finds. Most packets match no rule. */
#include "common.h"
#include <linux/in.h>
#include <linux/udp.h>

struct rule {
	__u32 verdict;
	__u32 pad;
	__u64 hits;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* source address, network order */
	__type(value, struct rule);
} blocked_sources SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16); /* destination port, network order */
	__type(value, struct rule);
} denied_ports SEC(".maps");

SEC("xdp")
int rule_hits(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = ipv4_header(ctx);
	struct udphdr *ports;
	struct rule *rule;
	__u32 saddr;
	__u16 dport;

	if (!ip)
		return XDP_PASS;
	saddr = ip->saddr;
	rule = bpf_map_lookup_elem(&blocked_sources, &saddr);
	if (rule) {
		rule->hits++;
		return rule->verdict;
	}
	if (ip->ihl != 5 || (ip->protocol != IPPROTO_UDP && ip->protocol != IPPROTO_TCP))
		return XDP_PASS;
	ports = (void *)(ip + 1);
	if ((void *)(ports + 1) > data_end)
		return XDP_PASS;
	dport = ports->dest;
	rule = bpf_map_lookup_elem(&denied_ports, &dport);
	if (rule) {
		__sync_fetch_and_add(&rule->hits, 1);
		return rule->verdict;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
