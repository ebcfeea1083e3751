// SPDX-License-Identifier: GPL-2.0
/* Four small read-only tables, each looked up with a different header
 * field; every hit gives a window (offset into the packet) that is bounds
 * checked against the packet's end and read. With 64 entries per table
 * inlined as constants, every combination of hits is a distinct state to
 * the verifier: 65^4 of them. */
#include "common.h"

struct window {
	__u16 offset;
	__u16 length;
};

#define WINDOW_TABLE(name)                                                     \
	struct {                                                               \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, 64);                                       \
		__type(key, __u32);                                            \
		__type(value, struct window);                                  \
	} name SEC(".maps")

WINDOW_TABLE(by_source);
WINDOW_TABLE(by_destination);
WINDOW_TABLE(by_id);
WINDOW_TABLE(by_checksum);

/* The window's offset, or 0 when the key has no entry. */
static __always_inline __u32 offset_of(void *table, __u32 key)
{
	struct window *window = bpf_map_lookup_elem(table, &key);

	return window ? window->offset & 0xff : 0;
}

SEC("xdp")
int chains_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 at[4];
	__u32 sum = 0;

	if (!ip)
		return XDP_PASS;
	/* All four offsets are known before any is used: every combination
	 * of hits is live at once. */
	at[0] = offset_of(&by_source, ip->saddr);
	at[1] = offset_of(&by_destination, ip->daddr);
	at[2] = offset_of(&by_id, ip->id);
	at[3] = offset_of(&by_checksum, ip->check);
	for (int i = 0; i < 4; i++) {
		__u8 *window = data + at[i];

		if ((void *)(window + 4) > data_end)
			return XDP_ABORTED;
		sum += window[0] ^ window[3];
	}
	return sum & 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
