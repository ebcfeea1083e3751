// SPDX-License-Identifier: GPL-2.0
/*
 * A prefetch function that counts what it sees, for
 * tests/user/PrefetchTest.cpp: it writes a table, which a prefetch
 * function (run on packets the handler has not seen) must never do, so
 * the runtime refuses the handler.
 */
#include <morpheus_user.h>

MU_TABLE(seen, MU_ARRAY, uint32_t, uint64_t, 1);

MU_PREFETCH void counting_prefetch(const struct mu_packet *packet)
{
	uint32_t zero = 0;
	uint64_t *count = mu_lookup(&seen, &zero);

	if (count)
		*count += packet->len;
}

MU_HANDLER int counting(struct mu_packet *packet)
{
	return packet->len ? MU_TX : MU_DROP;
}
