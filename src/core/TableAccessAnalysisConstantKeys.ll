; Which keys are constants: every byte given the same compile-time value by
; its nearest write on every path to the lookup (core/KeyBytes.cpp), and
; when not, the first reason. Katran keeps `__u32 mac_addr_pos = 0` at the
; top of its packet path and looks ctl_array up with it at the end, past
; loops and calls; struct keys are zeroed and then filled, or copied from
; an initializer or from another local.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --print-analysis | FileCheck %s
; The constant key is answered from the snapshot, across the loop.
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=constant-key-lookup \
; RUN:   | FileCheck %s --check-prefix=LOG

; Stored once, then a loop of helper calls before the lookup.
; CHECK: site 0 map_lookup_elem ctl key=constant constant=00 00 00 00{{$}}
; Zeroed whole, then a field set.
; CHECK-NEXT: site 1 map_lookup_elem pairs key=constant constant=00 00 00 00 05 00 00 00{{$}}
; Copied from clang's private initializer constant.
; CHECK-NEXT: site 2 map_lookup_elem pairs key=constant constant=01 00 00 00 02 00 00 00{{$}}
; Copied from another local holding a constant.
; CHECK-NEXT: site 3 map_lookup_elem ctl key=constant constant=07 00 00 00{{$}}
; Two paths, two values: not one constant, and said so.
; CHECK-NEXT: site 4 map_lookup_elem ctl key=constant unproven="key byte 0 is written with different values on different paths"
; A named global: its loader may set its bytes before load.
; CHECK-NEXT: site 5 map_lookup_elem ctl key=constant unproven="the key is the global 'chosen', whose bytes its loader may set before load"

; LOG: ; site 0 ctl constant-key-lookup applied

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@ctl = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@pairs = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@clock = global i64 0, align 8
@__const.initialised.key = private unnamed_addr constant { i32, i32 } { i32 1, i32 2 }, align 4
@chosen = constant i32 3, section ".rodata", align 4

declare void @llvm.lifetime.start.p0(i64, ptr)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

; C: __u32 pos = 0; for (i = 0; i < n; i++) clock = bpf_ktime_get_ns();
;    cval = bpf_map_lookup_elem(&ctl, &pos);
define i32 @far(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  call void @llvm.lifetime.start.p0(i64 4, ptr %key)
  store i32 0, ptr %key, align 4
  %n = load i32, ptr %ctx, align 4
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %body ]
  %more = icmp ult i32 %i, %n
  br i1 %more, label %body, label %done
body:
  %now = call i64 inttoptr (i64 5 to ptr)()
  store i64 %now, ptr @clock, align 8
  %next = add i32 %i, 1
  br label %loop
done:
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @ctl, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

; C: struct pair key = {}; key.b = 5;
define i32 @zeroed(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  call void @llvm.memset.p0.i64(ptr %key, i8 0, i64 8, i1 false)
  %b = getelementptr i8, ptr %key, i64 4
  store i32 5, ptr %b, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @pairs, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

; C: struct pair key = {1, 2}; (clang copies it from a private constant)
define i32 @initialised(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  call void @llvm.memcpy.p0.p0.i64(ptr %key, ptr @__const.initialised.key, i64 8, i1 false)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @pairs, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

; C: __u32 slot = 7; __u32 key; __builtin_memcpy(&key, &slot, 4);
define i32 @copied(ptr %ctx) section "xdp" {
entry:
  %slot = alloca i32, align 4
  %key = alloca i32, align 4
  store i32 7, ptr %slot, align 4
  call void @llvm.memcpy.p0.p0.i64(ptr %key, ptr %slot, i64 4, i1 false)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @ctl, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

; C: __u32 key = ctx->flags ? 1 : 2;, the stores on both paths
define i32 @either(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %flags = load i32, ptr %ctx, align 4
  %set = icmp ne i32 %flags, 0
  br i1 %set, label %one, label %two
one:
  store i32 1, ptr %key, align 4
  br label %look
two:
  store i32 2, ptr %key, align 4
  br label %look
look:
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @ctl, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

; C: const volatile __u32 chosen = 3; lookup(&ctl, (void *)&chosen);
define i32 @global_key(ptr %ctx) section "xdp" {
entry:
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @ctl, ptr @chosen)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

;--- state.json
{"tables": {"ctl": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 16},
            "pairs": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 8}},
 "maps": {"ctl": [{"key": "00000000", "value": "0102030405060708"}]}}
