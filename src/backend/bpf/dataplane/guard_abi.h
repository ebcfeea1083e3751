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

/* Slots of the fallback program array: programs Morpheus manages per object. */
#define MORPHEUS_MAX_PROGRAMS 16

/* The guard map's only value, mmap-ed by user space. Version 0 is never
 * valid; versions only grow. */
struct morpheus_guard_state {
	__u64 version; /* checked by specialized programs */
	__u64 writers; /* control-plane changes in progress: user space only */
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

#endif /* MORPHEUS_GUARD_ABI_H */
