// SPDX-License-Identifier: GPL-2.0
/* A looked-up value handed to a global (non-static) function. The verifier
 * checks a global function on its own, taking its pointer arguments as
 * memory the function may write. */
#include "common.h"

/* The caller guarantees a non-NULL argument (kernel 6.8+). */
#define __arg_nonnull __attribute__((btf_decl_tag("arg:nonnull")))

struct verdict {
	__u32 action;
	__u32 mark;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct verdict);
} decisions SEC(".maps");

__attribute__((noinline)) int decide(const struct verdict *verdict __arg_nonnull)
{
	return verdict->action == 1 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int global_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct verdict *verdict;
	__u32 address;

	if (!ip)
		return XDP_PASS;
	address = ip->daddr;
	verdict = bpf_map_lookup_elem(&decisions, &address);
	if (!verdict)
		return XDP_PASS;
	return decide(verdict);
}

char LICENSE[] SEC("license") = "GPL";
