// SPDX-License-Identifier: GPL-2.0
/* Session tables swept with bpf_for_each_map_elem, as a NAT64 gateway
 * expires its bindings: one callback walks two tables and deletes the stale
 * entries through the map it is handed, which is the map of the call that
 * runs it. The LPM allow-list beside them is configuration, only read: the
 * sweep's deletes must not make it written. The clock is the packet's IP id,
 * so that every version sees the same time. */
#include "common.h"
#include <linux/in.h>

struct bpf_map;

struct session {
	__u32 last;
	__u32 packets;
};

struct session_table {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct session);
};

struct session_table sessions_tcp SEC(".maps");
struct session_table sessions_udp SEC(".maps");

struct v4_prefix {
	__u32 prefixlen;
	__u32 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 16);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct v4_prefix);
	__type(value, __u32);
} allowed SEC(".maps");

struct sweep {
	__u32 now;
	__u32 removed;
};

static long expire(struct bpf_map *map, __u32 *source, struct session *session,
		   struct sweep *sweep)
{
	if (sweep->now - session->last > 8) {
		bpf_map_delete_elem(map, source);
		sweep->removed++;
	}
	return 0;
}

SEC("xdp")
int for_each_sweep(struct xdp_md *ctx)
{
	struct iphdr *ip = ipv4_header(ctx);
	struct v4_prefix prefix = {32, 0};
	struct session fresh = {};
	struct sweep sweep = {};
	__u32 *verdict, source;

	if (!ip)
		return XDP_PASS;
	prefix.addr = ip->saddr;
	verdict = bpf_map_lookup_elem(&allowed, &prefix);
	if (!verdict)
		return XDP_DROP;
	source = ip->saddr;
	sweep.now = bpf_ntohs(ip->id);
	fresh.last = sweep.now;
	fresh.packets = 1;
	bpf_map_update_elem(ip->protocol == IPPROTO_TCP ? (void *)&sessions_tcp
							: (void *)&sessions_udp,
			    &source, &fresh, BPF_ANY);
	bpf_for_each_map_elem(&sessions_tcp, expire, &sweep, 0);
	bpf_for_each_map_elem(&sessions_udp, expire, &sweep, 0);
	if (sweep.removed > 4)
		return XDP_ABORTED;
	return *verdict == 1 ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
