// SPDX-License-Identifier: GPL-2.0
/* A TC classifier as operators write them: SEC("tc"), an __sk_buff, a
 * configuration array (mode, the mark to set), a blocklist of sources, and
 * per-CPU counters. Verdicts are TC_ACT_OK / TC_ACT_SHOT; the packet's DSCP
 * is rewritten through direct packet access and the skb's mark set. The
 * configuration and the blocklist are read-only to the program (Morpheus
 * folds them); the counters are written. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct tc_config {
	__u32 mode; /* 0: pass everything, 1: drop blocked sources, 2: mark them */
	__u32 mark;
	__u8 dscp;  /* rewritten into every IPv4 packet when non-zero */
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tc_config);
} tc_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);   /* IPv4 source */
	__type(value, __u32); /* reason */
} blocked_sources SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} tc_counters SEC(".maps");

static __always_inline void count(__u32 index)
{
	__u64 *counter = bpf_map_lookup_elem(&tc_counters, &index);

	if (counter)
		*counter += 1;
}

SEC("tc")
int tc_classify(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u32 zero = 0, source;
	struct tc_config *config;
	__u32 *reason;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP)) {
		count(0);
		return TC_ACT_OK;
	}
	config = bpf_map_lookup_elem(&tc_config, &zero);
	if (!config || config->mode == 0) {
		count(1);
		return TC_ACT_OK;
	}
	if (config->dscp)
		ip->tos = (config->dscp << 2) | (ip->tos & 3);
	source = ip->saddr;
	reason = bpf_map_lookup_elem(&blocked_sources, &source);
	if (!reason) {
		count(1);
		return TC_ACT_OK;
	}
	count(2 + (config->mode == 1));
	if (config->mode == 1)
		return TC_ACT_SHOT;
	skb->mark = config->mark + *reason;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
