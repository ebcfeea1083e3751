; Divisions, remainders and shifts whose divisor or count may be unsafe
; become the machine's defined form before anything is folded; C's no-wrap
; and exact flags are dropped. The IR is what clang-19 -O2 -target bpf
; emits for, e.g.:
;   unsigned spread(unsigned hash, unsigned ncpus) { return hash % ncpus; }
;   unsigned scale(unsigned x, unsigned shift) { return x << shift; }
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= --defined-arithmetic 32 | FileCheck %s --check-prefixes=CHECK,ALU32
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= --defined-arithmetic 64 | FileCheck %s --check-prefixes=CHECK,ALU64
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= --defined-arithmetic 32 --cleanup | FileCheck %s --check-prefix=FOLD32
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= --defined-arithmetic 64 --cleanup | FileCheck %s --check-prefix=FOLD64
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= --defined-arithmetic 32 --division-traps | FileCheck %s --check-prefix=TRAPS
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= | FileCheck %s --check-prefix=OFF

; A remainder by a run-time value: x % 0 is x on the machine.
; CHECK-LABEL: define i32 @spread(
; CHECK:         [[ZERO:%.*]] = icmp eq i32 %ncpus, 0
; CHECK-NEXT:    [[SAFE:%.*]] = select i1 [[ZERO]], i32 1, i32 %ncpus
; CHECK-NEXT:    [[REM:%.*]] = urem i32 %hash, [[SAFE]]
; CHECK-NEXT:    %idx = select i1 [[ZERO]], i32 %hash, i32 [[REM]]
; TRAPS-LABEL: define i32 @spread(
; TRAPS:         %idx = urem i32 %hash, %ncpus
; OFF-LABEL:   define i32 @spread(
; OFF:           %idx = urem i32 %hash, %ncpus

; A quotient by a run-time value: x / 0 is 0.
; CHECK-LABEL: define i32 @quotient(
; CHECK:         [[ZERO:%.*]] = icmp eq i32 %d, 0
; CHECK-NEXT:    [[SAFE:%.*]] = select i1 [[ZERO]], i32 1, i32 %d
; CHECK-NEXT:    [[DIV:%.*]] = udiv i32 %x, [[SAFE]]
; CHECK-NEXT:    %q = select i1 [[ZERO]], i32 0, i32 [[DIV]]

; Signed: also MIN / -1 = MIN (negation wraps) and MIN % -1 = 0.
; CHECK-LABEL: define i64 @signed_quotient(
; CHECK:         [[ZERO:%.*]] = icmp eq i64 %d, 0
; CHECK-NEXT:    [[SAFE:%.*]] = select i1 [[ZERO]], i64 1, i64 %d
; CHECK-NEXT:    [[MINUS:%.*]] = icmp eq i64 %d, -1
; CHECK-NEXT:    [[SAFER:%.*]] = select i1 [[MINUS]], i64 1, i64 [[SAFE]]
; CHECK-NEXT:    [[DIV:%.*]] = sdiv i64 %x, [[SAFER]]
; CHECK-NEXT:    [[NEG:%.*]] = sub i64 0, %x
; CHECK-NEXT:    [[NOTZERO:%.*]] = select i1 [[MINUS]], i64 [[NEG]], i64 [[DIV]]
; CHECK-NEXT:    %q = select i1 [[ZERO]], i64 0, i64 [[NOTZERO]]
; CHECK-LABEL: define i64 @signed_remainder(
; CHECK:         [[DIV:%.*]] = srem i64 %x, {{%.*}}
; CHECK-NEXT:    %r = select i1 {{%.*}}, i64 %x, i64 [[DIV]]

; Divisors known safe stay: a constant, a value with a bit known set.
; CHECK-LABEL: define i32 @safe_divisors(
; CHECK:         %a = udiv i32 %x, 26
; CHECK-NEXT:    %odd = or i32 %d, 1
; CHECK-NEXT:    %b = urem i32 %x, %odd
; CHECK-NEXT:    %c = sdiv i32 %x, 7
; The divisor of a signed division with a bit known set may still be -1.
; CHECK-NOT:     sdiv i32 %x, %odd

; A 32-bit shift by a run-time count: ALU32 masks the count to 31; without
; ALU32 the machine shifts the zero-extended value in 64 bits, masked to 63.
; CHECK-LABEL:  define i32 @scale(
; ALU32:          [[COUNT:%.*]] = and i32 %shift, 31
; ALU32-NEXT:     %s = shl i32 %x, [[COUNT]]
; ALU64:          [[WIDE:%.*]] = zext i32 %x to i64
; ALU64-NEXT:     [[WIDECOUNT:%.*]] = zext i32 %shift to i64
; ALU64-NEXT:     [[COUNT:%.*]] = and i64 [[WIDECOUNT]], 63
; ALU64-NEXT:     [[SHIFTED:%.*]] = shl i64 [[WIDE]], [[COUNT]]
; ALU64-NEXT:     %s = trunc i64 [[SHIFTED]] to i32

; An arithmetic shift of a narrower integer: sign-extended to the register.
; CHECK-LABEL:  define i8 @sign_fill(
; ALU32:          [[WIDE:%.*]] = sext i8 %x to i32
; ALU32:          [[COUNT:%.*]] = and i32 {{%.*}}, 31
; ALU32-NEXT:     [[SHIFTED:%.*]] = ashr i32 [[WIDE]], [[COUNT]]
; ALU32-NEXT:     %s = trunc i32 [[SHIFTED]] to i8
; ALU64:          [[WIDE:%.*]] = sext i8 %x to i64
; ALU64:          and i64 {{%.*}}, 63

; 64-bit shifts mask to 63 on every machine; counts known below the width
; stay.
; CHECK-LABEL:  define i64 @wide_shift(
; CHECK:          [[COUNT:%.*]] = and i64 %n, 63
; CHECK-NEXT:     %s = lshr i64 %x, [[COUNT]]
; CHECK-NEXT:     %small = and i64 %n, 7
; CHECK-NEXT:     %t = lshr i64 %x, %small

; C's signed-overflow flags are dropped: the machine wraps.
; CHECK-LABEL:  define i32 @base_plus_offset(
; CHECK:          %sum = add i32 %base, %off
; CHECK-NEXT:     %grew = icmp sgt i32 %sum, %base
; OFF-LABEL:    define i32 @base_plus_offset(
; OFF:            %sum = add nsw i32 %base, %off

; Constants folded afterwards give the machine's answer, not poison.
; FOLD32-LABEL: define {{.*}}@by_zero(
; FOLD32:         ret i32 %x
; FOLD32-LABEL: define {{.*}}@shift_by_40(
; FOLD32:         shl i32 %x, 8
; FOLD64-LABEL: define {{.*}}@shift_by_40(
; FOLD64:         ret i32 0

;--- state.json
{"tables": {}, "maps": {}}

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

define i32 @spread(i32 %hash, i32 %ncpus) {
  %idx = urem i32 %hash, %ncpus
  ret i32 %idx
}

define i32 @quotient(i32 %x, i32 %d) {
  %q = udiv i32 %x, %d
  ret i32 %q
}

define i64 @signed_quotient(i64 %x, i64 %d) {
  %q = sdiv i64 %x, %d
  ret i64 %q
}

define i64 @signed_remainder(i64 %x, i64 %d) {
  %r = srem i64 %x, %d
  ret i64 %r
}

define i32 @safe_divisors(i32 %x, i32 %d) {
  %a = udiv i32 %x, 26
  %odd = or i32 %d, 1
  %b = urem i32 %x, %odd
  %c = sdiv i32 %x, 7
  %e = sdiv i32 %x, %odd
  %ab = add i32 %a, %b
  %abc = add i32 %ab, %c
  %all = add i32 %abc, %e
  ret i32 %all
}

define i32 @scale(i32 %x, i32 %shift) {
  %s = shl i32 %x, %shift
  ret i32 %s
}

define i8 @sign_fill(i8 %x, i8 %n) {
  %s = ashr i8 %x, %n
  ret i8 %s
}

define i64 @wide_shift(i64 %x, i64 %n) {
  %s = lshr i64 %x, %n
  %small = and i64 %n, 7
  %t = lshr i64 %x, %small
  %st = add i64 %s, %t
  ret i64 %st
}

define i32 @base_plus_offset(i32 %base, i32 %off) {
  %sum = add nsw i32 %base, %off
  %grew = icmp sgt i32 %sum, %base
  %r = zext i1 %grew to i32
  ret i32 %r
}

define i32 @by_zero(i32 %x) {
  %r = urem i32 %x, 0
  ret i32 %r
}

define i32 @shift_by_40(i32 %x) {
  %s = shl i32 %x, 40
  ret i32 %s
}
