// SPDX-License-Identifier: GPL-2.0
/* Built against a vmlinux.h (bpftool btf dump file /sys/kernel/btf/vmlinux
 * format c), as CO-RE projects build: every kernel struct carries
 * preserve_access_index, so header fields are read through CO-RE
 * relocations that libbpf resolves against the running kernel's BTF. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

struct core_cfg {
	__u32 action;
	__u32 tos;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct core_cfg);
} core_config SEC(".maps");

SEC("xdp")
int build_core_prog(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct core_cfg *cfg;
	__u32 zero = 0;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(0x0800))
		return XDP_PASS;
	cfg = bpf_map_lookup_elem(&core_config, &zero);
	if (!cfg)
		return XDP_ABORTED;
	if (bpf_core_field_exists(ip->tos) && ip->tos == cfg->tos)
		return XDP_PASS;
	return cfg->action;
}

char LICENSE[] SEC("license") = "GPL";
