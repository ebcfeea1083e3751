// SPDX-License-Identifier: GPL-2.0
/* An object written for iproute2's loader as Cilium's datapath is: its
 * program array and its configuration declared in section "maps" with
 * iproute2's `struct bpf_elf_map` (an `id`, a `pinning`), tail-called
 * programs in sections "ID/KEY" (slot KEY of the array whose id is ID; one
 * of them static), a tail call written in inline assembly so its slot stays
 * a constant (Cilium's tail_call_static), and a setting in ".rodata.config"
 * read through one `ld_imm64` of its symbol, which Cilium's loader replaces
 * with the value (Cilium's CONFIG()). libbpf 1.1 refuses the object.
 *
 * Packets: not IPv4 -> XDP_PASS at the entry; IPv4 -> slot 1 (counts it,
 * then slot 0x10); slot 0x10 drops UDP to the configured port, sends
 * packets from the trusted source back (XDP_TX), passes the others. A
 * verdict other than XDP_ABORTED shows the tail calls landed. */
#include "common.h"
#include <linux/in.h>
#include <linux/udp.h>

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

#define PIN_GLOBAL_NS 2
#define PIN_REPLACE (1 << 4) /* Cilium's CILIUM_PIN_REPLACE: no pin by name */
#define CALLS_ID 2
#define STAGE_ONE 1
#define STAGE_TWO 0x10

struct bpf_elf_map SEC("maps") iproute2_calls = {
	.type = BPF_MAP_TYPE_PROG_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u32),
	.max_elem = 32,
	.id = CALLS_ID,
	.pinning = PIN_REPLACE,
};

struct port_config {
	__u16 blocked_port; /* network order */
	__u16 pad;
};

struct bpf_elf_map SEC("maps") iproute2_config = {
	.type = BPF_MAP_TYPE_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(struct port_config),
	.max_elem = 1,
#ifndef CONFIG_PINNING
	.pinning = PIN_GLOBAL_NS,
#else /* the kernel test's refused variants */
	.pinning = CONFIG_PINNING,
#endif
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} iproute2_seen SEC(".maps");

/* Cilium's DECLARE_CONFIG / ASSIGN_CONFIG / CONFIG. */
static const __u32 __config_TRUSTED_SOURCE SEC(".rodata.config") = 0x0a0000fe;
#define CONFIG(name) ({ __u64 out; asm volatile("%[out] = __config_" #name " ll" : [out] "=r"(out)); (__u32)out; })

#define TAIL_CALL_STATIC(ctx, map, slot)                                          \
	asm volatile("r1 = %[c]\n\tr2 = " #map " ll\n\tr3 = %[s]\n\tcall 12\n\t" \
		     :: [c] "r"(ctx), [s] "i"(slot) : "r0", "r1", "r2", "r3", "r4", "r5")

SEC("xdp")
int iproute2_entry(struct xdp_md *ctx)
{
	if (!ipv4_header(ctx))
		return XDP_PASS;
	bpf_tail_call(ctx, &iproute2_calls, STAGE_ONE);
	return XDP_ABORTED;
}

__attribute__((section("2/0x10"), used)) /* CALLS_ID / STAGE_TWO */
static int stage_two(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	void *data_end = (void *)(long)ctx->data_end;
	struct port_config *config;
	struct udphdr *udp;
	__u32 zero = 0;

	if (!ip)
		return XDP_ABORTED;
	if (ip->saddr == bpf_htonl(CONFIG(TRUSTED_SOURCE)))
		return XDP_TX;
	config = bpf_map_lookup_elem(&iproute2_config, &zero);
	udp = (void *)(ip + 1);
	if (!config || ip->protocol != IPPROTO_UDP || (void *)(udp + 1) > data_end)
		return XDP_PASS;
	return udp->dest == config->blocked_port ? XDP_DROP : XDP_PASS;
}

__attribute__((section("2/1"), used)) /* CALLS_ID / STAGE_ONE */
int stage_one(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *seen = bpf_map_lookup_elem(&iproute2_seen, &zero);

	if (seen)
		*seen += 1;
	TAIL_CALL_STATIC(ctx, iproute2_calls, STAGE_TWO);
	return XDP_ABORTED;
}

#ifdef UNKNOWN_ID
__attribute__((section("7/1"), used))
int nowhere(struct xdp_md *ctx)
{
	return XDP_PASS;
}
#endif

char LICENSE[] SEC("license") = "GPL";
