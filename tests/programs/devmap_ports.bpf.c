// SPDX-License-Identifier: GPL-2.0
/* An XDP forwarder's port tables: a devmap_hash of neighbours keyed by the
 * destination's last byte, redirected to, and a devmap of uplinks read at
 * slot 0 for its ifindex. A lookup returns the entry's struct
 * bpf_devmap_val, read-only to programs; the kernel removes an entry when
 * its device is unregistered, which no guard sees, so only the keys a map
 * does not hold may be answered without the lookup. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} neighbours SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} uplinks SEC(".maps");

SEC("xdp")
int devmap_ports(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct bpf_devmap_val *neighbour, *uplink;
	__u32 zero = 0, host;

	if (!ip)
		return XDP_PASS;
	host = bpf_ntohl(ip->daddr) & 0xff;
	neighbour = bpf_map_lookup_elem(&neighbours, &host);
	if (neighbour) {
		if (neighbour->ifindex == ctx->ingress_ifindex)
			return XDP_DROP;
		return bpf_redirect_map(&neighbours, host, XDP_ABORTED);
	}
	uplink = bpf_map_lookup_elem(&uplinks, &zero);
	if (!uplink)
		return XDP_PASS;
	return uplink->ifindex == 1 ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
