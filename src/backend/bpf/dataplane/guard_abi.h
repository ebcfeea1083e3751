/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The guard ABI: what the BPF runtime (guard.bpf.c, linked into every
 * specialized program) and Morpheus's user space (backend/bpf/Guard,
 * Frontend, the optimizer) must agree on. Plain C, included by both sides;
 * the layout is checked at compile time on both.
 */
#ifndef MORPHEUS_GUARD_ABI_H
#define MORPHEUS_GUARD_ABI_H

#include <linux/types.h>

/* Map names (bpffs pins and libbpf map names: no '.'). */
#define MORPHEUS_GUARD_MAP "morpheus_guard"
#define MORPHEUS_FALLBACK_MAP "morpheus_fallback"

/* Runtime functions the program guard pass calls. */
#define MORPHEUS_GUARD_HOLDS "morpheus_guard_holds" /* int (__u64 version) */
#define MORPHEUS_GUARD_ENTER "morpheus_guard_enter" /* long (ctx, version, slot, failure) */

/* Traffic profile (instrumentation, core/passes/InstrumentTableSites.cpp):
 * a PERCPU_ARRAY Morpheus creates and shares with every version it runs,
 * never pinned, so no control plane sees it; one value per access site
 * (by site id), per CPU. */
#define MORPHEUS_PROFILE_MAP "morpheus_profile"
#define MORPHEUS_PROFILE_SLOT "morpheus_profile_slot" /* void *(__u32 site) */
#define MORPHEUS_PROFILE_SITES 64      /* site ids below this are profiled */
#define MORPHEUS_PROFILE_SLOTS 64      /* keys kept per site and CPU (a power of 2) */
#define MORPHEUS_PROFILE_KEY_BYTES 32  /* longer keys are not profiled */

/* Write counts (per-entry guards of tables the data plane writes,
 * core/passes/GuardTableWrites.cpp): an ARRAY of __u64 counters Morpheus
 * creates and shares with every version it runs, never pinned; every
 * data-plane write of a guarded table adds one to the counter of the
 * written key's bucket (core writeBucket), and a fast path answers a hot
 * key only while its bucket holds the count read before the snapshot. */
#define MORPHEUS_WRITES_MAP "morpheus_writes"
#define MORPHEUS_WRITE_BUMP "morpheus_write_bump"   /* void (__u32 bucket) */
#define MORPHEUS_WRITE_COUNT "morpheus_write_count" /* __u64 (__u32 bucket) */
#define MORPHEUS_WRITE_BUCKET_BITS 12

/* Slots of the fallback program array: programs Morpheus manages per object.
 * A PROG_ARRAY's slot is one pointer in the kernel: 256 slots are 2 KiB per
 * array (the live one, and validation's scratch one while it runs). */
#define MORPHEUS_MAX_PROGRAMS 256

/* The guard map's only value, mmap-ed by user space. Version 0 is never
 * valid; versions only grow. */
struct morpheus_guard_state {
	__u64 version; /* checked by specialized programs */
	__u64 writers; /* control-plane changes in progress: user space only */
};

/* One site's profile on one CPU. `countdown` packets until the next sample
 * (0: sampling off, the state of a map user space has not set); a sample
 * reloads it from `period` (a power of two; jittered around it) and writes
 * the key into slot `written % SLOTS`.
 * User space reads the slots written since its last read. */
struct morpheus_profile_site {
	__u32 countdown;
	__u32 period;
	__u64 written;
	__u8 keys[MORPHEUS_PROFILE_SLOTS][MORPHEUS_PROFILE_KEY_BYTES];
};

#ifdef __cplusplus
#define MORPHEUS_STATIC_ASSERT(what, why) static_assert(what, why)
#else
#define MORPHEUS_STATIC_ASSERT(what, why) _Static_assert(what, why)
#endif

MORPHEUS_STATIC_ASSERT(sizeof(struct morpheus_guard_state) == 16,
		       "guard state: two 64-bit words");
MORPHEUS_STATIC_ASSERT(__builtin_offsetof(struct morpheus_guard_state, version) == 0,
		       "guard state: the version word comes first");
MORPHEUS_STATIC_ASSERT(__builtin_offsetof(struct morpheus_guard_state, writers) == 8,
		       "guard state: the writer count follows the version");

MORPHEUS_STATIC_ASSERT((MORPHEUS_PROFILE_SLOTS & (MORPHEUS_PROFILE_SLOTS - 1)) == 0,
		       "profile: slots are a power of two");
MORPHEUS_STATIC_ASSERT(__builtin_offsetof(struct morpheus_profile_site, keys) == 16,
		       "profile: 16-byte header, then 8-byte aligned key slots");

#endif /* MORPHEUS_GUARD_ABI_H */
