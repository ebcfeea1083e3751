/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The replay ABI: what the replay runtime (replay.bpf.c, linked into the
 * copies that shadow validation and the fuzzer compare, never into a
 * version that runs live) and Morpheus's user space (runtime/Version-
 * Comparison) agree on. Plain C, included by both sides.
 *
 * In a compared copy, every call of a helper whose answer differs from run
 * to run (a random number, a clock) reads this state instead, which user
 * space writes alike into every copy before each compared run: the copies
 * draw the same random stream and read the same clocks.
 */
#ifndef MORPHEUS_REPLAY_ABI_H
#define MORPHEUS_REPLAY_ABI_H

#include <linux/types.h>

/* The data section (a one-entry array map libbpf makes of it) holding the
 * state; user space hands every load of one copy the same map. */
#define MORPHEUS_REPLAY_SECTION ".data.morpheus_replay"

/* The functions a compared copy calls instead of the helpers, each
 * __u64 (void): the random number's 32 bits zero-extended, as the helper
 * leaves them in r0. */
#define MORPHEUS_REPLAY_RANDOM "morpheus_replay_random"           /* helper 7 */
#define MORPHEUS_REPLAY_KTIME "morpheus_replay_ktime_get_ns"      /* helper 5 */
#define MORPHEUS_REPLAY_JIFFIES "morpheus_replay_jiffies64"       /* helper 118 */
#define MORPHEUS_REPLAY_BOOT "morpheus_replay_ktime_get_boot_ns"  /* helper 125 */
#define MORPHEUS_REPLAY_COARSE "morpheus_replay_ktime_get_coarse_ns" /* helper 160 */
#define MORPHEUS_REPLAY_TAI "morpheus_replay_ktime_get_tai_ns"    /* helper 208 */

/* The clocks, by their index in `clock` and bit in `latched`. */
enum morpheus_replay_clock {
	MORPHEUS_CLOCK_KTIME,
	MORPHEUS_CLOCK_JIFFIES,
	MORPHEUS_CLOCK_BOOT,
	MORPHEUS_CLOCK_COARSE,
	MORPHEUS_CLOCK_TAI,
	MORPHEUS_CLOCKS,
};

/* Written by user space before each run of a copy. The random stream is
 * `seed`'s: the n-th number drawn in a run is a mix of seed + n (draws
 * counts them). A clock not yet `latched` is read from the kernel at its
 * first call in the run and kept; a latched one answers `clock[i]` at
 * every call: user space latches, in the copies that run after the first,
 * the readings the first one took, so every copy reads one time per step
 * and clock. */
struct morpheus_replay_state {
	__u64 seed;
	__u64 draws;
	__u64 latched; /* bit i: clock[i] holds the step's reading */
	__u64 clock[MORPHEUS_CLOCKS];
};

#endif
