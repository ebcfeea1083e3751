// SPDX-License-Identifier: GPL-2.0
// A program calling a kernel function no kernel defines (as xdp-forward's
// flow table calls bpf_xdp_flow_lookup, which needs nf_flow_table loaded):
// libbpf refuses the load before the kernel sees a program, and says why
// only in its own warning, which FailureTest expects in the load's error.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern int morpheus_no_such_kfunc(struct xdp_md *ctx) __ksym;

SEC("xdp")
int calls_a_missing_kfunc(struct xdp_md *ctx)
{
	return morpheus_no_such_kfunc(ctx) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
