// SPDX-License-Identifier: GPL-2.0
/*
 * nat, for Morpheus's user-space data plane (backend/user): the source NAT
 * of ../nat.bpf.c in plain C against the table API of morpheus_user.h, with
 * the same table layouts (../nat.h), the same parse, flow hash and rewrite
 * (../nat_packet.h: one copy, compiled for BPF there and for the host
 * here) and the same outcomes. Read the header of
 * ../nat.bpf.c for the design: a flow from an inside prefix to the world
 * gets an external address (a hash of its inside address) and port (the
 * first free of up to NAT_PORT_PROBES candidates hashed from its 5-tuple)
 * the first time it is seen, the handler writing both halves of the
 * binding; its packets are rewritten (source address and port, TTL - 1,
 * checksums updated incrementally, MACs) and sent out of the outside port;
 * replies to an external address and port are rewritten back and sent out
 * of the inside port.
 *
 *   truncated, inconsistent lengths, bad IPv4 checksum ─ DROP (no state)
 *   not IPv4, IP options, fragments, TTL <= 1, other protocols,
 *   no configuration, no translation ─ PASS (counted by reason)
 *   every candidate port owned by other flows, or the tables full ─ DROP
 *   translated ─ TX out of the other side's port
 *
 * Differences from the kernel version, all of the user tables' making:
 *   - ports are the user data plane's port numbers: nat_config's
 *     inside_ifindex and outside_ifindex hold them (cli/UserNat.h fills
 *     them from the configuration's port names), and MU_TX sets the port
 *     (no DEVMAP: nat_ports does not exist here);
 *   - the binding tables are exact-match hashes (MU_HASH), not LRU:
 *     nothing is evicted, a binding lives until the control plane removes
 *     it, and a new flow finding them full is dropped as ports-exhausted;
 *   - a port is claimed by a lookup then an insert, not an atomic
 *     BPF_NOEXIST insert: the user data plane runs one handler on one
 *     thread, control-plane changes between bursts.
 *
 * NAT_LPM picks the inside prefixes' implementation: MU_LPM_DIR24
 * (default), MU_LPM_LINEAR or MU_LPM_RTE (DPDK's rte_lpm); NAT_HASH the
 * binding tables': MU_HASH (default) or MU_HASH_RTE (DPDK's rte_hash).
 *
 *   nat_config  ARRAY[1]  ports, port range, external pool, MACs  (read only)
 *   nat_inside  LPM       inside prefixes (new flows only)        (read only)
 *   nat_out     HASH      inside flow -> external address, port
 *                                                   (written per new flow)
 *   nat_in      HASH      external flow -> inside address, port, MACs
 *                                                   (written per new flow)
 *   nat_stats   ARRAY     one counter per outcome   (written per packet)
 *
 * nat_prefetch (MU_PREFETCH) prefetches a packet's binding, for the
 * runtime's sub-batches.
 */
#include <morpheus_user.h>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <string.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#include "../nat.h"
#include "../nat_packet.h"

#ifndef NAT_LPM
#define NAT_LPM MU_LPM_DIR24
#endif
#ifndef NAT_HASH
#define NAT_HASH MU_HASH
#endif
#ifndef NAT_MAX_FLOWS
#define NAT_MAX_FLOWS 65536
#endif
#ifndef NAT_MAX_PREFIXES
#define NAT_MAX_PREFIXES 256
#endif

MU_TABLE(nat_config, MU_ARRAY, __u32, struct nat_config, 1);
MU_TABLE(nat_inside, NAT_LPM, struct nat_prefix_key, __u32, NAT_MAX_PREFIXES);
MU_TABLE(nat_out, NAT_HASH, struct nat_flow_key, struct nat_binding, NAT_MAX_FLOWS);
MU_TABLE(nat_in, NAT_HASH, struct nat_flow_key, struct nat_origin, NAT_MAX_FLOWS);
MU_TABLE(nat_stats, MU_ARRAY, __u32, __u64, NAT_STAT_MAX);

static __always_inline int count(__u32 stat, int verdict)
{
	__u64 *counter = mu_lookup(&nat_stats, &stat);

	if (counter)
		*counter += 1;
	return verdict;
}

static __always_inline int is_inside(__be32 addr)
{
	struct nat_prefix_key key = { .prefixlen = 32, .addr = addr };

	return mu_lookup(&nat_inside, &key) != 0;
}

/* Gives the inside flow an external address and port: the first candidate
 * port no other flow owns in nat_in (claimed there, or found already its
 * own), then the binding recorded in nat_out. 0, or -1 when every
 * candidate is owned by others or nat_in is full. */
static __always_inline int bind_flow(const struct nat_config *cfg, const struct packet *pkt,
				     const struct nat_flow_key *flow, struct nat_binding *binding)
{
	__u32 span = (__u32)cfg->port_max - cfg->port_min + 1;
	__u32 hash = flow_hash(flow);
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

	memcpy(origin.inside_mac, pkt->eth->h_source, ETH_ALEN);
	memcpy(origin.local_mac, pkt->eth->h_dest, ETH_ALEN);
	for (int probe = 0; probe < NAT_PORT_PROBES; probe++) {
		const struct nat_origin *owner;

		reverse.port = htons(cfg->port_min + hash % span);
		owner = mu_lookup(&nat_in, &reverse);
		if (!owner) {
			if (mu_update(&nat_in, &reverse, &origin) != 0)
				return -1; /* full */
			goto claimed;
		}
		if (owned_by(owner, flow))
			goto claimed;
		hash = mix32(hash + 1);
	}
	return -1;

claimed:
	binding->external_addr = reverse.addr;
	binding->external_port = reverse.port;
	binding->pad = 0;
	/* A full nat_out only costs the next packet a probe: it finds its
	 * own nat_in half and adopts it. */
	mu_update(&nat_out, flow, binding);
	return 0;
}

static __always_inline int outbound(const struct nat_config *cfg, struct mu_packet *packet,
				    struct packet *pkt)
{
	struct iphdr *ip = pkt->ip;
	struct nat_flow_key flow = {
		.addr = ip->saddr,
		.remote_addr = ip->daddr,
		.port = *pkt->sport,
		.remote_port = remote_port(pkt, pkt->dport),
		.proto = pkt->proto,
	};
	struct nat_binding fresh;
	const struct nat_binding *binding;
	int new_flow = 0;

	/* Inside hosts open ICMP "flows" with echo requests only. */
	if (pkt->proto == IPPROTO_ICMP && !is_icmp_type(pkt, ICMP_ECHO))
		return count(NAT_STAT_NOT_NAT, MU_PASS);
	binding = mu_lookup(&nat_out, &flow);
	if (binding) {
		struct nat_flow_key reverse = {
			.addr = binding->external_addr,
			.remote_addr = flow.remote_addr,
			.port = binding->external_port,
			.remote_port = flow.remote_port,
			.proto = flow.proto,
		};
		const struct nat_origin *owner = mu_lookup(&nat_in, &reverse);

		if (!owned_by(owner, &flow))
			binding = 0; /* the reverse half is gone: bind again */
	} else if (!is_inside(flow.addr) || is_inside(flow.remote_addr) ||
		   is_external(cfg, flow.remote_addr) || (pkt->eth->h_dest[0] & 1)) {
		/* Only unicast frames from inside to the world beyond open a
		 * flow: not internal traffic, not hairpinning to our own
		 * external address, not frames to a group MAC. */
		return count(NAT_STAT_NOT_NAT, MU_PASS);
	}
	if (!binding) {
		if (bind_flow(cfg, pkt, &flow, &fresh))
			return count(NAT_STAT_PORTS_EXHAUSTED, MU_DROP);
		binding = &fresh;
		new_flow = 1;
	}

	rewrite(pkt, &ip->saddr, binding->external_addr, pkt->sport, binding->external_port);
	memcpy(pkt->eth->h_source, cfg->outside_mac, ETH_ALEN);
	memcpy(pkt->eth->h_dest, cfg->next_hop_mac, ETH_ALEN);
	if (new_flow)
		count(NAT_STAT_NEW_FLOW, 0);
	packet->port = cfg->outside_ifindex;
	return count(NAT_STAT_OUTBOUND, MU_TX);
}

static __always_inline int inbound(const struct nat_config *cfg, struct mu_packet *packet,
				   struct packet *pkt)
{
	struct iphdr *ip = pkt->ip;
	struct nat_flow_key reverse = {
		.addr = ip->daddr,
		.remote_addr = ip->saddr,
		.port = *pkt->dport,
		.remote_port = remote_port(pkt, pkt->sport),
		.proto = pkt->proto,
	};
	const struct nat_origin *origin;

	if (pkt->proto == IPPROTO_ICMP && !is_icmp_type(pkt, ICMP_ECHOREPLY))
		return count(NAT_STAT_NO_MAPPING, MU_PASS);
	origin = mu_lookup(&nat_in, &reverse);
	if (!origin)
		return count(NAT_STAT_NO_MAPPING, MU_PASS);

	rewrite(pkt, &ip->daddr, origin->inside_addr, pkt->dport, origin->inside_port);
	memcpy(pkt->eth->h_source, origin->local_mac, ETH_ALEN);
	memcpy(pkt->eth->h_dest, origin->inside_mac, ETH_ALEN);
	packet->port = cfg->inside_ifindex;
	return count(NAT_STAT_INBOUND, MU_TX);
}

/* The binding lookup's entry for the next packets of a sub-batch (the
 * runtime's prefetching): an outbound packet's nat_out key, after only the
 * checks that make its fields valid to read. The reverse half's key needs
 * the binding, so it is not prefetched. */
MU_PREFETCH void nat_prefetch(const struct mu_packet *packet)
{
	const struct ethhdr *eth = (const struct ethhdr *)packet->data;
	const struct iphdr *ip = (const struct iphdr *)(eth + 1);
	const __be16 *l4 = (const __be16 *)(ip + 1); /* ports, or ICMP type ... id */
	struct nat_flow_key flow = {};

	if (packet->len < sizeof(*eth) + sizeof(*ip) + 8 || eth->h_proto != htons(ETH_P_IP) ||
	    ip->ihl != 5)
		return;
	flow.addr = ip->saddr;
	flow.remote_addr = ip->daddr;
	flow.proto = ip->protocol;
	if (ip->protocol == IPPROTO_ICMP) {
		flow.port = l4[2];
	} else {
		flow.port = l4[0];
		flow.remote_port = l4[1];
	}
	mu_prefetch(&nat_out, &flow);
}

MU_HANDLER int nat(struct mu_packet *packet)
{
	struct packet pkt;
	const struct nat_config *cfg;
	__u32 zero = 0;
	int parsed;

	parsed = parse(packet->data, packet->data + packet->len, &pkt);
	if (parsed < 0)
		return count(NAT_STAT_MALFORMED, MU_DROP);
	if (parsed > 0)
		return count(parsed, MU_PASS);

	cfg = mu_lookup(&nat_config, &zero);
	if (!cfg || cfg->external_count == 0 || cfg->external_count > NAT_MAX_EXTERNAL ||
	    cfg->port_min > cfg->port_max)
		return count(NAT_STAT_NOT_NAT, MU_PASS);

	if (packet->port == cfg->outside_ifindex && is_external(cfg, pkt.ip->daddr)) {
		if (pkt.ip->ttl <= 1)
			return count(NAT_STAT_TTL_EXPIRED, MU_PASS);
		return inbound(cfg, packet, &pkt);
	}
	if (packet->port == cfg->inside_ifindex) {
		if (pkt.ip->ttl <= 1)
			return count(NAT_STAT_TTL_EXPIRED, MU_PASS);
		return outbound(cfg, packet, &pkt);
	}
	return count(NAT_STAT_NOT_NAT, MU_PASS);
}
