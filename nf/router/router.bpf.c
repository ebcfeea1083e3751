// SPDX-License-Identifier: GPL-2.0
/*
 * router: an IPv4 forwarding fast path in XDP. It forwards what RFC 1812
 * lets a router forward without help and hands everything else to the
 * kernel stack untouched, so ICMP errors, ARP, local delivery and IP
 * options keep working exactly as they do without the program:
 *
 *   Ethernet ── not IPv4 (ARP, IPv6, 802.1Q/802.1ad) ─────────── PASS
 *   IPv4 header checks (version, IHL, total length, checksum) ── DROP
 *   IHL > 5 (options) ────────────────────────────────────────── PASS
 *   multicast / broadcast destination ────────────────────────── PASS
 *   TTL <= 1 (stack sends time exceeded) ─────────────────────── PASS
 *   routes (LPM) ── miss ─ PASS,  local route ─ PASS
 *   neighbors (gateway or destination, port) ── miss ─────────── PASS
 *   ports (DEVMAP) ── no interface ───────────────────────────── PASS
 *   TTL - 1, checksum updated (RFC 1624), MACs rewritten ─────── REDIRECT
 *
 * Fragments are forwarded like any datagram (a router forwards fragments
 * as it finds them; only the destination reassembles).
 * The redirect target is chosen before the packet is rewritten, so every
 * packet passed to the stack is exactly the one that arrived.
 *
 *   routes     LPM_TRIE       prefix -> gateway, port, kind   (read only)
 *   neighbors  HASH           (address, port) -> MACs         (read only)
 *   ports      DEVMAP         port -> ifindex                 (read only)
 *   stats      PERCPU_ARRAY   one counter per outcome  (written per packet)
 *
 * All of it is filled by `morpheus nf router ...` (Control.cpp).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "router_dataplane.h"

SEC("xdp")
int router(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct route_key route_key = { .prefixlen = 32 };
	struct neighbor_key neighbor_key = {};
	const struct neighbor *neighbor;
	const struct route *route;
	__u32 total_length;
	int action;

	if ((void *)(eth + 1) > data_end)
		return count(STAT_MALFORMED, XDP_DROP);
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return count(STAT_NOT_IPV4, XDP_PASS);

	/* RFC 1812 5.2.2: a datagram failing these is silently discarded. */
	if ((void *)(iph + 1) > data_end || iph->version != 4 || iph->ihl < 5)
		return count(STAT_MALFORMED, XDP_DROP);
	total_length = bpf_ntohs(iph->tot_len);
	if (total_length < iph->ihl * 4u || total_length > (__u32)(data_end - (void *)iph))
		return count(STAT_MALFORMED, XDP_DROP);
	if (iph->ihl > 5)
		return count(STAT_IP_OPTIONS, XDP_PASS);
	if (!ipv4_checksum_valid(iph))
		return count(STAT_MALFORMED, XDP_DROP);

	if (is_multicast_or_broadcast(iph->daddr))
		return count(STAT_LOCAL, XDP_PASS);
	if (iph->ttl <= 1)
		return count(STAT_TTL_EXCEEDED, XDP_PASS);

	route_key.addr = iph->daddr;
	route = bpf_map_lookup_elem(&routes, &route_key);
	if (!route)
		return count(STAT_NO_ROUTE, XDP_PASS);
	if (route->kind == ROUTE_LOCAL)
		return count(STAT_LOCAL, XDP_PASS);

	neighbor_key.addr = route->gateway ? route->gateway : iph->daddr;
	neighbor_key.port = route->port;
	neighbor = bpf_map_lookup_elem(&neighbors, &neighbor_key);
	if (!neighbor)
		return count(STAT_NO_NEIGHBOR, XDP_PASS);

	/* Only records the target; the frame leaves after we return. */
	action = bpf_redirect_map(&ports, route->port, XDP_PASS);
	if (action != XDP_REDIRECT)
		return count(STAT_NO_PORT, action);

	ipv4_decrement_ttl(iph);
	__builtin_memcpy(eth->h_dest, neighbor->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, neighbor->src_mac, ETH_ALEN);
	return count(STAT_FORWARDED, XDP_REDIRECT);
}

char LICENSE[] SEC("license") = "GPL";
