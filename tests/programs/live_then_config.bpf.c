// SPDX-License-Identifier: GPL-2.0
/* A packet that works a while, then reads a live table, then its
 * configuration, and writes both into the packet (bytes 0..3: live, 4..7:
 * cfg). A control plane that writes cfg, then live (each a generation
 * number, one higher each time) leaves the original no way to see a newer
 * live than cfg: it reads live first. Specialized code has cfg folded in,
 * as it was when its guard was checked at entry, a millisecond before it
 * reads live: a change that lands in between would show it the old cfg
 * beside the new live, unless changes wait for the packets that trusted
 * the old version to finish. `live` is written by the program (on a frame
 * no test sends), so it is never folded; `cfg` is read-only, folded. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} live SEC(".maps");

/* About a millisecond of work before the reads. */
#define WORK_STEPS 100000

static long work(__u32 index, void *state)
{
	__u32 *mix = state;

	*mix = *mix * 1103515245 + index;
	return 0;
}

SEC("xdp")
int live_then_config(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *bytes = data;
	__u32 zero = 0, mix = 0, seen_live, seen_cfg;
	__u32 *value;

	if (data + 14 > data_end)
		return XDP_PASS;
	if (bytes[12] == 0xee) { /* an ethertype no test sends */
		__u32 reset = 0;

		bpf_map_update_elem(&live, &zero, &reset, BPF_ANY);
		return XDP_DROP;
	}
	bpf_loop(WORK_STEPS, work, &mix, 0);
	value = bpf_map_lookup_elem(&live, &zero);
	if (!value)
		return XDP_ABORTED;
	seen_live = *value;
	value = bpf_map_lookup_elem(&cfg, &zero);
	if (!value)
		return XDP_ABORTED;
	seen_cfg = *value;
	__builtin_memcpy(bytes, &seen_live, 4);
	__builtin_memcpy(bytes + 4, &seen_cfg, 4);
	bytes[8] = (__u8)mix; /* the work is used */
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
