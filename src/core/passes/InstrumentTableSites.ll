; Lookups a fast path could serve (read-only table, modelled semantics, LPM
; included) whose table is not read whole get a sampled recording of their
; key first: the runtime's slot function (a per-CPU countdown) says where,
; or null, and the key bytes the lookup reads are copied there. The lookup
; itself is untouched. Constant keys, tables read whole, tables written by
; the data plane and tables excluded with --no-profile are not recorded.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table,instrument-table-sites --profile | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table,instrument-table-sites --profile --no-profile routes | FileCheck %s --check-prefix=EXCLUDED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table,instrument-table-sites | FileCheck %s --check-prefix=OFF

; C: struct { u32 daddr; u32 vrf; } key = {...}; v = lookup(&routes, &key);
; CHECK-LABEL: define i32 @route(
; CHECK:         [[SLOT:%routes.profile.slot.*]] = call ptr @morpheus_profile_slot(i32 0)
; CHECK-NEXT:    [[SAMPLED:%.*]] = icmp ne ptr [[SLOT]], null
; CHECK-NEXT:    br i1 [[SAMPLED]], label %[[RECORD:routes.profile.record.*]], label %[[LOOKUP:.*]], !prof
; CHECK:       [[RECORD]]:
; CHECK-NEXT:    call void @llvm.memcpy.p0.p0.i64(ptr align 8 [[SLOT]], ptr align 4 %key, i64 8, i1 false)
; CHECK-NEXT:    br label %[[LOOKUP]]
; CHECK:       [[LOOKUP]]:
; CHECK-NEXT:    %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; An LPM trie: the whole lookup key, prefix length included.
; CHECK-LABEL: define i32 @lpm(
; CHECK:         call ptr @morpheus_profile_slot(i32 1)
; CHECK:         call void @llvm.memcpy.p0.p0.i64(ptr align 8 {{.*}}, ptr align 4 %key, i64 8, i1 false)
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @prefixes, ptr {{.*}}%key)
; Read whole and inlined: nothing to learn.
; CHECK-LABEL: define i32 @small_table(
; CHECK-NOT:     morpheus_profile_slot
; CHECK:         ret i32
; A constant key: nothing to learn.
; CHECK-LABEL: define i32 @constant(
; CHECK-NOT:     morpheus_profile_slot
; CHECK:         ret i32
; Written by the data plane: no fast path could serve it.
; CHECK-LABEL: define i32 @written(
; CHECK-NOT:     morpheus_profile_slot
; CHECK:         ret i32
; An array indexed by a packet field: the verifier inlines its lookup, no
; fast path can be cheaper, so nothing is sampled.
; CHECK-LABEL: define i32 @indexed(
; CHECK-NOT:     morpheus_profile_slot
; CHECK:         ret i32
; CHECK: ; site 0 routes instrument-table-sites applied: lookup keys sampled into profile slot 0
; CHECK: ; site 1 prefixes instrument-table-sites applied: lookup keys sampled into profile slot 1
; CHECK: ; site {{[0-9]+}} config instrument-table-sites declined: its lookup is cheaper than any fast path must save (an array lookup the verifier inlines): nothing to learn

; EXCLUDED-LABEL: define i32 @route(
; EXCLUDED-NOT:   morpheus_profile_slot
; EXCLUDED:       call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; EXCLUDED-LABEL: define i32 @lpm(
; EXCLUDED:       call ptr @morpheus_profile_slot(i32 1)
; EXCLUDED: ; site 0 routes instrument-table-sites declined: not profiled (--no-profile)

; OFF-NOT: morpheus_profile_slot

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@prefixes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@small = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@flows = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @route(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %daddr = load i64, ptr %ctx, align 4
  store i64 %daddr, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 1
}

; C: struct { u32 prefixlen; u32 daddr; } key = {32, daddr};
define i32 @lpm(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  store i32 32, ptr %key, align 4
  %daddr = load i32, ptr %ctx, align 4
  %at = getelementptr i8, ptr %key, i64 4
  store i32 %daddr, ptr %at, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @prefixes, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

define i32 @small_table(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @small, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

define i32 @constant(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

; C: v = lookup(&flows, &key); if (v) v->packets++;
define i32 @written(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %packets = load i64, ptr %v, align 8
  %more = add i64 %packets, 1
  store i64 %more, ptr %v, align 8
  ret i32 2
miss:
  ret i32 1
}

; C: v = lookup(&config, &ctx->field); return v ? 2 : 1;
define i32 @indexed(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

;--- state.json
{"tables": {"routes": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 4096},
            "prefixes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 1024, "flags": 1},
            "small": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 16},
            "config": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 1024},
            "flows": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1024}},
 "maps": {"small": [{"key": "01000000", "value": "02000000"}]}}
