// SPDX-License-Identifier: GPL-2.0
/* A stateful L4 load balancer in the style of production ones (Katran's
 * shape, written anew): a VIP table whose values hold configuration beside
 * a packet counter, a consistent-hashing ring per VIP, a 1,024-slot backend
 * array mostly empty, per-CPU connection tables behind a map of maps (the
 * data plane inserts flows), QUIC connection-id routing (the server id in
 * the connection id picks the backend), and globals its loader sets. */
#include "common.h"
#include <linux/in.h>
#include <linux/udp.h>

#define RING_SIZE 16
#define MAX_VIPS 8
#define MAX_BACKENDS 1024
#define QUIC_PORT 443

struct vip_key {
	__u32 daddr;
	__u16 dport;
	__u8 proto;
	__u8 pad;
};

struct vip_meta {
	__u32 flags;   /* VIP_* below: configuration */
	__u32 vip_num; /* the VIP's ring */
	__u64 packets; /* counted by the data plane */
};

#define VIP_NO_PORT_HASH 1
#define VIP_QUIC 2

struct backend {
	__u32 daddr;
	__u32 weight;
};

struct flow_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_VIPS);
	__type(key, struct vip_key);
	__type(value, struct vip_meta);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_VIPS * RING_SIZE);
	__type(key, __u32);
	__type(value, __u32);
} rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

/* QUIC: the server id a backend writes into its connection ids. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} server_ids SEC(".maps");

struct conn_table {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct flow_key);
	__type(value, __u32);
};

struct conn_table conns_0 SEC(".maps");
struct conn_table conns_1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct conn_table);
} conn_tables SEC(".maps") = {
	.values = { [0] = &conns_0, [1] = &conns_1 },
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} lb_stats SEC(".maps");

__u32 quic_enabled;          /* .bss, set by the loader */
__u32 conn_table_slot;       /* .bss, which connection table is live */
__u64 lb_packets;            /* .bss, counted */
const volatile __u32 hash_seed = 0x9e3779b9; /* .rodata */

static __always_inline __u32 flow_hash(const struct flow_key *flow, int with_ports)
{
	__u32 h = hash_seed ^ flow->saddr;

	h = h * 31 + flow->daddr;
	if (with_ports)
		h = h * 31 + ((__u32)flow->sport << 16 | flow->dport);
	return h ^ (h >> 16);
}

static __always_inline void count(__u32 what)
{
	__u64 *counter = bpf_map_lookup_elem(&lb_stats, &what);

	if (counter)
		*counter += 1;
}

static __always_inline int forward(struct iphdr *ip, __u32 index)
{
	struct backend *backend = bpf_map_lookup_elem(&backends, &index);

	if (!backend || !backend->daddr) {
		count(2);
		return XDP_DROP;
	}
	ip->daddr = backend->daddr;
	count(1);
	return XDP_TX;
}

SEC("xdp")
int l4lb_prog(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = ipv4_header(ctx);
	struct flow_key flow = {};
	struct vip_key vip = {};
	struct vip_meta *meta;
	struct udphdr *udp;
	__u32 slot, *ring, *found, index, position;
	void *conns;

	__sync_fetch_and_add(&lb_packets, 1);
	if (!ip || ip->ihl != 5 || (ip->protocol != IPPROTO_UDP && ip->protocol != IPPROTO_TCP))
		return XDP_PASS;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return XDP_PASS;
	vip.daddr = ip->daddr;
	vip.dport = udp->dest;
	vip.proto = ip->protocol;
	meta = bpf_map_lookup_elem(&vips, &vip);
	if (!meta) {
		count(0);
		return XDP_PASS;
	}
	__sync_fetch_and_add(&meta->packets, 1);

	/* QUIC: a short-header packet names its server in its connection id. */
	if (quic_enabled && (meta->flags & VIP_QUIC) && ip->protocol == IPPROTO_UDP &&
	    udp->dest == bpf_htons(QUIC_PORT)) {
		__u8 *quic = (void *)(udp + 1);

		if ((void *)(quic + 2) <= data_end && !(quic[0] & 0x80)) {
			__u32 server = quic[1];

			found = bpf_map_lookup_elem(&server_ids, &server);
			if (found && *found)
				return forward(ip, *found);
		}
	}

	flow.saddr = ip->saddr;
	flow.daddr = ip->daddr;
	flow.proto = ip->protocol;
	if (!(meta->flags & VIP_NO_PORT_HASH)) {
		flow.sport = udp->source;
		flow.dport = udp->dest;
	}
	slot = conn_table_slot;
	conns = bpf_map_lookup_elem(&conn_tables, &slot);
	if (conns) {
		found = bpf_map_lookup_elem(conns, &flow);
		if (found)
			return forward(ip, *found);
	}
	position = meta->vip_num * RING_SIZE +
		   flow_hash(&flow, !(meta->flags & VIP_NO_PORT_HASH)) % RING_SIZE;
	ring = bpf_map_lookup_elem(&rings, &position);
	if (!ring)
		return XDP_DROP;
	index = *ring;
	if (conns)
		bpf_map_update_elem(conns, &flow, &index, BPF_ANY);
	return forward(ip, index);
}

char LICENSE[] SEC("license") = "GPL";
