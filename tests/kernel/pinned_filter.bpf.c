// SPDX-License-Identifier: GPL-2.0
/* A packet filter whose loader pins its tables by name, as xdp-filter
 * does (/sys/fs/bpf/<name>): rules by source address (hash, read-only),
 * its configuration (array, read-only) and verdict counters the program
 * bumps (per-CPU array). LiveMapsTest.cpp runs it live and checks that
 * the commands Morpheus runs for itself (bench, fuzz, specialize,
 * explain) never touch these maps; pinned_filter.conf is its bench
 * preset. */
#include "../programs/common.h"

struct rule {
	__u32 verdict;
};

struct config {
	__u32 enabled;
	__u32 default_verdict;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32); /* source address, network order */
	__type(value, struct rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pinned_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pinned_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8); /* by verdict */
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pinned_verdicts SEC(".maps");

static __always_inline int counted(__u32 verdict)
{
	__u64 *count = bpf_map_lookup_elem(&pinned_verdicts, &verdict);

	if (count)
		*count += 1;
	return verdict;
}

SEC("xdp")
int pinned_filter(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct config *config;
	struct rule *rule;
	__u32 zero = 0, saddr;

	config = bpf_map_lookup_elem(&pinned_config, &zero);
	if (!config || !config->enabled || !ip)
		return counted(XDP_PASS);
	saddr = ip->saddr;
	rule = bpf_map_lookup_elem(&pinned_rules, &saddr);
	return counted(rule ? rule->verdict : config->default_verdict);
}

char LICENSE[] SEC("license") = "GPL";
