/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A node's data plane in the style of a Polycube-like CNI: every IPv4
 * packet a pod sends (or the node receives from another node) goes through
 * a firewall, a service load balancer and a router, in that order, in one
 * XDP program attached to the node side of each pod's veth and to the
 * node's link to the other nodes. Plain libbpf C, configured through its
 * maps by tools/cni_chain.py; it knows nothing of Morpheus.
 *
 *  - firewall: `policy`, an LPM trie on (destination /32, source prefix):
 *    the most specific rule for the packet's destination pod and source
 *    decides (allow, optionally only to one protocol and port, or deny);
 *    no rule allows, as Kubernetes does for a pod no policy selects.
 *  - load balancer: `services` maps (VIP, port, protocol) to a slice of
 *    `endpoints`; the flow's hash picks one, the destination is rewritten
 *    (DNAT) and the reverse translation is remembered in `revnat` (LRU),
 *    which rewrites the endpoint's replies back to the VIP.
 *  - router: `routes`, an LPM trie on the destination, gives the egress
 *    interface and the MAC addresses; TTL and checksum are updated and the
 *    frame is redirected. What has no route goes to the kernel.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define POLICY_ALLOW 1
#define POLICY_DENY 2

struct policy_key {
	__u32 prefixlen; /* 32 (destination) + the source prefix's length */
	__u32 dst;
	__u32 src;
};
struct policy_rule {
	__u8 action;
	__u8 proto; /* 0: any protocol */
	__u16 dport; /* network order; 0: any port */
};
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct policy_key);
	__type(value, struct policy_rule);
} policy SEC(".maps");

struct service_key {
	__u32 vip;
	__u16 port; /* network order */
	__u8 proto;
	__u8 pad;
};
struct service {
	__u32 count;
	__u32 first; /* index of its first endpoint in `endpoints` */
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct service_key);
	__type(value, struct service);
} services SEC(".maps");

struct endpoint {
	__u32 ip;
	__u16 port; /* network order */
	__u16 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct endpoint);
} endpoints SEC(".maps");

/* A reply's tuple as the endpoint sends it. */
struct revnat_key {
	__u32 endpoint_ip;
	__u32 client_ip;
	__u16 endpoint_port;
	__u16 client_port;
	__u8 proto;
	__u8 pad[3];
};
struct revnat_value {
	__u32 vip;
	__u16 vport;
	__u16 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct revnat_key);
	__type(value, struct revnat_value);
} revnat SEC(".maps");

struct route_key {
	__u32 prefixlen;
	__u32 dst;
};
struct route {
	__u32 ifindex;
	__u8 smac[ETH_ALEN];
	__u8 dmac[ETH_ALEN];
};
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct route_key);
	__type(value, struct route);
} routes SEC(".maps");

/* RFC 1624 incremental update of a one's-complement checksum field for a
 * 16-bit word changing from `from` to `to` (both as stored in the packet). */
static __always_inline __u16 csum_replace16(__u16 check, __u16 from, __u16 to)
{
	__u32 sum = (__u16)~check + (__u16)~from + to;

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

static __always_inline __u16 csum_replace32(__u16 check, __u32 from, __u32 to)
{
	check = csum_replace16(check, from >> 16, to >> 16);
	return csum_replace16(check, from & 0xffff, to & 0xffff);
}

struct flow {
	struct iphdr *ip;
	__u16 *sport;
	__u16 *dport;
	__u16 *l4check; /* NULL: no L4 checksum to keep (UDP without one, ICMP) */
};

/* Rewrites one address (and port, when the flow has ports) of the packet,
 * keeping the IP and the L4 checksums (the pseudo-header holds the
 * addresses). */
static __always_inline void rewrite(struct flow *f, __u32 *addr, __u16 *port, __u32 new_addr,
				    __u16 new_port)
{
	__u32 old_addr = *addr;

	f->ip->check = csum_replace32(f->ip->check, old_addr, new_addr);
	if (f->l4check) {
		*f->l4check = csum_replace32(*f->l4check, old_addr, new_addr);
		if (port)
			*f->l4check = csum_replace16(*f->l4check, *port, new_port);
	}
	*addr = new_addr;
	if (port)
		*port = new_port;
}

static __always_inline int firewall(const struct flow *f)
{
	struct policy_key key = { .prefixlen = 64, .dst = f->ip->daddr, .src = f->ip->saddr };
	struct policy_rule *rule = bpf_map_lookup_elem(&policy, &key);

	if (!rule)
		return 1;
	if (rule->action == POLICY_DENY)
		return 0;
	if (rule->proto && rule->proto != f->ip->protocol)
		return 0;
	if (rule->dport && (!f->dport || rule->dport != *f->dport))
		return 0;
	return 1;
}

static __always_inline void load_balance(struct flow *f)
{
	if (!f->dport)
		return;
	struct service_key skey = { .vip = f->ip->daddr, .port = *f->dport, .proto = f->ip->protocol };
	struct service *svc = bpf_map_lookup_elem(&services, &skey);

	if (svc) {
		if (!svc->count)
			return;
		__u32 hash = f->ip->saddr * 2654435761u ^ ((__u32)*f->sport << 16 | *f->dport);
		__u32 index = svc->first + hash % svc->count;
		struct endpoint *ep = bpf_map_lookup_elem(&endpoints, &index);

		if (!ep)
			return;
		struct revnat_key rkey = { .endpoint_ip = ep->ip, .client_ip = f->ip->saddr,
					   .endpoint_port = ep->port, .client_port = *f->sport,
					   .proto = f->ip->protocol };
		if (!bpf_map_lookup_elem(&revnat, &rkey)) {
			struct revnat_value rval = { .vip = skey.vip, .vport = skey.port };

			bpf_map_update_elem(&revnat, &rkey, &rval, BPF_ANY);
		}
		rewrite(f, &f->ip->daddr, f->dport, ep->ip, ep->port);
		return;
	}
	struct revnat_key rkey = { .endpoint_ip = f->ip->saddr, .client_ip = f->ip->daddr,
				   .endpoint_port = *f->sport, .client_port = *f->dport,
				   .proto = f->ip->protocol };
	struct revnat_value *rev = bpf_map_lookup_elem(&revnat, &rkey);

	if (rev)
		rewrite(f, &f->ip->saddr, f->sport, rev->vip, rev->vport);
}

static __always_inline int route(struct flow *f, struct ethhdr *eth)
{
	struct route_key key = { .prefixlen = 32, .dst = f->ip->daddr };
	struct route *rt = bpf_map_lookup_elem(&routes, &key);

	if (!rt || f->ip->ttl <= 1)
		return XDP_PASS; /* the kernel answers (ICMP) or drops */
	__u16 old = *(__u16 *)&f->ip->ttl;

	f->ip->ttl--;
	f->ip->check = csum_replace16(f->ip->check, old, *(__u16 *)&f->ip->ttl);
	__builtin_memcpy(eth->h_source, rt->smac, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, rt->dmac, ETH_ALEN);
	return bpf_redirect(rt->ifindex, 0);
}

SEC("xdp")
int cni_chain(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct flow f = {};

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	f.ip = (void *)(eth + 1);
	if ((void *)(f.ip + 1) > data_end || f.ip->ihl != 5)
		return XDP_PASS;
	if (f.ip->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)(f.ip + 1);

		if ((void *)(tcp + 1) > data_end)
			return XDP_DROP;
		f.sport = &tcp->source;
		f.dport = &tcp->dest;
		f.l4check = &tcp->check;
	} else if (f.ip->protocol == IPPROTO_UDP) {
		struct udphdr *udp = (void *)(f.ip + 1);

		if ((void *)(udp + 1) > data_end)
			return XDP_DROP;
		f.sport = &udp->source;
		f.dport = &udp->dest;
		f.l4check = udp->check ? &udp->check : 0;
	}
	if (!firewall(&f))
		return XDP_DROP;
	load_balance(&f);
	return route(&f, eth);
}

/* On the pod's side of its veth: a frame redirected into a veth is only
 * received when the peer runs an XDP program. */
SEC("xdp")
int cni_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
