// SPDX-License-Identifier: GPL-2.0
/* A verdict that depends on the clock: packets to known destinations are
 * let through only in alternate slices of bpf_ktime_get_ns() (the slice
 * length is configured), and the time of the last packet of each slice
 * kind is kept from the coarse clock. The configuration and the table are
 * read-only to the program (Morpheus folds them); the timestamps are
 * written. Two runs of the original a few microseconds apart may fall in
 * different slices. */
#include "common.h"

struct slice_config {
	__u32 shift; /* a slice is 2^shift ns */
	__u32 closed_verdict;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slice_config);
} slice_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);   /* IPv4 destination */
	__type(value, __u32); /* verdict while open */
} slice_destinations SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64); /* 0: last open packet, 1: last closed packet */
} last_seen SEC(".maps");

SEC("xdp")
int slice_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct slice_config *config;
	__u32 zero = 0, destination, open, slot;
	__u32 *verdict;
	__u64 *seen;

	if (!ip)
		return XDP_PASS;
	destination = ip->daddr;
	verdict = bpf_map_lookup_elem(&slice_destinations, &destination);
	config = bpf_map_lookup_elem(&slice_config, &zero);
	if (!verdict || !config)
		return XDP_PASS;
	open = !((bpf_ktime_get_ns() >> (config->shift & 63)) & 1);
	slot = open ? 0 : 1;
	seen = bpf_map_lookup_elem(&last_seen, &slot);
	if (seen)
		*seen = bpf_ktime_get_coarse_ns();
	return open ? *verdict : config->closed_verdict;
}

char LICENSE[] SEC("license") = "GPL";
