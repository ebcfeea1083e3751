// SPDX-License-Identifier: GPL-2.0
/*
 * The program-level guard, linked into every specialized program and inlined
 * where src/core/passes/ProgramGuard.cpp puts it: at the start of every
 * function the kernel can call (program entries, callbacks).
 *
 * morpheus_guard holds a 64-bit version word (and, for user space only, a
 * count of control-plane changes in progress; see src/backend/bpf/Guard.h).
 * The control plane increments the version (through Morpheus) before it
 * changes any table; specialized code carries the version it was compiled
 * against and runs only while the word still holds it. Otherwise the
 * generic code runs: a copy of the original kept in the same program (the
 * in-program fallback), or the original program itself, reached by a tail
 * call through morpheus_fallback at the entry's slot.
 *
 * The map is mmap-able so the control plane bumps the word with one atomic
 * instruction, and an ARRAY so the verifier inlines the lookup: the check
 * costs a load and a compare.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "guard_abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct morpheus_guard_state);
	__uint(map_flags, BPF_F_MMAPABLE);
} morpheus_guard SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, MORPHEUS_MAX_PROGRAMS);
	__type(key, __u32);
	__type(value, __u32);
} morpheus_fallback SEC(".maps");

/* Whether code specialized for `version` may run. Fails closed: no guard
 * state means no. */
__attribute__((always_inline)) int morpheus_guard_holds(__u64 version)
{
	__u32 zero = 0;
	struct morpheus_guard_state *state = bpf_map_lookup_elem(&morpheus_guard, &zero);

	return state && *(volatile __u64 *)&state->version == version;
}

/* The tail-call fallback. Returns -1 when the specialized code may run.
 * Otherwise it tail-calls the original program, which does not return here;
 * reaching the end means the slot is empty or the tail-call limit was hit,
 * and the packet gets `failure`, the program type's drop verdict
 * (XDP_ABORTED, visible in the xdp:xdp_exception tracepoint; TC_ACT_SHOT),
 * rather than being processed by stale code. */
__attribute__((always_inline)) long morpheus_guard_enter(void *ctx, __u64 version,
							 __u32 slot, __u32 failure)
{
	if (morpheus_guard_holds(version))
		return -1;
	bpf_tail_call(ctx, &morpheus_fallback, slot);
	return failure;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MORPHEUS_PROFILE_SITES);
	__type(key, __u32);
	__type(value, struct morpheus_profile_site);
} morpheus_profile SEC(".maps");

/* The countdown to the sample after sample number `written`: `period` on
 * average, jittered from the sample count (a multiplicative hash), so that
 * traffic repeating with the period (two flows alternating, a period of 64)
 * is not aliased onto one key. Periods are powers of two; 1 samples every
 * lookup. Runs on sampled packets only. */
__attribute__((always_inline)) static __u32 morpheus_profile_next(__u32 period, __u64 written)
{
	__u32 spread = ((__u32)written * 2654435761u) >> 16;
	__u32 next = (period >> 1) + (spread & (period - 1));

	return next ? next : 1;
}

/* Where the instrumented lookup at `site` records its key this time, or
 * null when this packet is not sampled. No helper call stays on the
 * per-packet path: the verifier inlines PERCPU_ARRAY lookups (a per-CPU
 * offset and a bounds check), and the sampling decision is a countdown,
 * not a random number. Per CPU, so no atomics: a program runs on one CPU
 * at a time. */
__attribute__((always_inline)) void *morpheus_profile_slot(__u32 site)
{
	struct morpheus_profile_site *profile = bpf_map_lookup_elem(&morpheus_profile, &site);
	__u32 left;
	__u64 written;

	if (!profile)
		return 0;
	left = profile->countdown;
	if (left != 1) {
		if (left)
			profile->countdown = left - 1;
		return 0;
	}
	written = profile->written;
	profile->written = written + 1;
	profile->countdown = morpheus_profile_next(profile->period, written);
	return profile->keys[written & (MORPHEUS_PROFILE_SLOTS - 1)];
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << MORPHEUS_WRITE_BUCKET_BITS);
	__type(key, __u32);
	__type(value, __u64);
} morpheus_writes SEC(".maps");

/* Counts a data-plane write of a key in `bucket`, after the write. Atomic:
 * writes on several CPUs are never lost, so a counter only grows and never
 * comes back to a count a fast path was built under. Runs on writes only
 * (the verifier inlines the ARRAY lookup). */
__attribute__((always_inline)) void morpheus_write_bump(__u32 bucket)
{
	__u64 *count = bpf_map_lookup_elem(&morpheus_writes, &bucket);

	if (count)
		__sync_fetch_and_add(count, 1);
}

/* The writes counted in `bucket`. A bucket beyond the array reads as a
 * count no fast path was built under (fails closed). */
__attribute__((always_inline)) __u64 morpheus_write_count(__u32 bucket)
{
	__u64 *count = bpf_map_lookup_elem(&morpheus_writes, &bucket);

	return count ? *(volatile __u64 *)count : ~0ull;
}
