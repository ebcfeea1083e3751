// SPDX-License-Identifier: GPL-2.0
/*
 * nat: IPv4 source NAT (masquerade) between an inside and an outside port,
 * for TCP, UDP and ICMP echo, with the connection table kept by the data
 * plane itself.
 *
 * Direction. A packet is outbound when it arrives on the inside port from
 * an inside address to a non-inside one; it is inbound when it arrives on
 * the outside port for one of the external addresses. The port check keeps
 * spoofed inside sources arriving from outside away from the table; with
 * one port for both sides (one-armed NAT) it is always satisfied.
 *
 * Tables, both LRU hashes written per new flow by the data plane:
 *   nat_out  {inside addr, remote addr, inside port, remote port, proto}
 *            -> {external addr, external port}
 *   nat_in   {external addr, remote addr, external port, remote port, proto}
 *            -> {inside addr, inside port, MACs to send replies with}
 * nat_in is the authority on who owns an external port: a new flow takes a
 * port by inserting into nat_in with BPF_NOEXIST, so of two flows racing for
 * the same port on two CPUs exactly one wins, and the loser probes the next
 * candidate. Candidates come from a hash of the flow, so a flow whose nat_out
 * entry was evicted finds its own nat_in entry again and adopts it instead of
 * moving to another port. Every outbound packet also looks up its nat_in
 * entry: that keeps the entry recent for the LRU as long as the flow sends
 * (receive-only flows keep it recent through their replies) and detects a
 * reverse half that was evicted or taken over, in which case the flow gets
 * a port again. Stale flows simply age out of the LRUs; there is no timer.
 *
 *   nat_config  ARRAY[1]      ports, external pool, MACs (read-only here)
 *   nat_inside  LPM_TRIE      inside prefixes (read-only here; new flows only)
 *   nat_ports   DEVMAP[2]     inside / outside egress ports (read-only here)
 *   nat_out     LRU_HASH      written per new flow
 *   nat_in      LRU_HASH      written per new flow
 *   nat_stats   PERCPU_ARRAY  written per packet
 *
 * Translated packets are forwarded: TTL decremented, MACs rewritten (toward
 * the configured next hop outside; back to the inside neighbour that opened
 * the flow), IPv4 and L4 checksums updated incrementally (a zero UDP
 * checksum stays zero), and redirected through nat_ports to the other port
 * (XDP_TX when both are the same port).
 *
 * What goes to the stack untouched (XDP_PASS, counted): non-IPv4 frames
 * (IPv6, ARP, VLAN-tagged), fragments (translating them needs reassembly),
 * headers with options, TTL <= 1 (the stack answers with ICMP time
 * exceeded), ICMP other than echo, other protocols, inbound packets without
 * a translation, and everything while no configuration is loaded. Malformed
 * packets (truncated at any header, inconsistent lengths, bad IPv4 header
 * checksum) are dropped before they can create any state.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "nat.h"
#include "nat_packet.h"
#include "../common/counters.bpf.h"

#ifndef NAT_MAX_FLOWS
#define NAT_MAX_FLOWS 65536
#endif
#ifndef NAT_MAX_PREFIXES
#define NAT_MAX_PREFIXES 256
#endif

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nat_config);
} nat_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, NAT_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nat_prefix_key);
	__type(value, __u32);
} nat_inside SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, NAT_SIDES);
	__type(key, __u32);
	__type(value, __u32);
} nat_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NAT_MAX_FLOWS);
	__type(key, struct nat_flow_key);
	__type(value, struct nat_binding);
} nat_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NAT_MAX_FLOWS);
	__type(key, struct nat_flow_key);
	__type(value, struct nat_origin);
} nat_in SEC(".maps");

NF_COUNTERS(nat_stats, NAT_STAT_MAX);

static __always_inline int is_inside(__be32 addr)
{
	struct nat_prefix_key key = {.prefixlen = 32, .addr = addr};

	return bpf_map_lookup_elem(&nat_inside, &key) != NULL;
}

/*
 * Gives the inside flow an external address and port: claims a free port
 * in nat_in (or finds the one it already owns), then records the binding
 * in nat_out. Returns 0, or -1 when every candidate is owned by others.
 */
static __always_inline int bind_flow(const struct nat_config *cfg, const struct packet *pkt,
				     const struct nat_flow_key *flow, struct nat_binding *binding)
{
	__u32 span = (__u32)cfg->port_max - cfg->port_min + 1;
	__u32 hash = flow_hash(flow);
	/* One external address per inside host, so its flows look alike
	 * outside; the mask changes nothing but bounds the index for the
	 * verifier. */
	__u32 pick = (mix32(flow->addr) % cfg->external_count) & (NAT_MAX_EXTERNAL - 1);
	struct nat_origin origin = {
		.inside_addr = flow->addr,
		.inside_port = flow->port,
	};
	struct nat_flow_key reverse = {
		.addr = cfg->external[pick],
		.remote_addr = flow->remote_addr,
		.remote_port = flow->remote_port,
		.proto = flow->proto,
	};

	__builtin_memcpy(origin.inside_mac, pkt->eth->h_source, ETH_ALEN);
	__builtin_memcpy(origin.local_mac, pkt->eth->h_dest, ETH_ALEN);
	for (int probe = 0; probe < NAT_PORT_PROBES; probe++) {
		struct nat_origin *owner;

		reverse.port = bpf_htons(cfg->port_min + hash % span);
		if (bpf_map_update_elem(&nat_in, &reverse, &origin, BPF_NOEXIST) == 0)
			goto claimed;
		owner = bpf_map_lookup_elem(&nat_in, &reverse);
		if (owned_by(owner, flow))
			goto claimed;
		hash = mix32(hash + 1);
	}
	return -1;

claimed:
	binding->external_addr = reverse.addr;
	binding->external_port = reverse.port;
	binding->pad = 0;
	bpf_map_update_elem(&nat_out, flow, binding, BPF_ANY);
	return 0;
}

static __always_inline int forward(const struct nat_config *cfg, __u32 side)
{
	if (cfg->inside_ifindex == cfg->outside_ifindex)
		return XDP_TX;
	/* An empty slot (ports not configured) drops rather than leak the packet. */
	return bpf_redirect_map(&nat_ports, side, XDP_DROP);
}

static __always_inline int outbound(const struct nat_config *cfg, struct packet *pkt)
{
	struct iphdr *ip = pkt->ip;
	struct nat_flow_key flow = {
		.addr = ip->saddr,
		.remote_addr = ip->daddr,
		.port = *pkt->sport,
		.remote_port = remote_port(pkt, pkt->dport),
		.proto = pkt->proto,
	};
	struct nat_binding fresh, *binding;
	int new_flow = 0;

	/* Inside hosts open ICMP "flows" with echo requests only. */
	if (pkt->proto == IPPROTO_ICMP && !is_icmp_type(pkt, ICMP_ECHO))
		return nf_count(&nat_stats, NAT_STAT_NOT_NAT, XDP_PASS);
	binding = bpf_map_lookup_elem(&nat_out, &flow);
	if (binding) {
		struct nat_flow_key reverse = {
			.addr = binding->external_addr,
			.remote_addr = flow.remote_addr,
			.port = binding->external_port,
			.remote_port = flow.remote_port,
			.proto = flow.proto,
		};
		struct nat_origin *owner = bpf_map_lookup_elem(&nat_in, &reverse);

		if (!owned_by(owner, &flow))
			binding = NULL; /* the reverse half is gone: bind again */
	} else if (!is_inside(flow.addr) || is_inside(flow.remote_addr) ||
		   is_external(cfg, flow.remote_addr) || (pkt->eth->h_dest[0] & 1)) {
		/* Only unicast frames from inside to the world beyond open a flow:
		 * not internal traffic, not hairpinning to our own external
		 * address, not frames to a group MAC (not routed through us). */
		return nf_count(&nat_stats, NAT_STAT_NOT_NAT, XDP_PASS);
	}
	if (!binding) {
		if (bind_flow(cfg, pkt, &flow, &fresh))
			return nf_count(&nat_stats, NAT_STAT_PORTS_EXHAUSTED, XDP_DROP);
		binding = &fresh;
		new_flow = 1;
	}

	rewrite(pkt, &ip->saddr, binding->external_addr, pkt->sport, binding->external_port);
	__builtin_memcpy(pkt->eth->h_source, cfg->outside_mac, ETH_ALEN);
	__builtin_memcpy(pkt->eth->h_dest, cfg->next_hop_mac, ETH_ALEN);
	if (new_flow)
		nf_bump(&nat_stats, NAT_STAT_NEW_FLOW);
	nf_bump(&nat_stats, NAT_STAT_OUTBOUND);
	return forward(cfg, NAT_SIDE_OUTSIDE);
}

static __always_inline int inbound(const struct nat_config *cfg, struct packet *pkt)
{
	struct iphdr *ip = pkt->ip;
	struct nat_flow_key reverse = {
		.addr = ip->daddr,
		.remote_addr = ip->saddr,
		.port = *pkt->dport,
		.remote_port = remote_port(pkt, pkt->sport),
		.proto = pkt->proto,
	};
	struct nat_origin *origin;

	if (pkt->proto == IPPROTO_ICMP && !is_icmp_type(pkt, ICMP_ECHOREPLY))
		return nf_count(&nat_stats, NAT_STAT_NO_MAPPING, XDP_PASS);
	origin = bpf_map_lookup_elem(&nat_in, &reverse);
	if (!origin)
		return nf_count(&nat_stats, NAT_STAT_NO_MAPPING, XDP_PASS);

	rewrite(pkt, &ip->daddr, origin->inside_addr, pkt->dport, origin->inside_port);
	__builtin_memcpy(pkt->eth->h_source, origin->local_mac, ETH_ALEN);
	__builtin_memcpy(pkt->eth->h_dest, origin->inside_mac, ETH_ALEN);
	nf_bump(&nat_stats, NAT_STAT_INBOUND);
	return forward(cfg, NAT_SIDE_INSIDE);
}

SEC("xdp")
int nat(struct xdp_md *ctx)
{
	struct packet pkt;
	struct nat_config *cfg;
	__u32 zero = 0;
	int parsed;

	parsed = parse((void *)(long)ctx->data, (void *)(long)ctx->data_end, &pkt);
	if (parsed < 0)
		return nf_count(&nat_stats, NAT_STAT_MALFORMED, XDP_DROP);
	if (parsed > 0)
		return nf_count(&nat_stats, parsed, XDP_PASS);

	cfg = bpf_map_lookup_elem(&nat_config, &zero);
	if (!cfg || cfg->external_count == 0 || cfg->external_count > NAT_MAX_EXTERNAL ||
	    cfg->port_min > cfg->port_max)
		return nf_count(&nat_stats, NAT_STAT_NOT_NAT, XDP_PASS);

	if (ctx->ingress_ifindex == cfg->outside_ifindex && is_external(cfg, pkt.ip->daddr)) {
		if (pkt.ip->ttl <= 1)
			return nf_count(&nat_stats, NAT_STAT_TTL_EXPIRED, XDP_PASS);
		return inbound(cfg, &pkt);
	}
	if (ctx->ingress_ifindex == cfg->inside_ifindex) {
		if (pkt.ip->ttl <= 1)
			return nf_count(&nat_stats, NAT_STAT_TTL_EXPIRED, XDP_PASS);
		return outbound(cfg, &pkt);
	}
	return nf_count(&nat_stats, NAT_STAT_NOT_NAT, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
