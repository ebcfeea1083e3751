; Every program entry starts with the guard call; a non-negative answer is
; returned as the verdict, and static allocas stay in the entry block.
;
; RUN: morpheus-opt %s -passes= --guard-version 7 | FileCheck %s
; RUN: morpheus-opt %s -passes= | FileCheck %s --check-prefix=UNGUARDED

; CHECK-LABEL: define i32 @first(ptr %ctx)
; CHECK-NEXT:  morpheus.guard:
; CHECK-NEXT:    %slot = alloca i32
; CHECK-NEXT:    [[G:%.*]] = call i64 @morpheus_guard_enter(ptr %ctx, i64 7, i32 0)
; CHECK-NEXT:    [[OK:%.*]] = icmp slt i64 [[G]], 0
; CHECK-NEXT:    br i1 [[OK]], label %entry, label %morpheus.fallback
; CHECK:       morpheus.fallback:
; CHECK-NEXT:    [[V:%.*]] = trunc i64 [[G]] to i32
; CHECK-NEXT:    ret i32 [[V]]
; CHECK-LABEL: define i32 @second(ptr %ctx)
; CHECK:         call i64 @morpheus_guard_enter(ptr %ctx, i64 7, i32 1)
; Helpers of the programs are not entries.
; CHECK-LABEL: define internal i32 @helper(
; CHECK-NOT:     @morpheus_guard_enter
; CHECK:         ret i32

; UNGUARDED-NOT: call i64 @morpheus_guard_enter

target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

declare i64 @morpheus_guard_enter(ptr, i64, i32)

define i32 @first(ptr %ctx) section "xdp" {
entry:
  %slot = alloca i32
  store i32 1, ptr %slot
  %v = load i32, ptr %slot
  ret i32 %v
}

define i32 @second(ptr %ctx) section "xdp" {
entry:
  %r = call i32 @helper(i32 2)
  ret i32 %r
}

define internal i32 @helper(i32 %x) {
  ret i32 %x
}
