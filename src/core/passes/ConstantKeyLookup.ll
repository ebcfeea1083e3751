; A lookup whose key bytes are all constants becomes the entry's value (a
; private constant LLVM folds through) or null when the key is absent. The
; key here is built the way clang builds struct keys: a zeroing store, then
; a narrower store over part of it.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=constant-key-lookup | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=constant-key-lookup -O2 | FileCheck %s --check-prefix=FOLDED

; CHECK:       @__morpheus.config.0 = private unnamed_addr constant [8 x i8] c"\06\00\00\00\02\00\00\00"
; CHECK-LABEL: define i32 @read_config(
; CHECK-NOT:     inttoptr (i64 1 to ptr)(ptr @config
; CHECK:         %flags = load i32, ptr @__morpheus.config.0
; CHECK-LABEL: define i32 @absent_key(
; CHECK:         %hit = icmp ne ptr null, null
; The key escapes to a call that may rewrite it before the lookup: not constant.
; CHECK-LABEL: define i32 @clobbered_key(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @config

; FOLDED-LABEL: define {{.*}}i32 @read_config(
; FOLDED-NEXT:  entry:
; FOLDED-NEXT:    ret i32 2

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8

declare void @scramble(ptr)

define i32 @read_config(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  store i64 -1, ptr %key, align 8
  store i32 0, ptr %key, align 8
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %flags = load i32, ptr %v, align 4
  %enabled = and i32 %flags, 4
  %on = icmp ne i32 %enabled, 0
  %verdict = select i1 %on, i32 2, i32 1
  ret i32 %verdict
miss:
  ret i32 0
}

define i32 @absent_key(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  store i64 7, ptr %key, align 8
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

define i32 @clobbered_key(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  store i64 0, ptr %key, align 8
  call void @scramble(ptr %key)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

;--- state.json
{"tables": {"config": {"type": "hash", "key_size": 8, "value_size": 8, "max_entries": 4096}},
 "maps": {"config": [{"key": "00000000 ffffffff", "value": "06000000 02000000"}]}}
