/* A load balancer's connection tracking as production balancers keep it:
 * one LRU table per CPU in an array of maps, and a global LRU table used
 * when the CPU's slot is empty. The flow lookup and the insert therefore
 * take a table operand that merges an inner map with a global map (a phi
 * after clang -O2). The VIP table and the backend array beside it are
 * configuration, only ever read: they must stay read-only and be folded
 * however the connection table's operand is formed. */
#include "common.h"
#include <linux/in.h>
#include <linux/udp.h>

struct flow_key {
	__u32 saddr, daddr;
	__u16 sport, dport;
	__u8 proto, pad[3];
};

struct connection {
	__u32 backend;
	__u32 packets;
};

struct conn_table {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 256);
	__type(key, struct flow_key);
	__type(value, struct connection);
};

struct conn_table conn_cpu0 SEC(".maps");
struct conn_table conn_fallback SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct conn_table);
} conn_per_cpu SEC(".maps") = {
	.values = { [0] = &conn_cpu0 },
};

struct vip_key {
	__u32 daddr; /* network order */
	__u16 dport; /* network order */
	__u8 proto, pad;
};

struct vip {
	__u32 first_backend;
	__u32 backends; /* 0: the VIP drops */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct vip_key);
	__type(value, struct vip);
} vips SEC(".maps");

struct backend {
	__u8 mac[6];
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

SEC("xdp")
int conn_fallback_lb(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = ipv4_header(ctx);
	struct flow_key flow = {};
	struct vip_key vk = {};
	struct connection *conn, fresh = {};
	struct backend *backend;
	struct udphdr *ports;
	struct vip *vip;
	struct ethhdr *eth;
	void *table;
	__u32 cpu;

	if (!ip || ip->ihl != 5 ||
	    (ip->protocol != IPPROTO_UDP && ip->protocol != IPPROTO_TCP))
		return XDP_PASS;
	ports = (void *)(ip + 1);
	if ((void *)(ports + 1) > data_end)
		return XDP_PASS;
	vk.daddr = ip->daddr;
	vk.dport = ports->dest;
	vk.proto = ip->protocol;
	vip = bpf_map_lookup_elem(&vips, &vk);
	if (!vip)
		return XDP_PASS;
	if (!vip->backends)
		return XDP_DROP;

	flow.saddr = ip->saddr;
	flow.daddr = ip->daddr;
	flow.sport = ports->source;
	flow.dport = ports->dest;
	flow.proto = ip->protocol;
	cpu = bpf_get_smp_processor_id();
	table = bpf_map_lookup_elem(&conn_per_cpu, &cpu);
	if (!table)
		table = &conn_fallback;
	conn = bpf_map_lookup_elem(table, &flow);
	if (conn) {
		conn->packets++;
	} else {
		fresh.backend = vip->first_backend +
				(bpf_ntohs(flow.sport) ^ flow.saddr) % vip->backends;
		fresh.packets = 1;
		bpf_map_update_elem(table, &flow, &fresh, BPF_ANY);
		conn = &fresh;
	}
	backend = bpf_map_lookup_elem(&backends, &conn->backend);
	if (!backend)
		return XDP_DROP;
	eth = (void *)(long)ctx->data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__builtin_memcpy(eth->h_dest, backend->mac, sizeof(eth->h_dest));
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
