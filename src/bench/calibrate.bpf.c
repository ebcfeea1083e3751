// SPDX-License-Identifier: GPL-2.0
/*
 * The cost model's calibration programs (src/bench/Calibration.cpp): each
 * does one kind of operation a table representation is made of, OPS times
 * (or a chain or search of known length) on a pseudo-random address that
 * changes every run, so branches and caches see what traffic without
 * locality shows them. `control` does everything else they do (the address,
 * the sink), so a program's cost less the control's, over its operation
 * count, is one operation's cost. The searches and derived-table loads take
 * their address as a packet gives it instead: in network order from memory
 * (the `flows` array, filled with 1,024 addresses: a bench trace's thousand
 * flows), one of them at random per run, byte-swapped as lpm-as-code does;
 * their control, `control_flow`, does the same.
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

#define FLOWS 1024

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FLOWS);
	__type(key, __u32);
	__type(value, __u32);
} flows SEC(".maps");

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

/* Derived tables of 4 KiB (in the first-level data cache), 128 KiB (a
 * 16-8-8 table's first level) and 1 MiB, 16-bit slots (contents do not
 * matter; const volatile, so the loads stay loads). */
const volatile __u16 derived_4k[2048];
const volatile __u16 derived[65536];
const volatile __u16 derived_1m[524288];

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

/* The address of a random one of the flows, in host order. */
static __always_inline __u32 flow_address(__u32 mixed)
{
	__u32 index = mixed & (FLOWS - 1);
	__u32 *address = bpf_map_lookup_elem(&flows, &index);

	return address ? __builtin_bswap32(*address) : 0;
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

#define BEGIN_FLOW(name)                                                       \
	BEGIN(name)                                                            \
	a = flow_address(a);

BEGIN_FLOW(control_flow)
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

/* Chains of 8, 64, 512 and 4,096 compares that never match (an address
 * equal to one of them is counted as a match, which costs the same): a
 * compare chain's walk; the longer ones leave the instruction cache (~25
 * bytes of x86 a compare: 4,096 of them are ~100 KiB). */
#define CMP(i)                                                                 \
	if (a == 0x5A5A0001u + (i) * 0x01010101u) {                            \
		acc = (i);                                                     \
		goto out;                                                      \
	}                                                                      \
	OPAQUE(a);
#define CMP8(i) CMP(i) CMP(i + 1) CMP(i + 2) CMP(i + 3) CMP(i + 4) CMP(i + 5) CMP(i + 6) CMP(i + 7)
#define CMP64(i) CMP8(i) CMP8(i + 8) CMP8(i + 16) CMP8(i + 24) CMP8(i + 32) CMP8(i + 40) CMP8(i + 48) CMP8(i + 56)
#define CMP512(i) CMP64(i) CMP64(i + 64) CMP64(i + 128) CMP64(i + 192) CMP64(i + 256) CMP64(i + 320) CMP64(i + 384) CMP64(i + 448)
#define CMP4096(i) CMP512(i) CMP512(i + 512) CMP512(i + 1024) CMP512(i + 1536) CMP512(i + 2048) CMP512(i + 2560) CMP512(i + 3072) CMP512(i + 3584)
#define CHAIN(n)                                                               \
	BEGIN(compare_chain_##n)                                               \
		CMP##n(0)                                                      \
		acc = a;                                                       \
	out:;                                                                  \
	END
CHAIN(8)
CHAIN(64)
CHAIN(512)
CHAIN(4096)

/* Balanced binary searches over 4, 32 and 256 intervals with uneven
 * bounds (2, 5 and 8 levels: a few prefixes to the inline limit's 64), as
 * lpm-as-code builds them: a compare with a constant per level. BOUND uses
 * the SHIFT defined where a search is expanded: 2^SHIFT addresses an
 * interval, give or take a quarter. */
#define BOUND(x) (((__u32)(x) << SHIFT) + ((__u32)(x) * 2654435761u & ((1u << (SHIFT - 2)) - 1)))
#define S1(b) (a < BOUND((b) + 1) ? (b) : (b) + 1)
#define S2(b) (a < BOUND((b) + 2) ? S1(b) : S1((b) + 2))
#define S3(b) (a < BOUND((b) + 4) ? S2(b) : S2((b) + 4))
#define S4(b) (a < BOUND((b) + 8) ? S3(b) : S3((b) + 8))
#define S5(b) (a < BOUND((b) + 16) ? S4(b) : S4((b) + 16))
#define S6(b) (a < BOUND((b) + 32) ? S5(b) : S5((b) + 32))
#define S7(b) (a < BOUND((b) + 64) ? S6(b) : S6((b) + 64))
#define S8(b) (a < BOUND((b) + 128) ? S7(b) : S7((b) + 128))
#define SHIFT 30
BEGIN_FLOW(search_4)
	acc = S2(0);
END
#undef SHIFT
#define SHIFT 27
BEGIN_FLOW(search_32)
	acc = S5(0);
END
#undef SHIFT
#define SHIFT 24
BEGIN_FLOW(search_256)
	acc = S8(0);
END
#undef SHIFT

/* Eight dependent loads from a derived table: each index depends on the
 * address and the slot the previous load read. */
#define DERIVED_LOADS(table, slots)                                            \
	__u32 slot = 0;                                                        \
	_Pragma("unroll") for (int i = 0; i < 8; i++) slot =                   \
		table[((a >> i) ^ slot) & ((slots) - 1)];                      \
	acc = slot;
BEGIN_FLOW(derived_load_4k)
	DERIVED_LOADS(derived_4k, 2048)
END
BEGIN_FLOW(derived_load_128k)
	DERIVED_LOADS(derived, 65536)
END
BEGIN_FLOW(derived_load_1m)
	DERIVED_LOADS(derived_1m, 524288)
END

char LICENSE[] SEC("license") = "GPL";
