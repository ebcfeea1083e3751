/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading the real index out of a QUIC packet's destination connection id
 * (RFC 9000 section 17, RFC 9369 for version 2). Only ids the server chose
 * can carry it: those of short-header packets and of Handshake packets.
 * Initial and 0-RTT packets carry an id the client made up (which could
 * match the tag by chance), so they, and anything unrecognised, return
 * LB_NO_REAL and take the flow-hash path.
 */
#ifndef NF_LB_QUIC_H
#define NF_LB_QUIC_H

#include <bpf/bpf_endian.h>
#include <linux/types.h>

#include "lb.h"

#define QUIC_LONG_HEADER 0x80
#define QUIC_FIXED_BIT 0x40
#define QUIC_V1 0x00000001u
#define QUIC_V2 0x6b3343cfu
#define QUIC_V1_HANDSHAKE 2 /* long packet types, bits 5-4 of the first byte */
#define QUIC_V2_HANDSHAKE 3

/* First byte, version, DCID length, and the two id bytes we decode. */
#define QUIC_LONG_PREFIX 8
#define QUIC_LONG_DCID_OFFSET 6
/* First byte and the two id bytes. */
#define QUIC_SHORT_PREFIX 3
#define QUIC_SHORT_DCID_OFFSET 1

static __always_inline int quic_handshake(__u32 version, __u8 first)
{
	__u8 type = (first >> 4) & 3;

	return (version == QUIC_V1 && type == QUIC_V1_HANDSHAKE) ||
	       (version == QUIC_V2 && type == QUIC_V2_HANDSHAKE);
}

/* `payload` is the UDP payload, `length` its size from the UDP header. */
static __always_inline __u32 quic_real_from_cid(const __u8 *payload, __u32 length,
						const void *data_end)
{
	const __u8 *cid;
	__u32 version;
	__u16 word;

	if (payload + 1 > (const __u8 *)data_end || length < 1)
		return LB_NO_REAL;
	if (!(payload[0] & QUIC_FIXED_BIT))
		return LB_NO_REAL;
	if (payload[0] & QUIC_LONG_HEADER) {
		if (payload + QUIC_LONG_PREFIX > (const __u8 *)data_end ||
		    length < QUIC_LONG_PREFIX)
			return LB_NO_REAL;
		__builtin_memcpy(&version, payload + 1, sizeof(version));
		if (!quic_handshake(bpf_ntohl(version), payload[0]) ||
		    payload[5] < LB_QUIC_CID_MIN_LEN)
			return LB_NO_REAL;
		cid = payload + QUIC_LONG_DCID_OFFSET;
	} else {
		if (payload + QUIC_SHORT_PREFIX > (const __u8 *)data_end ||
		    length < QUIC_SHORT_PREFIX)
			return LB_NO_REAL;
		cid = payload + QUIC_SHORT_DCID_OFFSET;
	}
	word = (__u16)cid[0] << 8 | cid[1];
	if ((word & LB_QUIC_CID_TAG_MASK) != LB_QUIC_CID_TAG)
		return LB_NO_REAL;
	return word & LB_QUIC_CID_REAL_MASK;
}

#endif /* NF_LB_QUIC_H */
