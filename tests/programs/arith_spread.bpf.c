// SPDX-License-Identifier: GPL-2.0
/* Flow spreading over a configured number of CPUs: slot = hash % ncpus.
 * While the control plane has configured no CPU yet (ncpus = 0), eBPF's
 * remainder by zero leaves the hash as it is, no slot answers it, and the
 * packet is dropped and counted. LLVM calls the remainder by a constant 0
 * undefined: specialized with ncpus folded, the drop path must still be
 * taken (core/passes/DefinedArithmetic). */
#include "common.h"

struct spread_config {
	__u32 ncpus;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct spread_config);
} spread_config SEC(".maps");

/* The CPU each slot's flows go to, written into the TOS byte. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} cpu_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} unspread SEC(".maps");

SEC("xdp")
int spread(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct spread_config *config;
	__u32 zero = 0, slot, *cpu;
	__u64 *dropped;

	if (!ip)
		return XDP_PASS;
	config = bpf_map_lookup_elem(&spread_config, &zero);
	if (!config)
		return XDP_ABORTED;
	slot = (ip->saddr ^ ip->daddr) % config->ncpus;
	cpu = bpf_map_lookup_elem(&cpu_slots, &slot);
	if (!cpu) {
		dropped = bpf_map_lookup_elem(&unspread, &zero);
		if (dropped)
			__sync_fetch_and_add(dropped, 1);
		return XDP_DROP;
	}
	ip->tos = (__u8)*cpu;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
