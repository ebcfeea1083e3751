/* Maps defined as programs written before libbpf 1.0 define them: structs
 * of 32-bit fields in section "maps", declared by the program itself (as
 * their own copies of bpf_helpers.h did) in both layouts found in the
 * wild, libbpf's old `struct bpf_map_def` and iproute2's `struct
 * bpf_elf_map`. libbpf 1.x refuses the object as it is; Morpheus loads
 * it with the definitions rewritten as BTF maps. The configuration array
 * is only read, the counters are written, the blocklist is only read. */
#include "common.h"
#include <linux/in.h>

struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct bpf_elf_map {
	__u32 type;
	__u32 size_key;
	__u32 size_value;
	__u32 max_elem;
	__u32 flags;
	__u32 id;
	__u32 pinning;
	__u32 inner_id;
	__u32 inner_idx;
};

struct legacy_config {
	__u32 enabled;
	__u32 verdict; /* for blocked sources */
};

struct bpf_map_def SEC("maps") legacy_config = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct legacy_config),
	.max_entries = 1,
};

struct bpf_map_def SEC("maps") legacy_blocked = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 64,
	.map_flags = BPF_F_NO_PREALLOC,
};

struct bpf_elf_map SEC("maps") legacy_counters = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u64),
	.max_elem = 2,
#ifdef LEGACY_INNER /* iproute2's map in map: refused, not converted */
	.inner_id = 1,
#endif
};

SEC("xdp")
int legacy_filter(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct legacy_config *config;
	__u32 zero = 0, saddr, slot;
	__u64 *count;

	if (!ip)
		return XDP_PASS;
	config = bpf_map_lookup_elem(&legacy_config, &zero);
	if (!config || !config->enabled)
		return XDP_PASS;
	saddr = ip->saddr;
	slot = bpf_map_lookup_elem(&legacy_blocked, &saddr) ? 1 : 0;
	count = bpf_map_lookup_elem(&legacy_counters, &slot);
	if (count)
		*count += 1;
	return slot ? config->verdict : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
