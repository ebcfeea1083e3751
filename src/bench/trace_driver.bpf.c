// SPDX-License-Identifier: GPL-2.0
/*
 * The trace driver: BPF_PROG_TEST_RUN runs this program with `repeat` large
 * and one template frame. Every run overwrites the frame with the next
 * packet of a trace (frames[sequence[cursor]]) and tail-calls the program
 * under test in slot 0 of `target`, whose verdict becomes the run's. The
 * kernel does not reset the frame between repetitions, so the whole frame
 * is rewritten every time: programs that rewrite headers (TTL, MACs, NAT)
 * see a fresh packet each run. A program that grows or shrinks the frame at
 * its head (encapsulation) has the old length restored first, which costs
 * a helper call that only such programs pay.
 *
 * Its own cost (two array reads, a 64-128 byte copy) is the same for every
 * program it drives, so the benchmark subtracts it by driving an empty
 * program in the same rotation.
 *
 * trace_sender writes the same packets for the live method: run with
 * BPF_F_TEST_XDP_LIVE_FRAMES it transmits them out of a veth whose peer
 * runs the program under test as it runs in production.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "trace_driver.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRACE_FRAMES_MAX);
	__type(key, __u32);
	__type(value, struct trace_frame);
} frames SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRACE_PACKETS_MAX);
	__type(key, __u32);
	__type(value, __u32); /* index into frames */
} sequence SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct trace_state);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} target SEC(".maps");

/* Overwrites the frame with the trace's next packet; false if it cannot. */
static __always_inline int load_next_frame(struct xdp_md *ctx, struct trace_state **out)
{
	__u32 zero = 0, position, *frame_index;
	struct trace_state *st = bpf_map_lookup_elem(&state, &zero);
	struct trace_frame *frame;
	void *data, *data_end;
	long length;

	if (!st)
		return 0;
	*out = st;
	position = st->cursor;
	st->cursor = position + 1 >= st->packets ? 0 : position + 1;
	frame_index = bpf_map_lookup_elem(&sequence, &position);
	if (!frame_index)
		return 0;
	frame = bpf_map_lookup_elem(&frames, frame_index);
	if (!frame)
		return 0;

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	length = data_end - data;
	if (length != st->frame_length) {
		st->resized++;
		if (bpf_xdp_adjust_head(ctx, (int)(length - st->frame_length)))
			return 0;
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
	}
#pragma unroll
	for (int i = 0; i < TRACE_FRAME_MAX / 8; i++) {
		if (i * 8 >= st->frame_length || data + (i + 1) * 8 > data_end)
			break;
		((__u64 *)data)[i] = frame->words[i];
	}
	return 1;
}

/* BPF_PROG_TEST_RUN: the program under test runs right here. */
SEC("xdp")
int trace_driver(struct xdp_md *ctx)
{
	struct trace_state *st;

	if (!load_next_frame(ctx, &st))
		return XDP_ABORTED;
	bpf_tail_call(ctx, &target, 0);
	st->tail_call_failed++;
	return XDP_ABORTED;
}

/* BPF_F_TEST_XDP_LIVE_FRAMES: the frame leaves through the interface the
 * run names, towards the program under test attached on its veth peer. */
SEC("xdp")
int trace_sender(struct xdp_md *ctx)
{
	struct trace_state *st;

	return load_next_frame(ctx, &st) ? XDP_TX : XDP_ABORTED;
}

char LICENSE[] SEC("license") = "GPL";
