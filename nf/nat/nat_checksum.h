/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internet checksum arithmetic for header rewrites, without helper calls
 * (bpf_csum_diff costs more than the handful of adds it replaces here).
 *
 * Incremental update, RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'). Every
 * 16-bit word that changes contributes ~m + m' to one 32-bit "delta"; the
 * deltas of several words simply add up, and are folded into the checksum
 * once. One's-complement sums do not depend on byte order, so words are
 * taken as they sit in the packet.
 */
#ifndef NF_NAT_CHECKSUM_H
#define NF_NAT_CHECKSUM_H

#include <linux/types.h>

static __always_inline __u32 csum_fold16(__u32 sum)
{
	/* Two folds suffice for sums of a few dozen 16-bit words. */
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

static __always_inline __u32 csum_delta16(__u16 old, __u16 new)
{
	return (__u16)~old + (__u32)new;
}

static __always_inline __u32 csum_delta32(__u32 old, __u32 new)
{
	return csum_delta16(old >> 16, new >> 16) + csum_delta16(old & 0xffff, new & 0xffff);
}

static __always_inline __u16 csum_apply(__u16 check, __u32 delta)
{
	return ~csum_fold16((__u16)~check + delta);
}

#endif /* NF_NAT_CHECKSUM_H */
