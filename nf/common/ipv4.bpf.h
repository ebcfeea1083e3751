/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The IPv4 header checksum for XDP programs, shared by the network
 * functions' data planes, without helper calls. Plain libbpf-style BPF C
 * that needs nothing of Morpheus.
 */
#ifndef NF_COMMON_IPV4_BPF_H
#define NF_COMMON_IPV4_BPF_H

#include <linux/ip.h>
#include <linux/types.h>

/* The one's-complement sum of the fixed 20-byte header at `ip`, folded to
 * 16 bits (RFC 1071). A received header is intact when it sums to 0xffff
 * (its checksum field included); a header being written with a zero
 * checksum field gets ~sum there. The sum is the same in either byte
 * order, so the words are taken as they sit in the packet. */
static __always_inline __u32 ipv4_header_sum(const struct iphdr *ip)
{
	const __u16 *word = (const __u16 *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*ip) / 2); i++)
		sum += word[i];
	/* Two folds suffice for the ten words of the header. */
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

#endif /* NF_COMMON_IPV4_BPF_H */
