/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The map layouts of the lb load balancer and the two computations both
 * sides must agree on bit for bit: the flow hash that picks a ring slot and
 * the QUIC connection-id format that names a real. Shared by the BPF data
 * plane and the C++ control plane and tests, so they cannot drift apart.
 *
 * Multi-byte address and port fields are in network byte order, exactly as
 * they appear in the packet.
 */
#ifndef NF_LB_H
#define NF_LB_H

#include <linux/types.h>

/* Slots per VIP in the consistent-hashing ring; prime, so every Maglev
 * permutation (offset + i * skip mod size) visits every slot. */
#define LB_RING_SIZE 65537u

/* Defaults for the table sizes; the control plane reads the real sizes from
 * the loaded maps, so an object built with -DLB_MAX_VIPS=... just works. */
#ifndef LB_MAX_VIPS
#define LB_MAX_VIPS 32
#endif
#ifndef LB_MAX_REALS
#define LB_MAX_REALS 4096
#endif
#ifndef LB_FLOW_ENTRIES
#define LB_FLOW_ENTRIES 262144
#endif

/* Real index 0 is never assigned: a ring slot holding 0 has no real. */
#define LB_NO_REAL 0u

#define LB_VIP_QUIC (1u << 0) /* UDP VIP speaking QUIC: route by connection id */

#define LB_REAL_ACTIVE (1u << 0) /* the slot describes a real */
#define LB_REAL_GUE (1u << 1)    /* encapsulate in GUE (UDP) rather than IP-in-IP */

/* Default outer UDP destination port for GUE reals. */
#define LB_GUE_DEFAULT_PORT 6080
/* GUE source ports: the ephemeral range, low bits from the flow hash so the
 * real's NIC spreads flows over its receive queues. */
#define LB_GUE_SPORT_BASE 0xc000u
#define LB_GUE_SPORT_HASH_MASK 0x3fffu

/*
 * Server-chosen QUIC connection ids that the balancer can route: the first
 * two bytes, big-endian, are 01 in the top two bits followed by the 14-bit
 * real index. Servers behind a QUIC VIP issue ids of this form (any length
 * >= 2; the rest is theirs); anything else falls back to the flow hash.
 */
#define LB_QUIC_CID_TAG 0x4000u
#define LB_QUIC_CID_TAG_MASK 0xc000u
#define LB_QUIC_CID_REAL_MASK 0x3fffu
#define LB_QUIC_CID_MIN_LEN 2

#if LB_MAX_REALS > LB_QUIC_CID_REAL_MASK + 1
#error "QUIC connection ids carry 14-bit real indexes"
#endif

struct lb_vip_key {
	__be32 addr;
	__be16 port;
	__u8 proto; /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;   /* always 0 */
};

struct lb_vip {
	__u32 flags; /* LB_VIP_* */
	__u32 index; /* ring number and vip_stats slot */
};

struct lb_real {
	__be32 addr;
	__u32 flags; /* LB_REAL_*; 0 = free slot */
};

/* Written by the data plane for each new flow. */
struct lb_flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3]; /* always 0 */
};

struct lb_flow {
	__u32 real;
	__u32 pad;
	__u64 last_seen_ns; /* bpf_ktime_get_coarse_ns() = CLOCK_MONOTONIC_COARSE */
};

struct lb_config {
	__be32 source;      /* outer source address ... */
	__be32 source_mask; /* ... with these bits taken from the client's address */
	__u8 gateway_mac[6];
	__u8 ttl;           /* outer TTL */
	__u8 pad;
	__be16 gue_port;    /* outer UDP destination port for GUE reals */
	__u16 pad2;
};

struct lb_vip_counters {
	__u64 packets;
	__u64 bytes; /* frame bytes as received, before encapsulation */
};

enum lb_event {
	LB_EV_FLOW_NEW,     /* real picked from the ring and remembered */
	LB_EV_FLOW_HIT,     /* real taken from the flow table */
	LB_EV_QUIC_CID,     /* QUIC packet routed by its connection id */
	LB_EV_QUIC_HASHED,  /* QUIC packet without a usable connection id */
	LB_EV_NO_REAL,      /* VIP has no active real for this packet: dropped */
	LB_EV_MALFORMED,    /* truncated or inconsistent headers: dropped */
	LB_EV_FRAGMENT,     /* IPv4 fragment: left to the stack */
	LB_EV_ENCAP_FAILED, /* no headroom for the outer header: dropped */
	LB_EV_MAX,
};

static inline __u32 lb_mix32(__u32 x)
{
	/* A xorshift-multiply finalizer: every input bit flips about half of
	 * the output bits, so neighbouring ports land on unrelated slots. */
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

/* Over the raw (network order) header words, so BPF needs no byte swaps;
 * user space computes the same value on a host of the same endianness. */
static inline __u32 lb_flow_hash(const struct lb_flow_key *flow)
{
	__u32 h = lb_mix32(flow->saddr ^ 0x9e3779b9u);
	h = lb_mix32(h ^ flow->daddr);
	h = lb_mix32(h ^ (flow->sport | ((__u32)flow->dport << 16)));
	return lb_mix32(h ^ flow->proto);
}

#endif /* NF_LB_H */
