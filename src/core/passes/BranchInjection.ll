; A key field that takes few values across a read-only hash table too large
; to inline is tested before the lookup; a key with none of them gets null
; without the call. ACL key: { u8 proto; 3 bytes padding; u32 addr },
; zeroed before it is filled, three rules, protocols 6 and 17 (the first
; word: proto and padding); the inline limit is 2.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=branch-injection --inline-limit 2 | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=branch-injection | FileCheck %s --check-prefix=SMALL

; C: struct { __u8 proto; __u32 addr; } key = {};
;    key.proto = ip->protocol; key.addr = ip->daddr;
;    return bpf_map_lookup_elem(&acl, &key) ? DROP : PASS;
; CHECK-LABEL: define i32 @filter(
; CHECK:         [[KEY:%acl.key.memory.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    [[FIELD:%acl.field.*]] = load i32, ptr [[KEY]], align 4
; CHECK-NEXT:    [[TCP:%.*]] = icmp eq i32 [[FIELD]], 6
; CHECK-NEXT:    [[UDP:%.*]] = icmp eq i32 [[FIELD]], 17
; CHECK-NEXT:    [[ANY:%.*]] = or i1 [[TCP]], [[UDP]]
; CHECK-NEXT:    br i1 [[ANY]], label %[[CALL:.*]], label %[[JOIN:.*]]
; CHECK:       [[CALL]]:
; CHECK-NEXT:    [[V:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @acl
; The filtered lookup is still the site's lookup (instrumentation and fast
; paths may take it), not a miss path other passes must leave alone.
; CHECK-NOT:     !morpheus.kept
; CHECK:       [[JOIN]]:
; CHECK-NEXT:    phi ptr [ [[V]], %[[CALL]] ], [ null, %entry ]
; Every byte of every key differs: nothing to test.
; CHECK-LABEL: define i32 @flows_only(
; CHECK-NOT:     asm
; CHECK: ; site 0 acl branch-injection applied: key bytes 0..3 take 2 values across 3 entries: tested before the lookup, others get null
; CHECK: ; site 1 flows branch-injection declined: no key field takes at most 4 values across the 5 entries

; Within the inline limit the tables are compare chains' business.
; SMALL-LABEL: define i32 @filter(
; SMALL-NOT:     asm
; SMALL-NOT:   branch-injection

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@acl = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@flows = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @filter(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  store i64 0, ptr %key, align 4
  %proto = load i8, ptr %ctx, align 1
  store i8 %proto, ptr %key, align 4
  %addrp = getelementptr i8, ptr %ctx, i64 4
  %addr = load i32, ptr %addrp, align 4
  %keyaddr = getelementptr i8, ptr %key, i64 4
  store i32 %addr, ptr %keyaddr, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @acl, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 1, i32 2
  ret i32 %verdict
}

define i32 @flows_only(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %addr = load i32, ptr %ctx, align 4
  store i32 %addr, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 1, i32 2
  ret i32 %verdict
}

;--- state.json
{"tables": {"acl": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 64},
            "flows": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 64}},
 "maps": {"acl": [{"key": "06000000 0a000001", "value": "01000000"},
                  {"key": "11000000 0a000002", "value": "01000000"},
                  {"key": "06000000 0a000003", "value": "01000000"}],
          "flows": [{"key": "01010101", "value": "01000000"},
                    {"key": "02020202", "value": "01000000"},
                    {"key": "03030303", "value": "01000000"},
                    {"key": "04040404", "value": "01000000"},
                    {"key": "05050505", "value": "01000000"}]}}
