// SPDX-License-Identifier: GPL-2.0
/*
 * The replay runtime, called by the copies that shadow validation and the
 * fuzzer compare (backend/bpf/ComparedCopy) in place of the helpers whose
 * answers differ from run to run: each copy reads the same random stream and
 * the same clock readings, written by user space into its state before each
 * run (replay_abi.h). A version's object carries these functions with no
 * call of them: live, libbpf loads no function nothing calls, and no map
 * for the state (BpfObject.cpp); its compared copy calls them.
 *
 * The state is a global in its own data section, reached with no stack and
 * no helper call (the verifier resolves the address at load): a replayer
 * called as a subprogram adds no stack to its caller's, and inlined (the
 * original's compared copy) costs the verifier about what the helper call
 * did.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "replay_abi.h"

struct morpheus_replay_state morpheus_replay SEC(MORPHEUS_REPLAY_SECTION);

/* The next number of the run's stream: splitmix64 of seed + draws, whose
 * outputs are uniform and unrelated for consecutive inputs; the upper half,
 * as bpf_get_prandom_u32() answers 32 bits (zero-extended, as it leaves
 * them in r0). */
__u64 morpheus_replay_random(void)
{
	__u64 x = morpheus_replay.seed + ++morpheus_replay.draws * 0x9e3779b97f4a7c15ull;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (__u32)((x ^ (x >> 31)) >> 32);
}

/* A clock's reading for this step: the kernel's at the first call of a run
 * whose state does not hold it yet, then the same at every call. */
#define MORPHEUS_REPLAY_CLOCK(function, helper, index)                         \
	__u64 function(void)                                                   \
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
