// SPDX-License-Identifier: GPL-2.0
// A table the data plane writes, for the per-entry write guards
// (core/passes/GuardTableWrites.cpp). A packet starts with a command in
// host order: {op, flow key, verdict}. op 1 learns: a known flow's verdict
// is changed in place (and its update count bumped), a new flow inserted;
// op 2 forgets the flow; any other op looks the flow up and returns its
// verdict (XDP_PASS for an unknown flow), writing nothing.
// learning_lru.bpf.c builds the same program over an LRU table.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct flow_key {
	__u32 addr;
	__u32 port;
};

struct flow {
	__u32 verdict;
	__u32 learned; /* inserted by the data plane */
	__u64 updates; /* changed in place by the data plane */
};

#ifndef FLOWS_TYPE
#define FLOWS_TYPE BPF_MAP_TYPE_HASH
#define FLOWS_ENTRIES 1024
#endif

struct {
	__uint(type, FLOWS_TYPE);
	__uint(max_entries, FLOWS_ENTRIES);
	__type(key, struct flow_key);
	__type(value, struct flow);
} flows SEC(".maps");

struct command {
	__u32 op;
	struct flow_key key;
	__u32 verdict;
};

SEC("xdp")
int learning(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct command *command = data;
	struct flow_key key;
	struct flow *flow;

	if ((void *)(command + 1) > data_end)
		return XDP_ABORTED;
	key = command->key;
	if (command->op == 1) {
		flow = bpf_map_lookup_elem(&flows, &key);
		if (flow) {
			flow->verdict = command->verdict;
			flow->updates++;
			return XDP_TX;
		}
		struct flow fresh = { .verdict = command->verdict, .learned = 1 };
		return bpf_map_update_elem(&flows, &key, &fresh, BPF_NOEXIST) ? XDP_ABORTED : XDP_TX;
	}
	if (command->op == 2)
		return bpf_map_delete_elem(&flows, &key) ? XDP_ABORTED : XDP_TX;
	flow = bpf_map_lookup_elem(&flows, &key);
	return flow ? flow->verdict : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
