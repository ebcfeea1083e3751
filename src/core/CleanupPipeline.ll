; The clean-up a version gets after the table passes (CleanupPipeline.cpp):
; the runtime's internal functions inlined and their constant answers
; folded away, and BPF's adjust-opt run where O2 runs it, so a bounds
; check stays two comparisons the kernel's verifier can follow. The same
; pipeline without BPF's target (the user-space backend has none) merges
; the two into one range check, after which the verifier no longer knows
; that %x is at most 7 where @arr is indexed by it. The IR is written by
; hand in the form clang-19 -O2 -target bpf gives
;   if (holds(7)) { if (x < 1) return 0; if (x > 7) return 0; return arr[x]; }
; with holds() as the guard runtime's functions are: internal, linked in.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= --cleanup | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= --cleanup --backend user | FileCheck %s --check-prefix=NOTARGET

; CHECK-NOT:     define internal i32 @holds(
; CHECK-LABEL:   define {{.*}}i32 @pick(
; CHECK-NEXT:    {{.*}}:
; CHECK-NEXT:      %lo = icmp eq i64 %x, 0
; CHECK-NEXT:      [[KEPT:%.*]] = call i1 @llvm.bpf.passthrough.i1.i1(i32 0, i1 %lo)
; CHECK-NEXT:      %hi = icmp ugt i64 %x, 7
; CHECK-NEXT:      %or.cond = select i1 [[KEPT]], i1 true, i1 %hi
; CHECK-NEXT:      br i1 %or.cond,

; NOTARGET-LABEL: define {{.*}}i32 @pick(
; NOTARGET:         [[SHIFTED:%.*]] = add i64 %x, -8
; NOTARGET-NEXT:    %or.cond = icmp ult i64 [[SHIFTED]], -7
; NOTARGET-NEXT:    br i1 %or.cond,

;--- state.json
{}
;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@arr = dso_local global [10 x i8] zeroinitializer, align 1

define internal i32 @holds(i32 %v) {
  %ok = icmp eq i32 %v, 7
  %r = zext i1 %ok to i32
  ret i32 %r
}

define i32 @pick(i64 %x) section "xdp" {
entry:
  %h = call i32 @holds(i32 7)
  %t = icmp ne i32 %h, 0
  br i1 %t, label %low, label %out
low:
  %lo = icmp ult i64 %x, 1
  br i1 %lo, label %out, label %high
high:
  %hi = icmp ugt i64 %x, 7
  br i1 %hi, label %out, label %load
load:
  %p = getelementptr inbounds [10 x i8], ptr @arr, i64 0, i64 %x
  %b = load i8, ptr %p, align 1
  %v = zext i8 %b to i32
  ret i32 %v
out:
  ret i32 0
}
