// SPDX-License-Identifier: GPL-2.0
/* A classifier as older TC programs read packets: byte loads of the classic
 * kind (BPF_LD_ABS, llvm.bpf.load.byte), beside a clock. The kernel refuses
 * bpf-to-bpf calls in such a program, so the copies shadow validation and
 * the fuzzer compare must not call the replay runtime as a subprogram: they
 * inline it (backend/bpf/ComparedCopy, replayedCallsPatchable). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

unsigned long long load_byte(void *skb, unsigned long long offset) asm("llvm.bpf.load.byte");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);   /* IPv4 protocol */
	__type(value, __u32); /* TC verdict */
} protocol_verdicts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);   /* IPv4 protocol */
	__type(value, __u64); /* bpf_ktime_get_ns() of its latest packet */
} protocol_seen SEC(".maps");

SEC("tc")
int classic_prog(struct __sk_buff *skb)
{
	__u32 protocol;
	__u32 *verdict;
	__u64 *seen;

	if (skb->protocol != __builtin_bswap16(0x0800))
		return TC_ACT_OK;
	protocol = load_byte(skb, 14 + 9);
	seen = bpf_map_lookup_elem(&protocol_seen, &protocol);
	if (seen)
		*seen = bpf_ktime_get_ns();
	verdict = bpf_map_lookup_elem(&protocol_verdicts, &protocol);
	return verdict ? *verdict : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
