// SPDX-License-Identifier: GPL-2.0
/* Sampling, as operators write it: packets to a known destination take
 * their verdict from a read-only table, except a configured percentage of
 * them, chosen with bpf_get_prandom_u32(), which gets the configured action
 * and is counted. The configuration and the table are read-only to the
 * program (Morpheus folds them); the counters are written. Every run draws
 * a new random number, so two runs of the original itself disagree on the
 * sampled packets. */
#include "common.h"

struct sampling_config {
	__u32 percent; /* of the packets to known destinations, sampled */
	__u32 action;  /* the verdict of a sampled packet */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sampling_config);
} sampling_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);   /* IPv4 destination */
	__type(value, __u32); /* verdict */
} destinations SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64); /* 0: sampled, 1: not sampled */
} sampled SEC(".maps");

static __always_inline void count(__u32 index)
{
	__u64 *counter = bpf_map_lookup_elem(&sampled, &index);

	if (counter)
		__sync_fetch_and_add(counter, 1);
}

SEC("xdp")
int sample_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct sampling_config *config;
	__u32 zero = 0, destination;
	__u32 *verdict;

	if (!ip)
		return XDP_PASS;
	destination = ip->daddr;
	verdict = bpf_map_lookup_elem(&destinations, &destination);
	if (!verdict)
		return XDP_PASS;
	config = bpf_map_lookup_elem(&sampling_config, &zero);
	if (config && bpf_get_prandom_u32() % 100 < config->percent) {
		count(0);
		ip->tos = 0x20; /* the sample is marked on its way */
		return config->action;
	}
	count(1);
	return *verdict;
}

char LICENSE[] SEC("license") = "GPL";
