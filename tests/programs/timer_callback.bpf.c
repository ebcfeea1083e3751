// SPDX-License-Identifier: GPL-2.0
/* A bpf_timer armed once by the first packet; every packet restarts it, and
 * its callback, run later by the kernel, copies a read-only configuration
 * word into `seen`. The callback runs whatever version of the program set
 * it, long after that version may have become stale. */
#include "common.h"

#define CLOCK_MONOTONIC 1

struct timer_slot {
	struct bpf_timer timer;
	__u32 armed;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct timer_slot);
} timers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

static int on_timer(void *map, __u32 *key, struct timer_slot *slot)
{
	__u32 zero = 0;
	__u32 *word = bpf_map_lookup_elem(&config, &zero);
	__u64 *out = bpf_map_lookup_elem(&seen, &zero);

	if (out)
		*out = word ? *word : 0xdead;
	return 0;
}

SEC("xdp")
int timer_prog(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct timer_slot *slot = bpf_map_lookup_elem(&timers, &zero);

	if (!slot)
		return XDP_ABORTED;
	if (!slot->armed) {
		if (bpf_timer_init(&slot->timer, &timers, CLOCK_MONOTONIC))
			return XDP_ABORTED;
		bpf_timer_set_callback(&slot->timer, on_timer);
		slot->armed = 1;
	}
	bpf_timer_start(&slot->timer, 0, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
