// SPDX-License-Identifier: GPL-2.0
/*
 * The cost model's calibration programs (src/bench/Calibration.cpp): each
 * does one kind of operation a table representation is made of, OPS times
 * (or a chain or search of known length) on a pseudo-random address that
 * changes every run, so branches and caches see what traffic without
 * locality shows them. `control` does everything else they do (the address,
 * the sink), so a program's cost less the control's, over its operation
 * count, is one operation's cost.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define OPS 16
#define TABLE_KEYS 1024

struct cal_state {
	__u64 runs; /* drives the address sequence */
	__u64 sink; /* every result lands here, so nothing is optimized out */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cal_state);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TABLE_KEYS);
	__type(key, __u32);
	__type(value, __u32);
} hash_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TABLE_KEYS);
	__type(key, __u32);
	__type(value, __u32);
} array_table SEC(".maps");

struct trie_key {
	__u32 prefixlen;
	__u32 address;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct trie_key);
	__type(value, __u32);
} trie SEC(".maps");

/* A derived table's first level: 65,536 16-bit slots (contents do not
 * matter; const volatile, so the loads stay loads). */
const volatile __u16 derived[65536];

#define OPAQUE(x) asm volatile("" : "+r"(x))

/* The next pseudo-random address (a mixed counter). */
static __always_inline __u32 next_address(struct cal_state **out)
{
	__u32 zero = 0;
	struct cal_state *st = bpf_map_lookup_elem(&state, &zero);
	__u32 a;

	if (!st)
		return 0;
	*out = st;
	a = (__u32)(++st->runs) * 0x9E3779B1u;
	a ^= a >> 15;
	a *= 0x85EBCA6Bu;
	a ^= a >> 13;
	return a;
}

/* A calibration program: the address in `a` (64 bits wide: no zero extension
 * before each compare), results summed into `acc`. */
#define BEGIN(name)                                                            \
	SEC("xdp") int name(struct xdp_md *ctx)                                \
	{                                                                      \
		struct cal_state *st = 0;                                      \
		__u64 a = next_address(&st);                                   \
		__u64 acc = 0;                                                 \
		if (!st)                                                       \
			return XDP_ABORTED;
#define END                                                                    \
		st->sink += acc;                                               \
		return XDP_DROP;                                               \
	}

BEGIN(control)
	acc = a;
END

BEGIN(hash_lookup)
#pragma unroll
	for (int i = 0; i < OPS; i++) {
		__u32 key = (a + i * 7) & (TABLE_KEYS - 1);
		__u32 *value = bpf_map_lookup_elem(&hash_table, &key);
		if (value)
			acc += *value;
	}
END

BEGIN(array_lookup)
#pragma unroll
	for (int i = 0; i < OPS; i++) {
		__u32 key = (a + i * 7) & (TABLE_KEYS - 1);
		__u32 *value = bpf_map_lookup_elem(&array_table, &key);
		if (value)
			acc += *value;
	}
END

BEGIN(trie_lookup)
#pragma unroll
	for (int i = 0; i < OPS; i++) {
		struct trie_key key = {32, a + i * 0x01000193u};
		__u32 *value = bpf_map_lookup_elem(&trie, &key);
		if (value)
			acc += *value;
	}
END

BEGIN(helper_call)
#pragma unroll
	for (int i = 0; i < OPS; i++)
		acc += bpf_get_prandom_u32();
END

/* 64 compares that never match (an address equal to one of them is
 * counted as a match, which costs the same): a compare chain's walk. */
#define CMP(i)                                                                 \
	if (a == 0x5A5A0001u + (i) * 0x01010101u) {                            \
		acc = (i);                                                     \
		goto out;                                                      \
	}                                                                      \
	OPAQUE(a);
#define CMP8(i) CMP(i) CMP(i + 1) CMP(i + 2) CMP(i + 3) CMP(i + 4) CMP(i + 5) CMP(i + 6) CMP(i + 7)
BEGIN(compare_chain)
	CMP8(0) CMP8(8) CMP8(16) CMP8(24) CMP8(32) CMP8(40) CMP8(48) CMP8(56)
	acc = a;
out:;
END

/* A balanced binary search of 10 levels over 1,024 intervals with uneven
 * bounds, as lpm-as-code builds it: a compare with a constant per level. */
#define BOUND(x) ((__u32)(x) * 4194304u + ((__u32)(x) * 2654435761u & 0x3ffffu))
#define S1(b) (a < BOUND((b) + 1) ? (b) : (b) + 1)
#define S2(b) (a < BOUND((b) + 2) ? S1(b) : S1((b) + 2))
#define S3(b) (a < BOUND((b) + 4) ? S2(b) : S2((b) + 4))
#define S4(b) (a < BOUND((b) + 8) ? S3(b) : S3((b) + 8))
#define S5(b) (a < BOUND((b) + 16) ? S4(b) : S4((b) + 16))
#define S6(b) (a < BOUND((b) + 32) ? S5(b) : S5((b) + 32))
#define S7(b) (a < BOUND((b) + 64) ? S6(b) : S6((b) + 64))
#define S8(b) (a < BOUND((b) + 128) ? S7(b) : S7((b) + 128))
#define S9(b) (a < BOUND((b) + 256) ? S8(b) : S8((b) + 256))
#define S10(b) (a < BOUND((b) + 512) ? S9(b) : S9((b) + 512))
BEGIN(binary_search)
	acc = S10(0);
END

/* Eight dependent loads from a 128 KiB derived table: each index depends on
 * the address and the slot the previous load read. */
BEGIN(derived_load)
	__u32 slot = 0;
#pragma unroll
	for (int i = 0; i < 8; i++)
		slot = derived[((a >> i) ^ slot) & 0xffff];
	acc = slot;
END

char LICENSE[] SEC("license") = "GPL";
