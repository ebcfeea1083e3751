// SPDX-License-Identifier: GPL-2.0
/*
 * l2switch: an 802.1Q Ethernet switch in XDP, attached to every port.
 *
 * Ports are interfaces, configured by the control plane in `ports` as
 * access (one VLAN, untagged) or trunk (a set of tagged VLANs, optionally
 * one native VLAN untagged). A frame is classified into a VLAN on ingress;
 * its source MAC is learned into `fdb` here, in the data plane; a known
 * unicast destination is redirected through `tx_ports` with the tag pushed
 * or popped to suit the egress port; everything else is flooded within the
 * VLAN.
 *
 * Flooding. A broadcast redirect sends the same bytes to every port of a
 * DEVMAP, so the tag cannot differ per egress port. Each VLAN therefore has
 * two flood groups, the ports that carry it untagged and those that carry it
 * tagged (inner DEVMAP_HASHes of `flood_groups`, found through `vlans`).
 * When, leaving out the ingress port, only one group has members, the frame
 * is put into that encapsulation and broadcast to it. When both have, one
 * XDP verdict cannot serve them, so the frame goes to the stack unchanged
 * (STAT_FLOOD_TO_STACK): enslave the ports to a VLAN-aware Linux bridge
 * configured alike if such VLANs must flood.
 *
 * Odd frames: 802.1ad and stacked 802.1Q tags are dropped (a C-VLAN switch
 * must not carry customer tags it cannot see through); a tagged frame on an
 * access port is dropped, including priority tags (VID 0); untagged frames
 * on a trunk without a native VLAN are dropped; multicast source MACs are
 * dropped; IEEE link-local groups 01:80:c2:00:00:0x are passed to the stack
 * and never forwarded; frames from interfaces that are not ports are passed.
 *
 *   ports         HASH ifindex -> mode, untagged VLAN, VLAN bitmap   read-only
 *   vlans         ARRAY[4096] vid -> member counts, flood group ids  read-only
 *   tx_ports      DEVMAP_HASH ifindex -> ifindex (unicast egress)    read-only
 *   flood_groups  HASH_OF_MAPS id -> DEVMAP_HASH of member ports     read-only
 *   fdb           HASH {MAC, VLAN} -> {port, flags, last seen}       written: new and
 *                                                                    moved MACs, stamps
 *                                                                    older than 1 s
 *   stats         PERCPU_ARRAY outcome and learning counters         written per packet
 *
 * Aging is the control plane's (`morpheus nf l2switch age`).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "l2switch.h"
#include "../common/counters.bpf.h"

#define VLAN_VID_MASK 0x0fff

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, L2SW_PORTS_MAX);
	__type(key, __u32);
	__type(value, struct l2sw_port);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L2SW_VLAN_IDS);
	__type(key, __u32);
	__type(value, struct l2sw_vlan);
} vlans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, L2SW_PORTS_MAX);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

struct flood_group {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, L2SW_PORTS_MAX);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, L2SW_FLOOD_GROUPS_MAX);
	__type(key, __u32);
	__array(values, struct flood_group);
} flood_groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, L2SW_FDB_MAX);
	__type(key, struct l2sw_fdb_key);
	__type(value, struct l2sw_fdb_entry);
} fdb SEC(".maps");

NF_COUNTERS(stats, STAT_MAX);

static __always_inline int carries(const struct l2sw_port *port, __u16 vlan)
{
	vlan &= VLAN_VID_MASK;
	return (port->member[vlan >> 6] >> (vlan & 63)) & 1;
}

/* Whether `port` sends VLAN `vlan` (which it carries) tagged. */
static __always_inline int sends_tagged(const struct l2sw_port *port, __u16 vlan)
{
	return vlan != port->untagged_vlan;
}

static __always_inline int is_link_local(const __u8 *mac)
{
	return mac[0] == 0x01 && mac[1] == 0x80 && mac[2] == 0xc2 && mac[3] == 0 &&
	       mac[4] == 0 && (mac[5] & 0xf0) == 0;
}

static __always_inline void learn(const __u8 *mac, __u16 vlan, __u32 ifindex)
{
	struct l2sw_fdb_key key = { .vlan = vlan };
	struct l2sw_fdb_entry fresh = { .ifindex = ifindex };
	struct l2sw_fdb_entry *entry;
	__u64 now = bpf_ktime_get_coarse_ns();

	__builtin_memcpy(key.mac, mac, ETH_ALEN);
	entry = bpf_map_lookup_elem(&fdb, &key);
	/* Known entries are changed in place (aligned stores, no helper call). */
	if (entry) {
		if (entry->flags & L2SW_FDB_STATIC)
			return;
		if (entry->ifindex != ifindex) {
			entry->ifindex = ifindex;
			entry->last_seen_ns = now;
			nf_bump(&stats, STAT_LEARNED);
		} else if (now - entry->last_seen_ns > L2SW_FDB_REFRESH_NS) {
			entry->last_seen_ns = now;
		}
		return;
	}
	fresh.last_seen_ns = now;
	if (bpf_map_update_elem(&fdb, &key, &fresh, BPF_NOEXIST))
		nf_bump(&stats, STAT_LEARN_FAILED);
	else
		nf_bump(&stats, STAT_LEARNED);
}

/*
 * Brings the frame to the wanted encapsulation of `vlan`: pushes a tag
 * (PCP 0) onto an untagged frame or pops the tag of a tagged one; a tagged
 * frame that stays tagged keeps its TCI. Returns 0, or -1 when the head
 * cannot be moved. Packet pointers are invalid afterwards.
 */
static __always_inline int encapsulate(struct xdp_md *ctx, int tagged, int want_tagged,
				       __u16 vlan)
{
	const int tag_len = sizeof(struct l2sw_vlan_tag);
	void *data, *data_end;
	__u8 macs[2 * ETH_ALEN];

	if (tagged == want_tagged)
		return 0;
	if (want_tagged) {
		struct l2sw_vlan_tag *tag;
		if (bpf_xdp_adjust_head(ctx, -tag_len))
			return -1;
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		if (data + ETH_HLEN + tag_len > data_end)
			return -1;
		/* The old EtherType, now after the tag, is already in place. */
		__builtin_memcpy(macs, data + tag_len, sizeof(macs));
		__builtin_memcpy(data, macs, sizeof(macs));
		((struct ethhdr *)data)->h_proto = bpf_htons(ETH_P_8021Q);
		tag = data + ETH_HLEN;
		tag->tci = bpf_htons(vlan);
		return 0;
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + ETH_HLEN + tag_len > data_end)
		return -1;
	__builtin_memcpy(macs, data, sizeof(macs));
	__builtin_memcpy(data + tag_len, macs, sizeof(macs));
	return bpf_xdp_adjust_head(ctx, tag_len) ? -1 : 0;
}

static __always_inline int flood(struct xdp_md *ctx, const struct l2sw_port *in_port,
				 __u16 vlan, int tagged)
{
	__u32 vid = vlan;
	struct l2sw_vlan *info = bpf_map_lookup_elem(&vlans, &vid);
	__u32 untagged, tagged_out, group;
	void *members;
	int want_tagged;

	if (!info)
		return nf_count(&stats, STAT_DROP_NO_MEMBERS, XDP_DROP);
	untagged = info->untagged_ports;
	tagged_out = info->tagged_ports;
	/* The ingress port is a member; the redirect leaves it out. */
	if (sends_tagged(in_port, vlan)) {
		if (tagged_out)
			tagged_out--;
	} else if (untagged) {
		untagged--;
	}
	if (untagged && tagged_out)
		return nf_count(&stats, STAT_FLOOD_TO_STACK, XDP_PASS);
	if (!untagged && !tagged_out)
		return nf_count(&stats, STAT_DROP_NO_MEMBERS, XDP_DROP);
	want_tagged = tagged_out != 0;
	group = want_tagged ? info->tagged_group : info->untagged_group;
	members = bpf_map_lookup_elem(&flood_groups, &group);
	if (!members)
		return nf_count(&stats, STAT_DROP_NO_MEMBERS, XDP_DROP);
	if (encapsulate(ctx, tagged, want_tagged, vlan))
		return nf_count(&stats, STAT_DROP_NO_ROOM, XDP_DROP);
	return nf_count(&stats, STAT_FLOOD, bpf_redirect_map(members, 0,
						  BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS));
}

SEC("xdp")
int l2switch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 in = ctx->ingress_ifindex;
	struct l2sw_port *port, *out_port;
	struct l2sw_fdb_key dst = {};
	struct l2sw_fdb_entry *entry;
	__u32 out;
	__u16 vlan;
	int tagged, verdict;

	port = bpf_map_lookup_elem(&ports, &in);
	if (!port)
		return nf_count(&stats, STAT_PASS_NOT_A_PORT, XDP_PASS);
	if ((void *)(eth + 1) > data_end)
		return nf_count(&stats, STAT_DROP_MALFORMED, XDP_DROP);
	if (is_link_local(eth->h_dest))
		return nf_count(&stats, STAT_PASS_LINK_LOCAL, XDP_PASS);
	if (eth->h_proto == bpf_htons(ETH_P_8021AD))
		return nf_count(&stats, STAT_DROP_QINQ, XDP_DROP);

	tagged = eth->h_proto == bpf_htons(ETH_P_8021Q);
	if (tagged) {
		struct l2sw_vlan_tag *tag = (void *)(eth + 1);
		if ((void *)(tag + 1) > data_end)
			return nf_count(&stats, STAT_DROP_MALFORMED, XDP_DROP);
		if (port->mode != L2SW_TRUNK)
			return nf_count(&stats, STAT_DROP_TAGGED_ON_ACCESS, XDP_DROP);
		if (tag->encapsulated_proto == bpf_htons(ETH_P_8021Q) ||
		    tag->encapsulated_proto == bpf_htons(ETH_P_8021AD))
			return nf_count(&stats, STAT_DROP_QINQ, XDP_DROP);
		vlan = bpf_ntohs(tag->tci) & VLAN_VID_MASK;
	} else {
		vlan = port->untagged_vlan;
	}
	if (!vlan || !carries(port, vlan))
		return nf_count(&stats, STAT_DROP_VLAN_NOT_ALLOWED, XDP_DROP);
	if (eth->h_source[0] & 1)
		return nf_count(&stats, STAT_DROP_BAD_SOURCE, XDP_DROP);

	learn(eth->h_source, vlan, in);

	if (!(eth->h_dest[0] & 1)) {
		__builtin_memcpy(dst.mac, eth->h_dest, ETH_ALEN);
		dst.vlan = vlan;
		entry = bpf_map_lookup_elem(&fdb, &dst);
		out = entry ? entry->ifindex : 0;
		if (out == in)
			return nf_count(&stats, STAT_DROP_SAME_PORT, XDP_DROP);
		out_port = out ? bpf_map_lookup_elem(&ports, &out) : NULL;
		/* Unknown, or learned before its port left the VLAN: flood. */
		if (out_port && carries(out_port, vlan)) {
			if (encapsulate(ctx, tagged, sends_tagged(out_port, vlan), vlan))
				return nf_count(&stats, STAT_DROP_NO_ROOM, XDP_DROP);
			verdict = bpf_redirect_map(&tx_ports, out, XDP_DROP);
			return nf_count(&stats, verdict == XDP_REDIRECT ? STAT_FORWARD : STAT_DROP_NO_EGRESS,
				     verdict);
		}
	}
	return flood(ctx, port, vlan, tagged);
}

char LICENSE[] SEC("license") = "GPL";
