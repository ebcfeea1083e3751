// SPDX-License-Identifier: GPL-2.0
/* Configuration behind a map of maps, the way programs that swap a whole
 * configuration at once keep it: slot 0 of `configs` holds the active
 * configuration table (statically `primary`; a control plane swaps in
 * `secondary` with one update of the outer map). `tenants` holds per-tenant
 * overrides in tables its loader creates (none declared here). */
#include "common.h"

struct cfg {
	__u32 action;
	__u32 port;
};

struct cfg_array {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct cfg);
};

struct cfg_array primary SEC(".maps");
struct cfg_array secondary SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct cfg_array);
} configs SEC(".maps") = {
	.values = { [0] = &primary },
};

struct tenant_array {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct tenant_array);
} tenants SEC(".maps");

SEC("xdp")
int inner_config_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	__u32 zero = 0, one = 1;
	struct cfg *cfg, *override;
	void *active, *tenant;

	if (!ip)
		return XDP_PASS;
	tenant = bpf_map_lookup_elem(&tenants, &one);
	if (tenant) {
		override = bpf_map_lookup_elem(tenant, &zero);
		if (override && override->port == ip->ttl)
			return override->action;
	}
	active = bpf_map_lookup_elem(&configs, &zero);
	if (!active)
		return XDP_ABORTED;
	cfg = bpf_map_lookup_elem(active, &zero);
	if (!cfg)
		return XDP_ABORTED;
	return cfg->port == ip->tos ? XDP_PASS : cfg->action;
}

char LICENSE[] SEC("license") = "GPL";
