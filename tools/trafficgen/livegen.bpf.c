// SPDX-License-Identifier: GPL-2.0
/*
 * livegen: the packet generator run by LiveFramesGenerator through
 * BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES. Each run turns the frame it
 * is handed into the next flow of a round-robin over the `flows` table and
 * transmits it with XDP_TX out of the interface named as ingress.
 *
 *   config  ARRAY[1]          MACs and the number of flows in use
 *   flows   ARRAY[MAX_FLOWS]  the 5-tuples to cycle through
 *   cursor  ARRAY[1]          index of the next flow
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "checksum.bpf.h"
#include "livegen.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct livegen_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LIVEGEN_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct livegen_flow);
} flows SEC(".maps");

/*
 * Shared rather than per-CPU so the flows stay evenly interleaved when the
 * sending thread migrates between batches. Concurrent senders race on it,
 * which only skews the mix.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cursor SEC(".maps");

SEC("xdp")
int livegen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *tcp = (void *)(ip + 1);
	struct udphdr *udp = (void *)(ip + 1);
	__u32 zero = 0;

	if ((void *)(tcp + 1) > data_end)
		return XDP_ABORTED;

	struct livegen_config *cfg = bpf_map_lookup_elem(&config, &zero);
	__u32 *next = bpf_map_lookup_elem(&cursor, &zero);
	if (!cfg || !next)
		return XDP_ABORTED;
	__u32 index = *next;
	if (index >= cfg->nflows)
		index = 0;
	*next = index + 1;
	struct livegen_flow *flow = bpf_map_lookup_elem(&flows, &index);
	if (!flow)
		return XDP_ABORTED;

	/*
	 * The kernel copies the initial frame only into freshly allocated pages;
	 * recycled pages still hold what an earlier run wrote, possibly for the
	 * other protocol. So every header byte is written, nothing is patched.
	 */
	__builtin_memcpy(eth->h_dest, cfg->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->src_mac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);

	int is_tcp = flow->proto == IPPROTO_TCP;
	__u16 l4_len = is_tcp ? sizeof(*tcp) : sizeof(*udp);

	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0;
	ip->tot_len = bpf_htons(sizeof(*ip) + l4_len);
	ip->id = 0;
	ip->frag_off = 0;
	ip->ttl = 64;
	ip->protocol = flow->proto;
	ip->check = 0;
	ip->saddr = flow->saddr;
	ip->daddr = flow->daddr;
	ip->check = (__u16)~fold(sum16(ip, sizeof(*ip) / 2));

	/* Pseudo header: the addresses as stored, then protocol and length. */
	__u32 pseudo = sum16(&ip->saddr, 4) + bpf_htons(flow->proto) +
		       bpf_htons(l4_len);

	if (is_tcp) {
		tcp->source = flow->sport;
		tcp->dest = flow->dport;
		tcp->seq = 0;
		tcp->ack_seq = 0;
		/* data offset 5 words, SYN, window 65535 */
		tcp_flag_word(tcp) = bpf_htonl(0x5002ffff);
		tcp->check = 0;
		tcp->urg_ptr = 0;
		tcp->check = (__u16)~fold(pseudo + sum16(tcp, sizeof(*tcp) / 2));
	} else {
		udp->source = flow->sport;
		udp->dest = flow->dport;
		udp->len = bpf_htons(sizeof(*udp));
		udp->check = 0;
		__u16 check = (__u16)~fold(pseudo + sum16(udp, sizeof(*udp) / 2));
		/* 0 would mean "no checksum" */
		udp->check = check ? check : 0xffff;
	}
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
