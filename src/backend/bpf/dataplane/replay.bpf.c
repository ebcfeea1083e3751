// SPDX-License-Identifier: GPL-2.0
/*
 * The replay runtime, linked into the copies that shadow validation and the
 * fuzzer compare (backend/bpf/ComparedCopy), in place of the helpers whose
 * answers differ from run to run: each copy reads the same random stream and
 * the same clock readings, written by user space into its state before each
 * run (replay_abi.h). Versions that run live never contain it.
 *
 * The state is a global in its own data section: no stack, no helper call
 * to reach it (the verifier resolves the address at load), so a compared
 * copy costs the verifier what the original costs.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "replay_abi.h"

struct morpheus_replay_state morpheus_replay SEC(MORPHEUS_REPLAY_SECTION);

/* The next number of the run's stream: splitmix64 of seed + draws, whose
 * outputs are uniform and unrelated for consecutive inputs; the upper half,
 * as bpf_get_prandom_u32() answers 32 bits. */
__attribute__((always_inline)) __u32 morpheus_replay_random(void)
{
	__u64 x = morpheus_replay.seed + ++morpheus_replay.draws * 0x9e3779b97f4a7c15ull;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (__u32)((x ^ (x >> 31)) >> 32);
}

/* A clock's reading for this step: the kernel's at the first call of a run
 * whose state does not hold it yet, then the same at every call. */
#define MORPHEUS_REPLAY_CLOCK(function, helper, index)                         \
	__attribute__((always_inline)) __u64 function(void)                    \
	{                                                                      \
		if (!(morpheus_replay.latched & (1ull << (index)))) {          \
			morpheus_replay.clock[index] = helper();               \
			morpheus_replay.latched |= 1ull << (index);            \
		}                                                              \
		return morpheus_replay.clock[index];                           \
	}

MORPHEUS_REPLAY_CLOCK(morpheus_replay_ktime_get_ns, bpf_ktime_get_ns, MORPHEUS_CLOCK_KTIME)
MORPHEUS_REPLAY_CLOCK(morpheus_replay_jiffies64, bpf_jiffies64, MORPHEUS_CLOCK_JIFFIES)
MORPHEUS_REPLAY_CLOCK(morpheus_replay_ktime_get_boot_ns, bpf_ktime_get_boot_ns, MORPHEUS_CLOCK_BOOT)
MORPHEUS_REPLAY_CLOCK(morpheus_replay_ktime_get_coarse_ns, bpf_ktime_get_coarse_ns,
		      MORPHEUS_CLOCK_COARSE)
MORPHEUS_REPLAY_CLOCK(morpheus_replay_ktime_get_tai_ns, bpf_ktime_get_tai_ns, MORPHEUS_CLOCK_TAI)
