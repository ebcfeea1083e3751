// SPDX-License-Identifier: GPL-2.0
/* An XDP entry declared without its ctx parameter: the verdict comes from a
 * configuration array only. Such an entry has no ctx to tail-call with, so
 * its guard must fall back inside the program. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} verdict SEC(".maps");

SEC("xdp")
int no_ctx(void)
{
	__u32 zero = 0;
	__u32 *action = bpf_map_lookup_elem(&verdict, &zero);

	if (!action || *action > XDP_TX)
		return XDP_ABORTED;
	return *action;
}

char LICENSE[] SEC("license") = "GPL";
