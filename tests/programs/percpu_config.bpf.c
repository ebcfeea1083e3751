// SPDX-License-Identifier: GPL-2.0
/* Per-CPU configuration beside a per-CPU counter in one value: the control
 * plane writes the rule to every CPU alike, the data plane counts packets
 * in its own CPU's copy, so once traffic ran on one CPU the values of the
 * CPUs differ, in the counter only. */
#include "common.h"

struct setting {
	__u32 action;
	__u32 port;
	__u64 packets;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct setting);
} settings SEC(".maps");

SEC("xdp")
int percpu_config_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0;
	struct setting *setting;

	if (!ip)
		return XDP_PASS;
	setting = bpf_map_lookup_elem(&settings, &zero);
	if (!setting)
		return XDP_ABORTED;
	setting->packets++;
	return setting->port == ip->tos ? XDP_PASS : setting->action;
}

char LICENSE[] SEC("license") = "GPL";
