; Hot-tuple tail duplication: a flow of read-only lookups whose keys trace
; back to values from before the first one (the leaves: %a and %b here)
; gets, per hot tuple (hottest first), a compare of the leaves and a copy of
; everything after the first lookup with the leaves as the tuple's
; constants; constant-key-lookup then answers the copy's keys and the clean-up folds
; the copy to its verdict. A miss reaches the original code, untouched.
; Instrumented versions record the tuple (the leaves, packed) at the flow's
; profile site, past every access site's id.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=flow-fast-path | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=flow-fast-path,constant-key-lookup --cleanup | FileCheck %s --check-prefix=FOLDED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=flow-fast-path --profile | FileCheck %s --check-prefix=PROFILED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=flow-fast-path --verifier-paths 2 | FileCheck %s --check-prefix=BUDGET
; RUN: morpheus-opt %t/chain.ll --state %t/state.json -passes=flow-fast-path --profile | FileCheck %s --check-prefix=CHAIN
; RUN: morpheus-opt %t/decline.ll --state %t/state.json -passes=flow-fast-path --profile | FileCheck %s --check-prefix=DECLINE

; Tuple (a, b) = (0a000001, 0b000001) first, then (0a000002, 0b000009).
; CHECK-LABEL: define i32 @classify(
; CHECK:         store i32 %a, ptr %k1
; CHECK-NEXT:    [[A0:%.*]] = icmp eq i32 %a, 16777226
; CHECK-NEXT:    [[B0:%.*]] = icmp eq i32 %b, 16777227
; CHECK-NEXT:    [[M0:%.*]] = and i1 [[A0]], [[B0]]
; CHECK-NEXT:    br i1 [[M0]], label %flow.hot0, label %flow.hot0.next
; The miss: the original lookups, untouched.
; CHECK:       flow.miss:
; CHECK-NEXT:    %v1 = call ptr inttoptr (i64 1 to ptr)(ptr @first, ptr {{.*}}%k1)
; CHECK:         store i32 %b, ptr %k2
; CHECK-NEXT:    %v2 = call ptr inttoptr (i64 1 to ptr)(ptr @second, ptr {{.*}}%k2)
; The copy: the key store from before the flow repeated with the constant,
; the leaves constants in the copied tail.
; CHECK:       flow.hot0:
; CHECK-NEXT:    store i32 16777226, ptr %k1
; CHECK:       flow.hot0.next:
; CHECK:         icmp eq i32 %a, 33554442
; CHECK:         icmp eq i32 %b, 150994955
; CHECK:       flow.hot1:
; CHECK-NEXT:    store i32 33554442, ptr %k1
; CHECK:         %v1.flow.hot1 = call ptr inttoptr (i64 1 to ptr)(ptr @first, ptr {{.*}}%k1)
; CHECK:         store i32 150994955, ptr %k2
; CHECK-NEXT:    %v2.flow.hot1 = call ptr inttoptr (i64 1 to ptr)(ptr @second, ptr {{.*}}%k2)
; CHECK: ; site 0 first flow-fast-path applied: 2 hot tuples, each with a copy of the code after the flow: 2 lookups (first, second), 2 leaves in a 8-byte tuple

; After constant-key-lookup and the clean-up: the first tuple answers 0x0f & 0x06,
; the second misses the second table (1), neither with a lookup; only the
; miss path calls them.
; FOLDED-LABEL: define i32 @classify(
; FOLDED:         br i1 %flow.hot0.match, label %common.ret, label %flow.hot0.next
; FOLDED:       flow.miss:
; FOLDED-NEXT:    %v1 = call ptr inttoptr (i64 1 to ptr)(ptr nonnull @first
; FOLDED-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr nonnull @first
; FOLDED:         phi i32 [ %r, %found ], [ 1, %next ], [ 1, %flow.miss ], [ 6, %entry ], [ 1, %flow.hot0.next ]
; FOLDED:       flow.hot0.next:
; FOLDED:         br i1 %flow.hot1.match, label %common.ret, label %flow.miss

; The tuple recorded before the compares, so hits are counted: profile site
; 2, the first past the program's two access sites.
; PROFILED-LABEL: define i32 @classify(
; PROFILED:         %flow.profile.slot = call ptr @morpheus_profile_slot(i32 2)
; PROFILED:       flow.profile.record:
; PROFILED-NEXT:    [[AT0:%.*]] = getelementptr inbounds i8, ptr %flow.profile.slot, i32 0
; PROFILED-NEXT:    store i32 %a, ptr [[AT0]]
; PROFILED-NEXT:    [[AT4:%.*]] = getelementptr inbounds i8, ptr %flow.profile.slot, i32 4
; PROFILED-NEXT:    store i32 %b, ptr [[AT4]]
; PROFILED:         icmp eq i32 %a, 16777226
; PROFILED: ; site 0 first flow-fast-path applied: flow tuples sampled into profile slot 2: 2 lookups (first, second), 2 leaves in a 8-byte tuple

; A verifier budget of 2 paths: the hottest tuple's copy and the original
; tail; the colder tuple is dropped, logged.
; BUDGET-LABEL: define i32 @classify(
; BUDGET:         icmp eq i32 %a, 16777226
; BUDGET-NOT:     icmp eq i32 %a, 33554442
; BUDGET: ; site 0 first flow-fast-path applied: 1 hot tuples, each with a copy of the code after the flow: 2 lookups (first, second), 2 leaves in a 8-byte tuple; 1 colder hot tuples dropped over the verifier budget

; A key loaded from the first lookup's answer, after a branch on a flag: the
; flag and the first key are the leaves (the answer is constant once the
; first key is); the flag is recorded as one byte.
; CHAIN-LABEL: define i32 @chain(
; CHAIN:         [[FLAG:%.*]] = zext i1 %flag to i8
; CHAIN:         store i8 [[FLAG]]
; CHAIN: ; site 0 first flow-fast-path applied: flow tuples sampled into profile slot 2: 2 lookups (first, second), 2 leaves in a 5-byte tuple

; DECLINE: ; site 0 first flow-fast-path declined: no other read-only lookup of the tail traces back to before it (site 1: its key depends on a call or a memory access)
; DECLINE: ; site 2 first flow-fast-path declined: no other read-only lookup of the tail traces back to before it
; DECLINE: ; site 3 first flow-fast-path declined: no other read-only lookup of the tail traces back to before it
; DECLINE: ; site 5 first flow-fast-path declined: in a loop: no flow starts here
; DECLINE-NOT: flow.profile

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@first = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@second = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@hits = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @classify(ptr %ctx) section "xdp" {
entry:
  %k1 = alloca i32, align 4
  %k2 = alloca i32, align 4
  %a = load i32, ptr %ctx, align 4
  %bp = getelementptr i8, ptr %ctx, i64 4
  %b = load i32, ptr %bp, align 4
  store i32 %a, ptr %k1, align 4
  %v1 = call ptr inttoptr (i64 1 to ptr)(ptr @first, ptr %k1)
  %hit1 = icmp ne ptr %v1, null
  br i1 %hit1, label %next, label %miss
next:
  store i32 %b, ptr %k2, align 4
  %v2 = call ptr inttoptr (i64 1 to ptr)(ptr @second, ptr %k2)
  %hit2 = icmp ne ptr %v2, null
  br i1 %hit2, label %found, label %miss
found:
  %x = load i32, ptr %v1, align 4
  %y = load i32, ptr %v2, align 4
  %r = and i32 %x, %y
  ret i32 %r
miss:
  ret i32 1
}

;--- chain.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@first = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@second = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@hits = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @chain(ptr %ctx) section "xdp" {
entry:
  %k1 = alloca i32, align 4
  %k2 = alloca i32, align 4
  %a = load i32, ptr %ctx, align 4
  %fp = getelementptr i8, ptr %ctx, i64 4
  %f = load i32, ptr %fp, align 4
  %flag = icmp ne i32 %f, 0
  store i32 %a, ptr %k1, align 4
  %v1 = call ptr inttoptr (i64 1 to ptr)(ptr @first, ptr %k1)
  %hit1 = icmp ne ptr %v1, null
  br i1 %hit1, label %found, label %miss
found:
  br i1 %flag, label %class, label %join
class:
  %c = load i32, ptr %v1, align 4
  br label %join
join:
  %index = phi i32 [ %c, %class ], [ 0, %found ]
  store i32 %index, ptr %k2, align 4
  %v2 = call ptr inttoptr (i64 1 to ptr)(ptr @second, ptr %k2)
  %hit2 = icmp ne ptr %v2, null
  %r = select i1 %hit2, i32 2, i32 1
  ret i32 %r
miss:
  ret i32 1
}

;--- decline.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@first = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@second = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@hits = global { ptr, ptr } zeroinitializer, section ".maps", align 8

; The second key is a helper's result (bpf_get_prandom_u32): not traced.
define i32 @helper(ptr %ctx) section "xdp" {
entry:
  %k1 = alloca i32, align 4
  %k2 = alloca i32, align 4
  %a = load i32, ptr %ctx, align 4
  store i32 %a, ptr %k1, align 4
  %v1 = call ptr inttoptr (i64 1 to ptr)(ptr @first, ptr %k1)
  %random = call i32 inttoptr (i64 7 to ptr)()
  store i32 %random, ptr %k2, align 4
  %v2 = call ptr inttoptr (i64 1 to ptr)(ptr @second, ptr %k2)
  %hit = icmp ne ptr %v2, null
  %r = select i1 %hit, i32 2, i32 1
  ret i32 %r
}

; One lookup: nothing to fold across.
define i32 @single(ptr %ctx) section "xdp" {
entry:
  %k1 = alloca i32, align 4
  %a = load i32, ptr %ctx, align 4
  store i32 %a, ptr %k1, align 4
  %v1 = call ptr inttoptr (i64 1 to ptr)(ptr @first, ptr %k1)
  %hit = icmp ne ptr %v1, null
  %r = select i1 %hit, i32 2, i32 1
  ret i32 %r
}

; The second table is written by the data plane: not part of a flow.
define i32 @written(ptr %ctx) section "xdp" {
entry:
  %k1 = alloca i32, align 4
  %k2 = alloca i32, align 4
  %a = load i32, ptr %ctx, align 4
  store i32 %a, ptr %k1, align 4
  %v1 = call ptr inttoptr (i64 1 to ptr)(ptr @first, ptr %k1)
  store i32 %a, ptr %k2, align 4
  %v2 = call ptr inttoptr (i64 1 to ptr)(ptr @hits, ptr %k2)
  %hit = icmp ne ptr %v2, null
  br i1 %hit, label %count, label %done
count:
  %n = load i64, ptr %v2, align 8
  %more = add i64 %n, 1
  store i64 %more, ptr %v2, align 8
  br label %done
done:
  ret i32 2
}

; In a loop: a leaf may change from one turn to the next.
define i32 @loop(ptr %ctx) section "xdp" {
entry:
  %k1 = alloca i32, align 4
  %k2 = alloca i32, align 4
  br label %turn
turn:
  %i = phi i32 [ 0, %entry ], [ %next, %turn ]
  store i32 %i, ptr %k1, align 4
  %v1 = call ptr inttoptr (i64 1 to ptr)(ptr @first, ptr %k1)
  store i32 %i, ptr %k2, align 4
  %v2 = call ptr inttoptr (i64 1 to ptr)(ptr @second, ptr %k2)
  %next = add i32 %i, 1
  %again = icmp ult i32 %next, 4
  br i1 %again, label %turn, label %done
done:
  ret i32 2
}

;--- state.json
{"tables": {"first": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 4096},
            "second": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 4096},
            "hits": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 16}},
 "maps": {"first": [{"key": "0a000001", "value": "0f000000"}, {"key": "0a000002", "value": "03000000"}],
          "second": [{"key": "0b000001", "value": "06000000"}],
          "hits": []},
 "hot_tuples": {"2": ["0a000001 0b000001", "0a000002 0b000009"]}}
