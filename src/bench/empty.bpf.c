// SPDX-License-Identifier: GPL-2.0
// The control in the demo's measurement rotation: the fixed cost every XDP
// (or TC) program pays (dispatch, bpf_stats clock reads), subtracted to get
// the cost of the program itself ("net" ns/packet, see docs/benchmarks.md);
// and `pass`, which lets live frames through to a TC program.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int empty(struct xdp_md *ctx)
{
	return XDP_DROP;
}

/* The live method for TC programs: on the receiving veth's XDP hook. A veth
 * takes the frames its peer transmits by XDP only when it runs an XDP
 * program or has GRO on (else it drops them), and GRO could merge packets;
 * this program hands each frame on as an skb of its own, which then passes
 * through the tcx ingress hook the program under test is on.
 * It is not timed: bpf_stats are read of the TC program alone. */
SEC("xdp")
int pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("tc")
int empty_tc(struct __sk_buff *skb)
{
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
