// SPDX-License-Identifier: GPL-2.0
/*
 * A table the handler writes, for the user-space write guards
 * (backend/user/WriteCounters.h, core's guard-table-writes), the
 * counterpart of tests/kernel/learning.bpf.c. A packet starts with a
 * command in host order, {op, flow key, verdict}, followed by 4 bytes the
 * handler answers in:
 *   op 1 learns: a known flow's verdict changed in place (its update count
 *        bumped), a new flow inserted; TX;
 *   op 2 forgets the flow; TX (DROP when it was unknown);
 *   any other op looks the flow up, writes nothing to the table: bytes
 *        16..19 = its verdict (0xffffffff for an unknown flow); TX when
 *        known, PASS otherwise.
 */
#include <morpheus_user.h>

struct flow_key {
	uint32_t addr;
	uint32_t port;
};

struct flow {
	uint32_t verdict;
	uint32_t learned; /* inserted by the handler */
	uint64_t updates; /* changed in place by the handler */
};

struct command {
	uint32_t op;
	struct flow_key key;
	uint32_t verdict;
};

MU_TABLE(flows, MU_HASH, struct flow_key, struct flow, 1024);

MU_HANDLER int learning(struct mu_packet *packet)
{
	struct command command;
	struct flow *flow;
	uint32_t answer;

	if (packet->len < sizeof(command) + sizeof(answer))
		return MU_DROP;
	__builtin_memcpy(&command, packet->data, sizeof(command));
	if (command.op == 1) {
		flow = mu_lookup(&flows, &command.key);
		if (flow) {
			flow->verdict = command.verdict;
			flow->updates++;
			return MU_TX;
		}
		struct flow fresh = { .verdict = command.verdict, .learned = 1 };
		return mu_update(&flows, &command.key, &fresh) ? MU_DROP : MU_TX;
	}
	if (command.op == 2)
		return mu_delete(&flows, &command.key) ? MU_DROP : MU_TX;
	flow = mu_lookup(&flows, &command.key);
	answer = flow ? flow->verdict : 0xffffffffu;
	__builtin_memcpy(packet->data + sizeof(command), &answer, sizeof(answer));
	return flow ? MU_TX : MU_PASS;
}
