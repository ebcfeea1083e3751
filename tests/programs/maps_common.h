/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the maps_*.bpf.c test programs share: each isolates one kind of map
 * a program can write (maps_all.bpf.c uses every kind at once), beside a
 * read-only `config` array that Morpheus specializes on, so every cycle
 * builds, validates and installs real specialized code.
 *
 *   config[0].enabled  0 drops every packet before the feature runs
 *   config[0].salt     mixed into the values the feature writes
 */
#ifndef MAPS_COMMON_H
#define MAPS_COMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct maps_config {
	__u32 enabled;
	__u32 salt;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct maps_config);
} config SEC(".maps");

static __always_inline const struct maps_config *maps_config(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&config, &zero);
}

/* The IPv4 destination of the packet, or 0 (not IPv4, too short). */
static __always_inline __u32 maps_destination(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	return ip->daddr;
}

char LICENSE[] SEC("license") = "GPL";

#endif
