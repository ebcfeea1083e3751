// SPDX-License-Identifier: GPL-2.0
/* A tracepoint program first, then the XDP program it feeds, as projects
 * put a helper tracepoint beside their data plane: the tracepoint counts
 * the kernel's BPF_PROG_TEST_RUN completions (bpf_test_run/bpf_test_finish)
 * into `finished`, the XDP program drops once the count reaches the limit
 * a read-only map holds. Only the XDP program can be fuzzed or benched
 * (BPF_PROG_TEST_RUN cannot run a tracepoint program); the tracepoint
 * must be attached for the count to move. When `counted_tgid` holds a
 * process id, only that process's test runs count (tests count their own
 * runs exactly, whatever else runs on the machine). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} limit SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} finished SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} counted_tgid SEC(".maps");

SEC("tracepoint/bpf_test_run/bpf_test_finish")
int count_test_runs(void *ctx)
{
	__u32 zero = 0;
	__u64 *count = bpf_map_lookup_elem(&finished, &zero);
	__u32 *only = bpf_map_lookup_elem(&counted_tgid, &zero);

	if (only && *only && *only != bpf_get_current_pid_tgid() >> 32)
		return 0;
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

SEC("xdp")
int gate(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *most = bpf_map_lookup_elem(&limit, &zero);
	__u64 *count = bpf_map_lookup_elem(&finished, &zero);

	if (!most || !count)
		return XDP_ABORTED;
	return *most && *count >= *most ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
