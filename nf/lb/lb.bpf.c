// SPDX-License-Identifier: GPL-2.0
/*
 * lb: an XDP layer-4 load balancer for IPv4 TCP and UDP services.
 *
 * A packet whose (destination address, port, protocol) is a configured VIP
 * is sent, unchanged, inside an outer IPv4 header to one of the VIP's real
 * servers, which answer clients directly (direct server return). The real
 * is chosen so that every packet of a flow reaches the same one:
 *
 *   1. QUIC VIPs: a connection id the server chose names the real itself,
 *      so a connection survives client address changes (lb_quic.h).
 *   2. The flow table: a flow seen before keeps its real, even after the
 *      control plane rebuilt the VIP's ring with other reals.
 *   3. The VIP's Maglev ring: a hash of the 5-tuple picks one of
 *      LB_RING_SIZE slots, each naming a real; the control plane fills the
 *      ring so reals get even shares and a change of the real set moves
 *      few slots. The choice is then remembered in the flow table.
 *
 * The encapsulated packet goes back out of the interface it came in on
 * (XDP_TX) toward the configured gateway MAC (lb_encap.h).
 *
 *   config     ARRAY[1]                  outer source, gateway, TTL, GUE port
 *   vips       HASH                      (addr, port, proto) -> flags, index
 *   rings      ARRAY[VIPS * RING_SIZE]   vip index * RING_SIZE + slot -> real
 *   reals      ARRAY[REALS]              real index -> address, flags
 *   flows      LRU_HASH      (written)   5-tuple -> real, last seen
 *   vip_stats  PERCPU_ARRAY  (written)   per-VIP packets and bytes
 *   events     PERCPU_ARRAY  (written)   per-event counters (enum lb_event)
 *
 * Odd cases: non-IPv4 frames (IPv6, ARP, VLAN-tagged), IPv4 protocols
 * other than TCP and UDP, and IPv4 fragments are passed to the stack: none
 * can be matched to a VIP port (fragments after the first carry no ports,
 * so no fragment is balanced). Malformed IPv4 (truncated headers, bad
 * version or IHL, a total length the frame does not hold) is dropped.
 * IP options are carried along inside the tunnel.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lb.h"
#include "../common/counters.bpf.h"
#include "../common/ipv4.bpf.h"
#include "lb_encap.h"
#include "lb_quic.h"

#define IPV4_FRAGMENT 0x3fff /* MF or a non-zero offset */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lb_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_MAX_VIPS);
	__type(key, struct lb_vip_key);
	__type(value, struct lb_vip);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LB_MAX_VIPS * LB_RING_SIZE);
	__type(key, __u32);
	__type(value, __u32);
} rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LB_MAX_REALS);
	__type(key, __u32);
	__type(value, struct lb_real);
} reals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_FLOW_ENTRIES);
	__type(key, struct lb_flow_key);
	__type(value, struct lb_flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LB_MAX_VIPS);
	__type(key, __u32);
	__type(value, struct lb_vip_counters);
} vip_stats SEC(".maps");

NF_COUNTERS(events, LB_EV_MAX);

static __always_inline const struct lb_real *active_real(__u32 index)
{
	const struct lb_real *real;

	if (index == LB_NO_REAL)
		return NULL;
	real = bpf_map_lookup_elem(&reals, &index);
	return real && (real->flags & LB_REAL_ACTIVE) ? real : NULL;
}

/* The flow's remembered real, or a new pick from the ring (remembered). */
static __always_inline const struct lb_real *flow_real(const struct lb_vip *vip,
							const struct lb_flow_key *key,
							__u32 hash)
{
	__u64 now = bpf_ktime_get_coarse_ns();
	struct lb_flow *known = bpf_map_lookup_elem(&flows, key);
	struct lb_flow fresh = {};
	const struct lb_real *real;
	__u32 slot;
	__u32 *index;

	if (known) {
		/* A real removed since keeps no flows: they move to the ring. */
		real = active_real(known->real);
		if (real) {
			known->last_seen_ns = now;
			nf_bump(&events, LB_EV_FLOW_HIT);
			return real;
		}
	}
	slot = vip->index * LB_RING_SIZE + hash % LB_RING_SIZE;
	index = bpf_map_lookup_elem(&rings, &slot);
	if (!index)
		return NULL;
	real = active_real(*index);
	if (!real)
		return NULL;
	fresh.real = *index;
	fresh.last_seen_ns = now;
	bpf_map_update_elem(&flows, key, &fresh, BPF_ANY);
	nf_bump(&events, LB_EV_FLOW_NEW);
	return real;
}

SEC("xdp")
int lb_balance(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	const struct lb_real *real = NULL;
	struct lb_vip_counters *counters;
	struct lb_flow_key flow = {};
	struct lb_vip_key vkey = {};
	struct encap_inner inner;
	const struct lb_config *cfg;
	const struct lb_vip *vip;
	struct udphdr *ports; /* TCP starts with the same two ports */
	struct iphdr *ip;
	__u32 ip_len, l4_len, zero = 0;
	__u16 total;

	if ((void *)(eth + 1) > data_end)
		return nf_count(&events, LB_EV_MALFORMED, XDP_DROP);
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->version != 4 || ip->ihl < 5)
		return nf_count(&events, LB_EV_MALFORMED, XDP_DROP);
	ip_len = ip->ihl * 4;
	total = bpf_ntohs(ip->tot_len);
	if (total < ip_len || (void *)ip + total > data_end)
		return nf_count(&events, LB_EV_MALFORMED, XDP_DROP);
	if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	if (ip->frag_off & bpf_htons(IPV4_FRAGMENT))
		return nf_count(&events, LB_EV_FRAGMENT, XDP_PASS);

	ports = (void *)ip + ip_len;
	if (ip->protocol == IPPROTO_TCP) {
		l4_len = sizeof(struct tcphdr);
		if ((void *)ports + sizeof(struct tcphdr) > data_end)
			return nf_count(&events, LB_EV_MALFORMED, XDP_DROP);
	} else {
		l4_len = sizeof(struct udphdr);
		if ((void *)(ports + 1) > data_end)
			return nf_count(&events, LB_EV_MALFORMED, XDP_DROP);
	}
	if (ip_len + l4_len > total)
		return nf_count(&events, LB_EV_MALFORMED, XDP_DROP);

	vkey.addr = ip->daddr;
	vkey.port = ports->dest;
	vkey.proto = ip->protocol;
	vip = bpf_map_lookup_elem(&vips, &vkey);
	if (!vip)
		return XDP_PASS;

	counters = bpf_map_lookup_elem(&vip_stats, &vip->index);
	if (counters) {
		counters->packets += 1;
		counters->bytes += data_end - data;
	}
	cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return XDP_PASS;

	flow.saddr = ip->saddr;
	flow.daddr = ip->daddr;
	flow.sport = ports->source;
	flow.dport = ports->dest;
	flow.proto = ip->protocol;
	inner.hash = lb_flow_hash(&flow);

	if (vip->flags & LB_VIP_QUIC) {
		__u32 udp_length = bpf_ntohs(ports->len);
		__u32 payload_length = udp_length > sizeof(*ports) ? udp_length - sizeof(*ports) : 0;

		real = active_real(quic_real_from_cid((const __u8 *)(ports + 1), payload_length,
						      data_end));
		nf_bump(&events, real ? LB_EV_QUIC_CID : LB_EV_QUIC_HASHED);
	}
	if (!real)
		real = flow_real(vip, &flow, inner.hash);
	if (!real)
		return nf_count(&events, LB_EV_NO_REAL, XDP_DROP);

	__builtin_memcpy(inner.our_mac, eth->h_dest, ETH_ALEN);
	inner.client = ip->saddr;
	inner.length = total;
	inner.tos = ip->tos;
	inner.df = ip->frag_off & bpf_htons(IPV4_DF);
	if (encapsulate(ctx, cfg, real, &inner))
		return nf_count(&events, LB_EV_ENCAP_FAILED, XDP_DROP);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
