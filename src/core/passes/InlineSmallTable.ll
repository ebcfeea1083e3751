; A small read-only table becomes a compare chain over every key byte, each
; hit yielding a constant copy of the value. Keys are read in the widest
; chunks their alignment allows, and frozen so padding compares like the
; helper's memcmp does.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table --inline-limit 1 | FileCheck %s --check-prefix=LIMIT
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table -O2 | FileCheck %s --check-prefix=FOLDED

; CHECK-LABEL: define i32 @route(
; CHECK:         [[K0:%routes.key.*]] = load i32, ptr %key, align 4
; CHECK-NEXT:    [[F0:%.*]] = freeze i32 [[K0]]
; CHECK:         [[K1:%routes.key.*]] = load i16, ptr {{.*}}, align 2
; CHECK-NEXT:    [[F1:%.*]] = freeze i16 [[K1]]
; CHECK:         icmp eq i32 [[F0]], 16777226
; CHECK:         icmp eq i16 [[F1]], 20480
; CHECK:         icmp eq i32 [[F0]], 33554442
; Equal values share one constant.
; CHECK:         phi ptr [ @__morpheus.routes.0, %{{.*}} ], [ @__morpheus.routes.0, %{{.*}} ], [ null, %{{.*}} ]
; CHECK-NOT:     inttoptr (i64 1 to ptr)(ptr @routes

; With room for one entry only, the two-entry table stays a real lookup.
; LIMIT-LABEL: define i32 @route(
; LIMIT:         call ptr inttoptr (i64 1 to ptr)(ptr @routes

; Both entries send to port 3, so after O2 the port is a constant.
; FOLDED-LABEL: define {{.*}}i32 @route(
; FOLDED-NOT:     load i32, ptr @__morpheus
; FOLDED:         ret i32

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8

; key: { u32 daddr; u16 dport } (6 bytes, 4-byte aligned)
define i32 @route(ptr %ctx) section "xdp" {
entry:
  %key = alloca [6 x i8], align 4
  %daddr = load i32, ptr %ctx, align 4
  store i32 %daddr, ptr %key, align 4
  %portp = getelementptr i8, ptr %ctx, i64 4
  %port = load i16, ptr %portp, align 2
  %keyport = getelementptr i8, ptr %key, i64 4
  store i16 %port, ptr %keyport, align 2
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 1
}

;--- state.json
{"tables": {"routes": {"type": "hash", "key_size": 6, "value_size": 4, "max_entries": 1024}},
 "maps": {"routes": [{"key": "0a000001 0050", "value": "03000000"},
                     {"key": "0a000002 0050", "value": "03000000"}]}}
