// SPDX-License-Identifier: GPL-2.0
// A dispatcher shaped as libxdp's multi-program dispatcher (its name, its
// configuration in a frozen .rodata of the protocol's layout, slots called
// in priority order, a slot's verdict returned unless it is one of the
// slot's chain-call actions, an empty slot going on) whose slots are tail
// calls into a program array of its own instead of extensions: a kernel
// that refuses extension programs runs it, so the kernel tests drive
// Morpheus's dispatcher revisions (backend/bpf/XdpDispatcher) through it.
// A tail call from a subprogram returns the callee's verdict to the
// subprogram's caller, as an extension's return does.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define SLOTS 10
#define CONTINUE 31 /* what an empty slot returns: always a chain-call action */

struct dispatcher_config {
	__u8 magic;
	__u8 version;
	__u8 slots_enabled;
	__u8 frags;
	__u32 chain_call_actions[SLOTS];
	__u32 run_priorities[SLOTS];
	__u32 program_flags[SLOTS];
};

/* const: frozen at load, so the verifier prunes the slots not enabled;
 * volatile: the compiler may not fold what the loader sets. */
static volatile const struct dispatcher_config conf = {};

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} slots SEC(".maps");

/* volatile: clang sees a call that returns and would fold every slot's
 * verdict to CONTINUE. */
static __attribute__((noinline)) int run_slot(struct xdp_md *ctx, __u32 slot)
{
	volatile int empty = CONTINUE;

	bpf_tail_call(ctx, &slots, slot);
	return empty;
}

/* Slot i's verdict, or on to the next slot when it is a chain-call action. */
#define SLOT(i)                                                               \
	if (enabled < (i) + 1)                                                \
		return XDP_PASS;                                              \
	verdict = run_slot(ctx, i);                                           \
	if (verdict < 0 || verdict > CONTINUE ||                              \
	    !((1U << verdict) & conf.chain_call_actions[i]))                  \
		return verdict;

SEC("xdp")
int xdp_dispatcher(struct xdp_md *ctx)
{
	__u8 enabled = conf.slots_enabled;
	int verdict;

	SLOT(0) SLOT(1) SLOT(2) SLOT(3) SLOT(4)
	SLOT(5) SLOT(6) SLOT(7) SLOT(8) SLOT(9)
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
