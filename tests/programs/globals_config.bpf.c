// SPDX-License-Identifier: GPL-2.0
/* Configuration in writable globals, as loaders built on skeletons keep it
 * (they write .bss and .data through mmap, bypassing any guard), beside
 * counters the program keeps in globals too: `blocked_ttl` and `settings`
 * are only read, `packets` is counted, and `feature` holds a switch beside
 * a hit counter. */
#include "common.h"

__u32 blocked_ttl; /* .bss */

struct settings {
	__u32 mode;
	__u32 tos_mark;
};
struct settings settings = { 1, 5 }; /* .data */

__u64 packets; /* .bss, written by the program */

struct feature {
	__u32 enabled;
	__u32 hits;
};
struct feature feature = { 1, 0 }; /* .data: a switch beside a counter */

SEC("xdp")
int globals_config_prog(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);

	__sync_fetch_and_add(&packets, 1);
	if (!ip)
		return XDP_PASS;
	if (ip->ttl == blocked_ttl)
		return XDP_DROP;
	if (feature.enabled) {
		__sync_fetch_and_add(&feature.hits, 1);
		if (ip->tos == settings.tos_mark)
			return XDP_TX;
	}
	return settings.mode == 2 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
