// SPDX-License-Identifier: GPL-2.0
/*
 * One LPM lookup whose answer is written into the packet, for
 * tests/user/LpmTemplatesTest.cpp: what the routes table answers (or that
 * it has no answer) is visible in every packet, so a specialized lookup
 * (lpm-as-code's search) is compared with the table's own, prefix by
 * prefix. LPM_KIND picks the table (MU_LPM_DIR24 by default).
 *
 *   bytes 0..3   the key's prefix length (host order; 32 for a packet)
 *   bytes 4..7   the address (network order)
 *   hit          bytes 8..11 = the value, TX out of port 1
 *   miss         bytes 8..11 = 0xffffffff, DROP
 */
#include <morpheus_user.h>

#ifndef LPM_KIND
#define LPM_KIND MU_LPM_DIR24
#endif

struct probe_key {
	uint32_t prefixlen;
	uint32_t address;
};

MU_TABLE(routes, LPM_KIND, struct probe_key, uint32_t, 256);

MU_HANDLER int lpm_probe(struct mu_packet *packet)
{
	struct probe_key key;
	const uint32_t *value;
	uint32_t answer;

	if (packet->len < 12)
		return MU_PASS;
	__builtin_memcpy(&key, packet->data, sizeof(key));
	value = mu_lookup(&routes, &key);
	answer = value ? *value : 0xffffffffu;
	__builtin_memcpy(packet->data + 8, &answer, sizeof(answer));
	if (!value)
		return MU_DROP;
	packet->port = 1;
	return MU_TX;
}
