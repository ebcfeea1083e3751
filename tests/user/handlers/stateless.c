// SPDX-License-Identifier: GPL-2.0
/*
 * A handler that looks nothing up, for tests/user/PrefetchTest.cpp: it
 * sends every frame back out of the port it came in on, MAC addresses
 * swapped. No lookup to prefetch, so no prefetch stage is derived.
 */
#include <morpheus_user.h>

MU_HANDLER int reflect(struct mu_packet *packet)
{
	uint8_t byte;

	if (packet->len < 12)
		return MU_DROP;
	for (int i = 0; i < 6; i++) {
		byte = packet->data[i];
		packet->data[i] = packet->data[6 + i];
		packet->data[6 + i] = byte;
	}
	return MU_TX;
}
