; A call of the program's own function that only reads its arguments'
; memory moves to the blocks that use its result (nf/lb's 5-tuple hash:
; used only where the flow table misses and where the real wants GUE), a
; clone before the first use in each. It stays where something on the way
; may write what it reads, where a using block is on every path anyway,
; where its own block uses it, and where the callee may write memory.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=sink-pure-calls | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes= | FileCheck %s --check-prefix=OFF

; The key is read by the lookup (an access call: it only reads its key), not
; written: the hash moves to the miss and to the GUE encapsulation.
; CHECK-LABEL: define i32 @balance(
; CHECK:       entry:
; CHECK-NOT:     call i32 @hash
; CHECK:         br i1 %hit, label %known, label %miss
; CHECK:       miss:
; CHECK-NEXT:    %h = call i32 @hash(ptr %key)
; CHECK-NEXT:    %slot = urem i32 %h, 7
; CHECK:       encap:
; CHECK-NEXT:    %h1 = call i32 @hash(ptr %key)
; CHECK-NEXT:    %port = or i32 %h1, 49152
; CHECK:       done:
; CHECK-NEXT:    ret i32 %s
; OFF-LABEL: define i32 @balance(
; OFF:       entry:
; OFF:           %h = call i32 @hash(ptr %key)

; A phi's use: the clone ends its incoming block.
; CHECK-LABEL: define i32 @phi_use(
; CHECK:       entry:
; CHECK-NOT:     call i32 @hash
; CHECK:       miss:
; CHECK-NEXT:    %h = call i32 @hash(ptr %key)
; CHECK-NEXT:    br label %out
; CHECK:       out:
; CHECK-NEXT:    %r = phi i32 [ %h, %miss ], [ 0, %entry ]

; A store to the key between the call and the use: the call stays.
; CHECK-LABEL: define i32 @written(
; CHECK:       entry:
; CHECK:         store i32 %field, ptr %key
; CHECK-NEXT:    %h = call i32 @hash(ptr %key)

; The using block is on every path from the call: nothing to gain.
; CHECK-LABEL: define i32 @every_path(
; CHECK:       entry:
; CHECK:         %h = call i32 @hash(ptr %key)
; CHECK:       join:
; CHECK-NEXT:    %r = add i32 %h, 1

; A use in the call's own block: the call stays.
; CHECK-LABEL: define i32 @own_block(
; CHECK:       entry:
; CHECK:         %h = call i32 @hash(ptr %key)
; CHECK-NEXT:    %early = add i32 %h, 3

; A callee that may write its argument's memory: the call stays.
; CHECK-LABEL: define i32 @writes_memory(
; CHECK:       entry:
; CHECK:         %h = call i32 @bump(ptr %key)

; A map's value as the argument: another CPU may write it between the call
; and its use, though nothing in the function does: the call stays.
; CHECK-LABEL: define i32 @shared_memory(
; CHECK:       found:
; CHECK-NEXT:    %h = call i32 @hash(ptr %v)
; CHECK-NEXT:    %more = icmp

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@flows = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define internal i32 @hash(ptr nocapture readonly %k) #0 {
  %a = load i32, ptr %k, align 4
  %m = mul i32 %a, -1640531535
  ret i32 %m
}

define internal i32 @bump(ptr nocapture %k) #1 {
  %a = load i32, ptr %k, align 4
  %b = add i32 %a, 1
  store i32 %b, ptr %k, align 4
  ret i32 %b
}

define i32 @balance(ptr %ctx, i32 %gue) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %h = call i32 @hash(ptr %key)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %known, label %miss
miss:
  %slot = urem i32 %h, 7
  br label %out
known:
  br label %out
out:
  %s = phi i32 [ %slot, %miss ], [ 0, %known ]
  %g = icmp ne i32 %gue, 0
  br i1 %g, label %encap, label %done
encap:
  %port = or i32 %h, 49152
  %r = add i32 %port, %s
  ret i32 %r
done:
  ret i32 %s
}

define i32 @phi_use(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %h = call i32 @hash(ptr %key)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %out, label %miss
miss:
  br label %out
out:
  %r = phi i32 [ %h, %miss ], [ 0, %entry ]
  ret i32 %r
}

define i32 @written(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %h = call i32 @hash(ptr %key)
  %hit = icmp ne i32 %field, 0
  br i1 %hit, label %known, label %miss
known:
  store i32 0, ptr %key, align 4
  br label %miss2
miss:
  br label %miss2
miss2:
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %p = icmp ne ptr %v, null
  br i1 %p, label %use, label %none
use:
  ret i32 %h
none:
  ret i32 0
}

define i32 @every_path(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %h = call i32 @hash(ptr %key)
  %hit = icmp ne i32 %field, 0
  br i1 %hit, label %left, label %right
left:
  br label %join
right:
  br label %join
join:
  %r = add i32 %h, 1
  ret i32 %r
}

define i32 @own_block(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %h = call i32 @hash(ptr %key)
  %early = add i32 %h, 3
  %hit = icmp ne i32 %field, 0
  br i1 %hit, label %use, label %none
use:
  %r = add i32 %h, 1
  ret i32 %r
none:
  ret i32 %early
}

define i32 @writes_memory(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %h = call i32 @bump(ptr %key)
  %hit = icmp ne i32 %field, 0
  br i1 %hit, label %use, label %none
use:
  ret i32 %h
none:
  ret i32 0
}


define i32 @shared_memory(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %out
found:
  %h = call i32 @hash(ptr %v)
  %more = icmp ugt i32 %field, 7
  br i1 %more, label %use, label %out
use:
  %r = add i32 %h, 1
  ret i32 %r
out:
  ret i32 0
}

attributes #0 = { mustprogress nofree norecurse nosync nounwind willreturn memory(argmem: read) }
attributes #1 = { mustprogress nofree norecurse nosync nounwind willreturn memory(argmem: readwrite) }

;--- state.json
{"tables": {"flows": {"type": "lru_hash", "key_size": 4, "value_size": 8, "max_entries": 64}},
 "maps": {"flows": []}}
