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

#include "router.h"

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, ROUTER_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* required for LPM tries */
	__type(key, struct route_key);
	__type(value, struct route);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ROUTER_MAX_NEIGHBORS);
	__type(key, struct neighbor_key);
	__type(value, struct neighbor);
} neighbors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, ROUTER_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32); /* ifindex */
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline int count(__u32 index, int verdict)
{
	__u64 *counter = bpf_map_lookup_elem(&stats, &index);

	if (counter)
		*counter += 1;
	return verdict;
}

/* The one's-complement sum over a valid header, checksum included, is 0xffff
 * (RFC 1071); the sum is the same in either byte order. */
static __always_inline int ipv4_checksum_valid(const struct iphdr *iph)
{
	const __u16 *word = (const __u16 *)iph;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*iph) / 2); i++)
		sum += word[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/*
 * RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), for the word m = TTL:protocol
 * becoming m' = m - 0x0100: ~m + m' is 0xfeff whatever m is. Unlike the
 * shortcut HC + 0x0100 it never yields 0xffff where a full recomputation
 * gives 0x0000, so the output equals a freshly checksummed header.
 */
static __always_inline void ipv4_decrement_ttl(struct iphdr *iph)
{
	__u32 sum = (__u16)~bpf_ntohs(iph->check) + 0xfeff;

	sum = (sum & 0xffff) + (sum >> 16);
	iph->check = bpf_htons((__u16)~sum);
	iph->ttl--;
}

static __always_inline int is_multicast_or_broadcast(__be32 daddr)
{
	return (daddr & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) ||
	       daddr == bpf_htonl(0xffffffff);
}

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
