/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The map features of the maps_*.bpf.c test programs. A program defines
 * the MAPS_WITH_* switches it wants and includes this file, which declares
 * those maps and the `entry` XDP program that uses them in a fixed order.
 * Every feature writes its maps on every packet that gets past `config`.
 *
 *   MAPS_WITH_HASH        HASH           per-destination counters, inserted
 *   MAPS_WITH_ARRAY       ARRAY          counters by destination & 3
 *   MAPS_WITH_PERCPU      PERCPU_HASH, PERCPU_ARRAY
 *   MAPS_WITH_LRU         LRU_HASH, LRU_PERCPU_HASH (16 entries: evicts)
 *   MAPS_WITH_LPM         LPM_TRIE       a /32 inserted per new destination
 *   MAPS_WITH_RINGBUF     RINGBUF        one record per packet
 *   MAPS_WITH_PERF        PERF_EVENT_ARRAY  one record per packet
 *   MAPS_WITH_QUEUE       QUEUE, STACK   one pop and one push each
 *   MAPS_WITH_IN_MAP      ARRAY_OF_MAPS (slot 3 set statically to
 *                         fixed_counts), HASH_OF_MAPS: the inner maps
 *                         (set by a loader) count packets
 *   MAPS_WITH_DEVMAP      DEVMAP, DEVMAP_HASH, CPUMAP: looked up; packets to
 *                         destination 10.255.255.x are redirected
 *   MAPS_WITH_STORAGE     TASK_STORAGE counts per task; SK_STORAGE and
 *                         INODE_STORAGE declared (XDP cannot use them)
 *   MAPS_WITH_GLOBALS     .bss, .data written; .rodata, .kconfig read
 *   MAPS_WITH_PINNED      HASH and ARRAY with pinning = LIBBPF_PIN_BY_NAME
 *   MAPS_WITH_PROG_ARRAY  PROG_ARRAY `stages` whose slot 0 the object sets
 *                         statically to `stage2`; entry tail-calls it last
 *                         and stage2 counts in stage_counts[1]
 *
 * MAPS_WRONG_SALT builds a version that writes salt + 1 wherever the salt
 * goes: what a comparison of the versions' maps must notice.
 */
#ifndef MAPS_FEATURES_H
#define MAPS_FEATURES_H

#include "maps_common.h"

struct maps_record {
	__u32 destination;
	__u32 salt;
};

#ifdef MAPS_WITH_HASH
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} per_destination SEC(".maps");

static __always_inline void use_hash(__u32 destination, __u32 salt)
{
	__u64 *count = bpf_map_lookup_elem(&per_destination, &destination);
	__u64 first = salt;

	if (count)
		__sync_fetch_and_add(count, 1);
	else
		bpf_map_update_elem(&per_destination, &destination, &first, BPF_NOEXIST);
}
#endif

#ifdef MAPS_WITH_ARRAY
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} by_quarter SEC(".maps");

static __always_inline void use_array(__u32 destination, __u32 salt)
{
	__u32 index = destination & 3;
	__u64 *count = bpf_map_lookup_elem(&by_quarter, &index);

	if (count)
		__sync_fetch_and_add(count, 1 + salt);
}
#endif

#ifdef MAPS_WITH_PERCPU
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} cpu_per_destination SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} cpu_totals SEC(".maps");

static __always_inline void use_percpu(__u32 destination, __u32 salt)
{
	__u32 zero = 0;
	__u64 *count = bpf_map_lookup_elem(&cpu_per_destination, &destination);
	__u64 *total = bpf_map_lookup_elem(&cpu_totals, &zero);

	if (count)
		*count += 1;
	else
		bpf_map_update_elem(&cpu_per_destination, &destination, &zero, BPF_ANY);
	if (total)
		*total += salt + 1;
}
#endif

#ifdef MAPS_WITH_LRU
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} recent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} cpu_recent SEC(".maps");

static __always_inline void use_lru(__u32 destination, __u32 salt)
{
	__u64 value = salt;

	bpf_map_update_elem(&recent, &destination, &value, BPF_ANY);
	bpf_map_update_elem(&cpu_recent, &destination, &value, BPF_ANY);
}
#endif

#ifdef MAPS_WITH_LPM
struct lpm_v4 {
	__u32 prefixlen;
	__u32 address;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 64);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_v4);
	__type(value, __u64);
} prefixes SEC(".maps");

static __always_inline void use_lpm(__u32 destination, __u32 salt)
{
	struct lpm_v4 key = {32, destination};
	__u64 *hits = bpf_map_lookup_elem(&prefixes, &key);
	__u64 first = salt;

	if (hits)
		__sync_fetch_and_add(hits, 1);
	else
		bpf_map_update_elem(&prefixes, &key, &first, BPF_NOEXIST);
}
#endif

#ifdef MAPS_WITH_RINGBUF
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

static __always_inline void use_ringbuf(__u32 destination, __u32 salt)
{
	struct maps_record record = {destination, salt};

	bpf_ringbuf_output(&events, &record, sizeof(record), 0);
}
#endif

#ifdef MAPS_WITH_PERF
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} samples SEC(".maps");

static __always_inline void use_perf(struct xdp_md *ctx, __u32 destination, __u32 salt)
{
	struct maps_record record = {destination, salt};

	bpf_perf_event_output(ctx, &samples, BPF_F_CURRENT_CPU, &record, sizeof(record));
}
#endif

#ifdef MAPS_WITH_QUEUE
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 8);
	__type(value, __u32);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK);
	__uint(max_entries, 8);
	__type(value, __u32);
} history SEC(".maps");

static __always_inline void use_queue(__u32 destination, __u32 salt)
{
	__u32 oldest = 0, latest = destination ^ salt;

	bpf_map_pop_elem(&pending, &oldest);
	bpf_map_push_elem(&pending, &latest, BPF_EXIST);
	bpf_map_push_elem(&history, &oldest, BPF_EXIST);
}
#endif

#ifdef MAPS_WITH_IN_MAP
struct inner_counts {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
};

struct inner_counts fixed_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct inner_counts);
} by_slot SEC(".maps") = {
	.values = { [3] = &fixed_counts },
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 8);
	__type(key, __u32);
	__array(values, struct inner_counts);
} by_destination SEC(".maps");

static __always_inline void use_in_map(__u32 destination, __u32 salt)
{
	__u32 slot = destination & 3, zero = 0;
	void *inner = bpf_map_lookup_elem(&by_slot, &slot);
	__u64 *count;

	if (inner) {
		count = bpf_map_lookup_elem(inner, &zero);
		if (count)
			__sync_fetch_and_add(count, 1);
	}
	inner = bpf_map_lookup_elem(&by_destination, &destination);
	if (inner) {
		count = bpf_map_lookup_elem(inner, &zero);
		if (count)
			__sync_fetch_and_add(count, 1 + salt);
	}
}
#endif

#ifdef MAPS_WITH_DEVMAP
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} ports_by_destination SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpus SEC(".maps");

/* A redirect verdict, or -1 to go on. */
static __always_inline int use_devmap(__u32 destination)
{
	__u32 slot = destination & 3;
	struct bpf_devmap_val *port = bpf_map_lookup_elem(&ports, &slot);

	if ((bpf_ntohl(destination) >> 8) != 0x0affffff)
		return -1;
	if (port && port->ifindex == 1)
		return bpf_redirect_map(&ports_by_destination, destination, XDP_PASS);
	if (slot == 3)
		return bpf_redirect_map(&cpus, 0, XDP_PASS);
	return bpf_redirect_map(&ports, slot, XDP_DROP);
}
#endif

#ifdef MAPS_WITH_STORAGE
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} per_task SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} per_socket SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} per_inode SEC(".maps");

static __always_inline void use_storage(__u32 salt)
{
	__u64 *count = bpf_task_storage_get(&per_task, bpf_get_current_task_btf(), 0,
					    BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (count)
		__sync_fetch_and_add(count, 1 + salt);
}
#endif

#ifdef MAPS_WITH_GLOBALS
__u64 packets_seen;		/* .bss */
__u64 salted_total = 7;		/* .data */
const volatile __u32 scale = 3;	/* .rodata */
extern unsigned int LINUX_KERNEL_VERSION __kconfig;

static __always_inline void use_globals(__u32 salt)
{
	__sync_fetch_and_add(&packets_seen, 1);
	__sync_fetch_and_add(&salted_total, salt * scale + (LINUX_KERNEL_VERSION & 1));
}
#endif

#ifdef MAPS_WITH_PINNED
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pinned_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pinned_totals SEC(".maps");

static __always_inline void use_pinned(__u32 destination, __u32 salt)
{
	__u32 index = destination & 3;
	__u64 *total = bpf_map_lookup_elem(&pinned_totals, &index);
	__u64 first = salt;

	if (total)
		__sync_fetch_and_add(total, 1);
	if (!bpf_map_lookup_elem(&pinned_flows, &destination))
		bpf_map_update_elem(&pinned_flows, &destination, &first, BPF_NOEXIST);
}
#endif

#ifdef MAPS_WITH_PROG_ARRAY
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} stage_counts SEC(".maps");

static __always_inline void count_stage(__u32 stage)
{
	__u64 *count = bpf_map_lookup_elem(&stage_counts, &stage);

	if (count)
		__sync_fetch_and_add(count, 1);
}

SEC("xdp")
int stage2(struct xdp_md *ctx)
{
	count_stage(1);
	return XDP_PASS;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, int(void *));
} stages SEC(".maps") = {
	.values = { [0] = (void *)&stage2 },
};
#endif

SEC("xdp")
int entry(struct xdp_md *ctx)
{
	const struct maps_config *config = maps_config();
	__u32 destination = maps_destination(ctx), salt;

	if (!config || !config->enabled)
		return XDP_DROP;
	salt = config->salt;
#ifdef MAPS_WRONG_SALT
	salt += 1;
#endif
#ifdef MAPS_WITH_HASH
	use_hash(destination, salt);
#endif
#ifdef MAPS_WITH_ARRAY
	use_array(destination, salt);
#endif
#ifdef MAPS_WITH_PERCPU
	use_percpu(destination, salt);
#endif
#ifdef MAPS_WITH_LRU
	use_lru(destination, salt);
#endif
#ifdef MAPS_WITH_LPM
	use_lpm(destination, salt);
#endif
#ifdef MAPS_WITH_RINGBUF
	use_ringbuf(destination, salt);
#endif
#ifdef MAPS_WITH_PERF
	use_perf(ctx, destination, salt);
#endif
#ifdef MAPS_WITH_QUEUE
	use_queue(destination, salt);
#endif
#ifdef MAPS_WITH_IN_MAP
	use_in_map(destination, salt);
#endif
#ifdef MAPS_WITH_STORAGE
	use_storage(salt);
#endif
#ifdef MAPS_WITH_GLOBALS
	use_globals(salt);
#endif
#ifdef MAPS_WITH_PINNED
	use_pinned(destination, salt);
#endif
#ifdef MAPS_WITH_DEVMAP
	{
		int redirect = use_devmap(destination);

		if (redirect >= 0)
			return redirect;
	}
#endif
#ifdef MAPS_WITH_PROG_ARRAY
	count_stage(0);
	bpf_tail_call(ctx, &stages, 0);
	return XDP_ABORTED; /* the slot is empty */
#else
	return XDP_PASS;
#endif
}

#endif
