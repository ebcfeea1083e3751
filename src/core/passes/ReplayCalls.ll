; In a copy that shadow validation or the fuzzer compares, every call of a
; helper whose answer differs from run to run (for eBPF: the random number,
; the clocks) calls the replay runtime instead, which the backend links in;
; the call's own type is kept (the runtime's 64-bit answer, a 32-bit number
; zero-extended as the helper leaves it in r0, narrowed for a program that
; asks 32 bits of the random helper). Other helpers (the CPU id) and
; everything else stay as they are.
;
; From (clang-19 -O2 -target bpf -emit-llvm -S, names given by hand):
;   SEC("xdp") int sample(struct xdp_md *ctx) {
;     __u64 now = bpf_ktime_get_coarse_ns();
;     if (bpf_get_prandom_u32() % 100 < 10) return XDP_DROP;
;     return now & 1 ? XDP_PASS : XDP_TX;
;   }
;   SEC("xdp") int wide(struct xdp_md *ctx) {
;     __u64 (*random64)(void) = (void *)7;
;     return random64() > 5 ? XDP_PASS : XDP_DROP;
;   }
;   SEC("xdp") int other(struct xdp_md *ctx) {
;     return bpf_get_smp_processor_id() ? XDP_PASS : XDP_DROP;
;   }
;
; RUN: morpheus-opt %s --replay-calls | FileCheck %s

; CHECK-LABEL: define i32 @sample(ptr %ctx)
; CHECK-NEXT:    %now = call i64 @morpheus_replay_ktime_get_coarse_ns()
; The program asks 32 bits of the random helper: the runtime's answer is
; narrowed to them.
; CHECK-NEXT:    [[R32:%.*]] = call i64 @morpheus_replay_random()
; CHECK-NEXT:    %random = trunc i64 [[R32]] to i32
; CHECK-NEXT:    %percent = urem i32 %random, 100
; CHECK-NOT:     inttoptr
; CHECK:         ret i32
; The program asks 64 bits: the runtime's answer as it is.
; CHECK-LABEL: define i32 @wide(ptr %ctx)
; CHECK-NEXT:    %random = call i64 @morpheus_replay_random()
; CHECK-NEXT:    %big = icmp ugt i64 %random, 5
; Not replayed: the CPU id is the same for every copy (the checks run on
; one CPU).
; CHECK-LABEL: define i32 @other(ptr %ctx)
; CHECK-NEXT:    %cpu = call i32 inttoptr (i64 8 to ptr)()
; CHECK:       declare i64 @morpheus_replay_ktime_get_coarse_ns()
; CHECK:       declare i64 @morpheus_replay_random()
; CHECK:       ; replayed 3 calls

target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

define i32 @sample(ptr %ctx) section "xdp" {
  %now = call i64 inttoptr (i64 160 to ptr)()
  %random = call i32 inttoptr (i64 7 to ptr)()
  %percent = urem i32 %random, 100
  %sampled = icmp ult i32 %percent, 10
  br i1 %sampled, label %drop, label %pass

pass:
  %odd = and i64 %now, 1
  %even = icmp eq i64 %odd, 0
  %verdict = select i1 %even, i32 3, i32 2
  ret i32 %verdict

drop:
  ret i32 1
}

define i32 @wide(ptr %ctx) section "xdp" {
  %random = call i64 inttoptr (i64 7 to ptr)()
  %big = icmp ugt i64 %random, 5
  %verdict = select i1 %big, i32 2, i32 1
  ret i32 %verdict
}

define i32 @other(ptr %ctx) section "xdp" {
  %cpu = call i32 inttoptr (i64 8 to ptr)()
  %zero = icmp eq i32 %cpu, 0
  %verdict = select i1 %zero, i32 1, i32 2
  ret i32 %verdict
}
