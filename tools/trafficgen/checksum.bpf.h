/* SPDX-License-Identifier: GPL-2.0 */
/* Internet checksum pieces shared by the generator (which writes checksums)
 * and the test receiver (which verifies them). */
#ifndef TRAFFICGEN_CHECKSUM_BPF_H
#define TRAFFICGEN_CHECKSUM_BPF_H

#include <linux/types.h>

/* One's-complement partial sum of `words` 16-bit words. */
static __always_inline __u32 sum16(const void *start, int words)
{
	const __u16 *word = start;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < words; i++)
		sum += word[i];
	return sum;
}

/* Folds a partial sum to 16 bits (not inverted: a header whose checksum
 * field is right folds to 0xffff; the field to write is the inverse). */
static __always_inline __u16 fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

#endif
