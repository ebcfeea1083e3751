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
 * All of it is filled by `morpheus nf router ...` (Control.cpp). The maps,
 * the header checks and the counters are in router_dataplane.h.
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
	struct route_key route_key = { .prefixlen = 32 };
	struct neighbor_key neighbor_key = {};
	const struct neighbor *neighbor;
	const struct route *route;
	struct ethhdr *eth;
	struct iphdr *iph;
	int action;

	action = admit_for_forwarding(ctx, &eth, &iph);
	if (action != ADMITTED)
		return action;

	route_key.addr = iph->daddr;
	route = bpf_map_lookup_elem(&routes, &route_key);
	if (!route)
		return nf_count(&stats, STAT_NO_ROUTE, XDP_PASS);
	if (route->kind == ROUTE_LOCAL)
		return nf_count(&stats, STAT_LOCAL, XDP_PASS);

	neighbor_key.addr = route->gateway ? route->gateway : iph->daddr;
	neighbor_key.port = route->port;
	neighbor = bpf_map_lookup_elem(&neighbors, &neighbor_key);
	if (!neighbor)
		return nf_count(&stats, STAT_NO_NEIGHBOR, XDP_PASS);

	/* Only records the target; the frame leaves after we return. */
	action = bpf_redirect_map(&ports, route->port, XDP_PASS);
	if (action != XDP_REDIRECT)
		return nf_count(&stats, STAT_NO_PORT, action);

	ipv4_decrement_ttl(iph);
	__builtin_memcpy(eth->h_dest, neighbor->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, neighbor->src_mac, ETH_ALEN);
	return nf_count(&stats, STAT_FORWARDED, XDP_REDIRECT);
}

char LICENSE[] SEC("license") = "GPL";
