// SPDX-License-Identifier: GPL-2.0
// One function of over 32K instructions that makes a tail call: its
// guarded version holds a specialized copy and the generic one in the
// program, so the guard's jump to the generic copy spans more than the
// 16-bit offsets of cpus before v4 (LLVM: "Branch target out of insn
// range"). Morpheus then generates the version for cpu v4 (gotol) and keeps
// the original's arithmetic: a packet-sized shift (undefined in IR past 31)
// must answer as the original's cpu computes it. Built with -mcpu=v2 (no
// ALU32) by the corpus test.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct settings {
	__u32 verdict;
	__u32 mix;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct settings);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} next_stage SEC(".maps");

SEC("xdp")
int long_body(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = 0;

	if (data + 16 > data_end)
		return XDP_PASS;
	struct settings *s = bpf_map_lookup_elem(&config, &key);
	if (!s)
		return XDP_ABORTED;
	__u64 h = *(__u64 *)data;
	__u32 shift = ((__u8 *)data)[8];
	/* Packet-dependent work the configuration cannot fold: one long
	 * straight run of instructions. */
#pragma clang loop unroll(full)
	for (int i = 0; i < 3500; i++) {
		h ^= h << 13;
		h ^= h >> 7;
		h += i;
	}
	__u32 low = (__u32)h << (shift & 63); /* undefined in IR past 31 */
	if (low & s->mix)
		bpf_tail_call(ctx, &next_stage, 0);
	return (h & 1) ? s->verdict : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
