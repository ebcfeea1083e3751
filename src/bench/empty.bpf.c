// SPDX-License-Identifier: GPL-2.0
// The control in the demo's measurement rotation: the fixed cost every XDP
// (or TC) program pays (dispatch, bpf_stats clock reads), subtracted to get
// the cost of the program itself ("net" ns/packet, see docs/benchmarks.md).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int empty(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("tc")
int empty_tc(struct __sk_buff *skb)
{
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
