// SPDX-License-Identifier: GPL-2.0
/* A TC health-check responder whose whole work is gated on the skb's
 * metadata, as a load balancer's probes are marked by the host: packets
 * without the health mark pass untouched; marked probes are answered from a
 * read-only table of known probe sources (Morpheus makes it a compare
 * chain), and probes queued at the control priority are counted apart.
 * Nothing of this runs on a packet whose __sk_buff is zeroed. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define HEALTH_MARK 0x4843 /* "HC" */
#define CONTROL_PRIORITY 6

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);   /* IPv4 source of the probe */
	__type(value, __u32); /* 1: answer healthy, 0: answer unhealthy */
} probe_sources SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64); /* 0: healthy, 1: unhealthy, 2: unknown, 3: control */
} health_counters SEC(".maps");

static __always_inline void count(__u32 index)
{
	__u64 *counter = bpf_map_lookup_elem(&health_counters, &index);

	if (counter)
		*counter += 1;
}

SEC("tc")
int health_check(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u32 source, *healthy;

	if (skb->mark != HEALTH_MARK)
		return TC_ACT_OK;
	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_SHOT;
	if (skb->priority == CONTROL_PRIORITY)
		count(3);
	source = ip->saddr;
	healthy = bpf_map_lookup_elem(&probe_sources, &source);
	if (!healthy) {
		count(2);
		return TC_ACT_SHOT;
	}
	count(*healthy ? 0 : 1);
	ip->tos = *healthy ? 0 : 4; /* the answer travels in the probe */
	return *healthy ? TC_ACT_OK : TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
