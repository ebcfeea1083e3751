; Value bytes equal in every entry of a read-only table too large to inline
; become constants at every load through a lookup's result; the lookup
; stays. Routes: { u32 gateway; u32 port; u32 kind }, three entries with
; one gateway (192.168.1.1), kind 0, ports 1, 2, 3; the inline limit is 2.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table,constant-fields --inline-limit 2 | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table,constant-fields | FileCheck %s --check-prefix=INLINED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table,constant-fields --inline-limit 2 --cleanup | FileCheck %s --check-prefix=RANGED

; C: r = bpf_map_lookup_elem(&routes, &key);
;    if (!r || r->kind == 1) return PASS;
;    return r->gateway + r->port;
; CHECK-LABEL: define i32 @route(
; CHECK:         [[R:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes
; CHECK-NOT:     load i32, ptr %kindp
; CHECK:         icmp eq i32 0, 1
; CHECK:         [[PORT:%.*]] = load i32, ptr %portp
; CHECK:         add i32 16885952, [[PORT]]
; Ports differ: nothing to fold.
; CHECK-LABEL: define i32 @port_only(
; CHECK:         load i32, ptr %portp
; Ports 1..3 decide the program's check against 16: the port is clamped
; to [1, 3] on an opaque copy (the verifier learns the bound from the
; clamp), and the clean-up deletes the check.
; CHECK-LABEL: define i32 @port_bound(
; CHECK:         [[P:%port]] = load i32, ptr %portp
; CHECK:         [[O:%.*]] = call i32 asm "", "=r,0"(i32 [[P]])
; CHECK:         [[MIN:%.*]] = call i32 @llvm.umin.i32(i32 [[O]], i32 3)
; CHECK:         [[MAX:%.*]] = call i32 @llvm.umax.i32(i32 [[MIN]], i32 1)
; CHECK:         icmp uge i32 [[MAX]], 16
; CHECK: ; site 0 routes constant-fields applied: 2 loads of bytes equal in all 3 entries folded (bytes 0..3, bytes 8..11); the lookup stays
; CHECK: ; site 1 routes constant-fields declined: no load reads bytes equal in all 3 entries, nor a field whose range decides a compare
; CHECK: ; site 2 routes constant-fields applied: 1 load bounded by the range of all 3 entries (bytes 4..7 in [1, 3]); the lookup stays
; RANGED-LABEL: define {{.*}}i32 @port_bound(
; RANGED-NOT:     icmp uge
; RANGED:         llvm.umin

; Within the limit the table is a compare chain instead.
; INLINED-LABEL: define i32 @route(
; INLINED-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr @routes
; INLINED: ; site 0 routes inline-small-table applied

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @route(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %daddr = load i32, ptr %ctx, align 4
  store i32 %daddr, ptr %key, align 4
  %r = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %r, null
  br i1 %hit, label %found, label %pass
found:
  %kindp = getelementptr i8, ptr %r, i64 8
  %kind = load i32, ptr %kindp, align 4
  %local = icmp eq i32 %kind, 1
  br i1 %local, label %pass, label %forward
forward:
  %gateway = load i32, ptr %r, align 4
  %portp = getelementptr i8, ptr %r, i64 4
  %port = load i32, ptr %portp, align 4
  %sum = add i32 %gateway, %port
  ret i32 %sum
pass:
  ret i32 2
}

define i32 @port_only(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %daddr = load i32, ptr %ctx, align 4
  store i32 %daddr, ptr %key, align 4
  %r = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %r, null
  br i1 %hit, label %found, label %pass
found:
  %portp = getelementptr i8, ptr %r, i64 4
  %port = load i32, ptr %portp, align 4
  ret i32 %port
pass:
  ret i32 2
}

; C: r = bpf_map_lookup_elem(&routes, &key);
;    if (!r || r->port >= 16) return PASS;
;    return r->port;
define i32 @port_bound(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %daddr = load i32, ptr %ctx, align 4
  store i32 %daddr, ptr %key, align 4
  %r = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %r, null
  br i1 %hit, label %found, label %pass
found:
  %portp = getelementptr i8, ptr %r, i64 4
  %port = load i32, ptr %portp, align 4
  %big = icmp uge i32 %port, 16
  br i1 %big, label %pass, label %ok
ok:
  ret i32 %port
pass:
  ret i32 2
}

;--- state.json
{"tables": {"routes": {"type": "hash", "key_size": 4, "value_size": 12, "max_entries": 64}},
 "maps": {"routes": [{"key": "0a000001", "value": "c0a80101 01000000 00000000"},
                     {"key": "0a000002", "value": "c0a80101 02000000 00000000"},
                     {"key": "0a000003", "value": "c0a80101 03000000 00000000"}]}}
