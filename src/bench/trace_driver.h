/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The trace driver's map layouts, shared by trace_driver.bpf.c and the
 * benchmark (src/bench/Bench.cpp), which static_asserts the sizes.
 */
#ifndef MORPHEUS_TRACE_DRIVER_H
#define MORPHEUS_TRACE_DRIVER_H

#include <linux/types.h>

/* Longest frame the driver writes; a multiple of 8 (it copies words). */
#define TRACE_FRAME_MAX 128
/* Distinct frames and packets a trace may hold. */
#define TRACE_FRAMES_MAX 65536
#define TRACE_PACKETS_MAX (1u << 22)

struct trace_frame {
	__u64 words[TRACE_FRAME_MAX / 8];
};

/* Written by the benchmark before a measurement, read by every run. */
struct trace_state {
	__u32 packets;      /* records in `sequence` that are used */
	__u32 frame_length; /* bytes of every frame (shorter ones zero-padded) */
	__u32 cursor;       /* the next record; the driver advances it */
	__u32 resized;      /* frames the program under test left longer or shorter */
	__u32 tail_call_failed;
	__u32 pad;
};

#endif
