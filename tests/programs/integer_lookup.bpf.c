// SPDX-License-Identifier: GPL-2.0
/* The lookup helper declared by hand with an integer return type, as older
 * code does: only whether the result is zero is used. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name

static long (*lookup_as_long)(void *map, const void *key) = (void *)1;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} blocked SEC(".maps");

SEC("xdp")
int integer_prog(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	__u32 address;

	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	address = ip->saddr;
	return lookup_as_long(&blocked, &address) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
