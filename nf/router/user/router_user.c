// SPDX-License-Identifier: GPL-2.0
/*
 * router, for Morpheus's user-space data plane (backend/user): the logic of
 * ../router.bpf.c in plain C against the table API of morpheus_user.h, with
 * the same table layouts (../router.h) and the same outcomes:
 *
 *   not IPv4 ─ PASS;  header checks fail ─ DROP;  IP options ─ PASS
 *   multicast/broadcast ─ PASS;  TTL <= 1 ─ PASS
 *   routes (LPM) ─ miss PASS, local route PASS
 *   neighbors (gateway or destination, port) ─ miss PASS
 *   ports ─ not bound PASS
 *   TTL - 1, checksum (RFC 1624), MACs rewritten ─ TX out of the route's port
 *
 * ROUTER_LPM picks the routes table's implementation: MU_LPM_DIR24
 * (default), MU_LPM_LINEAR (FastClick's LinearIPLookup) or MU_LPM_RTE
 * (DPDK's rte_lpm); ROUTER_HASH the neighbours': MU_HASH (default) or
 * MU_HASH_RTE (DPDK's rte_hash).
 *
 *   routes     LPM     prefix -> gateway, port, kind   (read only)
 *   neighbors  HASH    (address, port) -> MACs         (read only)
 *   ports      ARRAY   port -> bound (non-zero)        (read only)
 *   stats      ARRAY   one counter per outcome         (written per packet)
 *
 * router_prefetch (MU_PREFETCH) prefetches a packet's route entry, for the
 * runtime's sub-batches.
 */
#include <morpheus_user.h>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <string.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#include "../router.h"
#include "../../common/ipv4.bpf.h"

#ifndef ROUTER_LPM
#define ROUTER_LPM MU_LPM_DIR24
#endif
#ifndef ROUTER_HASH
#define ROUTER_HASH MU_HASH
#endif
#ifndef ROUTER_USER_MAX_ROUTES
#define ROUTER_USER_MAX_ROUTES 4096
#endif

MU_TABLE(routes, ROUTER_LPM, struct route_key, struct route, ROUTER_USER_MAX_ROUTES);
MU_TABLE(neighbors, ROUTER_HASH, struct neighbor_key, struct neighbor, ROUTER_MAX_NEIGHBORS);
MU_TABLE(ports, MU_ARRAY, __u32, __u32, ROUTER_MAX_PORTS);
MU_TABLE(stats, MU_ARRAY, __u32, __u64, STAT_MAX);

static __always_inline int count(__u32 outcome, int verdict)
{
	__u64 *counter = mu_lookup(&stats, &outcome);

	if (counter)
		*counter += 1;
	return verdict;
}

/* RFC 1624 eqn. 3 for TTL - 1, as ../router_dataplane.h. */
static __always_inline void decrement_ttl(struct iphdr *iph)
{
	__u32 sum = (__u16)~ntohs(iph->check) + 0xfeff;

	sum = (sum & 0xffff) + (sum >> 16);
	iph->check = htons((__u16)~sum);
	iph->ttl--;
}

/* The route lookup's entry for the next packets of a sub-batch (the
 * runtime's prefetching): only the checks that make the address valid to
 * read, then the key the handler will look up. */
MU_PREFETCH void router_prefetch(const struct mu_packet *packet)
{
	struct route_key route_key = { .prefixlen = 32 };
	const struct ethhdr *eth = (const struct ethhdr *)packet->data;
	const struct iphdr *iph = (const struct iphdr *)(eth + 1);

	if (packet->len < sizeof(*eth) + sizeof(*iph) || eth->h_proto != htons(ETH_P_IP))
		return;
	route_key.addr = iph->daddr;
	mu_prefetch(&routes, &route_key);
}

MU_HANDLER int router(struct mu_packet *packet)
{
	struct route_key route_key = { .prefixlen = 32 };
	struct neighbor_key neighbor_key = {};
	const struct neighbor *neighbor;
	const struct route *route;
	struct ethhdr *eth = (struct ethhdr *)packet->data;
	struct iphdr *iph = (struct iphdr *)(eth + 1);
	const __u32 *bound;
	__u32 total_length;

	if (packet->len < sizeof(*eth))
		return count(STAT_MALFORMED, MU_DROP);
	if (eth->h_proto != htons(ETH_P_IP))
		return count(STAT_NOT_IPV4, MU_PASS);
	if (packet->len < sizeof(*eth) + sizeof(*iph) || iph->version != 4 || iph->ihl < 5)
		return count(STAT_MALFORMED, MU_DROP);
	total_length = ntohs(iph->tot_len);
	if (total_length < iph->ihl * 4u || total_length > packet->len - sizeof(*eth))
		return count(STAT_MALFORMED, MU_DROP);
	if (iph->ihl > 5)
		return count(STAT_IP_OPTIONS, MU_PASS);
	if (ipv4_header_sum(iph) != 0xffff)
		return count(STAT_MALFORMED, MU_DROP);
	if ((iph->daddr & htonl(0xf0000000)) == htonl(0xe0000000) ||
	    iph->daddr == htonl(0xffffffff))
		return count(STAT_LOCAL, MU_PASS);
	if (iph->ttl <= 1)
		return count(STAT_TTL_EXCEEDED, MU_PASS);

	route_key.addr = iph->daddr;
	route = mu_lookup(&routes, &route_key);
	if (!route)
		return count(STAT_NO_ROUTE, MU_PASS);
	if (route->kind == ROUTE_LOCAL)
		return count(STAT_LOCAL, MU_PASS);

	neighbor_key.addr = route->gateway ? route->gateway : iph->daddr;
	neighbor_key.port = route->port;
	neighbor = mu_lookup(&neighbors, &neighbor_key);
	if (!neighbor)
		return count(STAT_NO_NEIGHBOR, MU_PASS);

	bound = mu_lookup(&ports, &route->port);
	if (!bound || !*bound)
		return count(STAT_NO_PORT, MU_PASS);

	decrement_ttl(iph);
	memcpy(eth->h_dest, neighbor->dst_mac, ETH_ALEN);
	memcpy(eth->h_source, neighbor->src_mac, ETH_ALEN);
	packet->port = route->port;
	return count(STAT_FORWARDED, MU_TX);
}
