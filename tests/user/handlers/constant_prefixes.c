// SPDX-License-Identifier: GPL-2.0
/*
 * Lookups of a route table with constant keys of short prefix lengths, for
 * tests/user/LpmTemplatesTest.cpp: "is there a default route?" (prefix
 * length 0) and "which route of at most 8 bits covers 10.11.12.13?"
 * (prefix length 8), both with the address 10.11.12.13. The kernel's trie
 * answers such a key with the longest prefix no longer than its length, so
 * a /16 holding the address answers neither. constant-key-lookup answers
 * them from the snapshot as the kernel would; the tables must too.
 * LPM_KIND picks the table (MU_LPM_DIR24 by default). Written for a
 * little-endian host, as the tests run.
 *
 *   bytes 0..3   what the /0 key found (0xffffffff: nothing)
 *   bytes 4..7   what the /8 key found
 */
#include <morpheus_user.h>

#ifndef LPM_KIND
#define LPM_KIND MU_LPM_DIR24
#endif

struct route_key {
	uint32_t prefixlen;
	uint32_t address; /* network order */
};

MU_TABLE(routes, LPM_KIND, struct route_key, uint32_t, 16);

static inline __attribute__((always_inline)) uint32_t answer(uint32_t prefixlen)
{
	struct route_key key = {prefixlen, __builtin_bswap32(0x0a0b0c0du)};
	const uint32_t *value = mu_lookup(&routes, &key);

	return value ? *value : 0xffffffffu;
}

MU_HANDLER int constant_prefixes(struct mu_packet *packet)
{
	uint32_t whole = answer(0), short_route = answer(8);

	if (packet->len < 8)
		return MU_PASS;
	__builtin_memcpy(packet->data, &whole, sizeof(whole));
	__builtin_memcpy(packet->data + 4, &short_route, sizeof(short_route));
	packet->port = 1;
	return MU_TX;
}
