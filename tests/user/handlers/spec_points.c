// SPDX-License-Identifier: GPL-2.0
/*
 * A handler with every kind of specialization point (morpheus_spec.h), for
 * tests/user/SpecPointsTest.cpp: a sum over the first `rounds` payload bytes
 * (rounds comes from the packet: a value point), an assumption on the
 * length, and a point placed after a counter update, which the core must
 * decline (the generic handler could not start over after the write).
 *
 *   byte 14 & 15  rounds (the sum's length); the result goes to byte 15
 *   len <= 128    TX out of port 1, else port 2
 *   byte 16       scaled by a generic point after the counter: byte 17
 */
#include <morpheus_spec.h>
#include <morpheus_user.h>

MU_TABLE(stats, MU_ARRAY, uint32_t, uint64_t, 2);

MU_HANDLER int spec_points(struct mu_packet *packet)
{
	uint32_t zero = 0, rounds, sum = 0, i;
	uint64_t *count;
	uint8_t scale;

	if (packet->len < 18 + 16)
		return MU_DROP;
	rounds = spec_enum("rounds", packet->data[14] & 15u, 1, 2, 4, 8);
	spec_assume("short", packet->len <= 128);
	for (i = 0; i < rounds; i++)
		sum = sum * 31 + packet->data[18 + i];
	packet->data[15] = (uint8_t)sum;

	count = mu_lookup(&stats, &zero);
	if (count)
		*count += 1;
	scale = spec_generic("late", packet->data[16]);
	packet->data[17] = (uint8_t)(packet->data[17] * scale);
	packet->port = packet->len <= 128 ? 1 : 2;
	return MU_TX;
}
