; A lookup whose key bytes are all constants becomes a pointer to the entry's
; value (in the table's value array, which LLVM folds through) or null when
; the key is absent. The key here is built the way clang builds struct keys:
; a zeroing store, then a narrower store over part of it. Arrays follow the
; kernel: an index below max_entries always exists.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=constant-key-lookup | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=constant-key-lookup --cleanup | FileCheck %s --check-prefix=FOLDED

; Every entry of the snapshot, 8-byte aligned, not unnamed_addr: distinct
; keys keep distinct addresses even when their values are equal.
; CHECK:       @__morpheus.config.values = private constant [16 x i8] c"\06\00\00\00\02\00\00\00\06\00\00\00\02\00\00\00", align 8
; CHECK:       @__morpheus.levels.values = private constant [16 x i8]
; CHECK-LABEL: define i32 @read_config(
; CHECK-NOT:     inttoptr (i64 1 to ptr)(ptr @config
; CHECK:         %flags = load i32, ptr @__morpheus.config.values
; CHECK-LABEL: define i32 @absent_key(
; CHECK:         %hit = icmp ne ptr null, null
; The key escapes to a call that may rewrite it before the lookup: not constant.
; CHECK-LABEL: define i32 @clobbered_key(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @config
; Two keys, equal values: two addresses, as in the kernel.
; CHECK-LABEL: define i32 @two_keys(
; CHECK:         load i32, ptr @__morpheus.config.values
; CHECK:         load i32, ptr getelementptr inbounds (i8, ptr @__morpheus.config.values, i64 8)
; Value pointers compared with each other: the kernel answers by identity;
; the table is left alone.
; CHECK-LABEL: define i1 @same_zone(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @zones
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @zones
; An array index the snapshot lists: its value.
; CHECK-LABEL: define i32 @listed_index(
; CHECK:         load i32, ptr getelementptr inbounds (i8, ptr @__morpheus.levels.values, i64 8)
; An index at or beyond max_entries (8): the only way an array lookup misses.
; CHECK-LABEL: define i32 @index_beyond_the_array(
; CHECK-NOT:     inttoptr (i64 1 to ptr)(ptr @levels
; CHECK:         icmp ne ptr null, null
; An index the snapshot does not list exists too (zeroed or written since):
; never null, so the lookup stays.
; CHECK-LABEL: define i32 @unlisted_index(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @levels
; The helper declared returning an integer: not the shape a rewrite builds.
; CHECK-LABEL: define i32 @integer_result(
; CHECK:         call i64 inttoptr (i64 1 to ptr)(ptr @config

; CHECK: ; site 5 zones analysis declined: value pointers compared with another pointer (value of zones looked up): the kernel answers by entry identity
; CHECK: ; site 10 config analysis declined: lookup returns i64, not a pointer (helper declared with another return type)
; CHECK: ; site 9 levels constant-key-lookup declined: index 5 not in the snapshot: the element exists, its value is unknown; the lookup stays

; FOLDED-LABEL: define {{.*}}i32 @read_config(
; FOLDED-NEXT:  {{.*}}:
; FOLDED-NEXT:    ret i32 2
; FOLDED-LABEL: define {{.*}}i32 @two_keys(
; FOLDED-NEXT:  entry:
; FOLDED-NEXT:    ret i32 12

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@levels = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@zones = global { ptr, ptr } zeroinitializer, section ".maps", align 8

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

; C: return *lookup(&config, &k1) + *lookup(&config, &k2);
define i32 @two_keys(ptr %ctx) section "xdp" {
entry:
  %first = alloca i64, align 8
  %second = alloca i64, align 8
  store i64 -4294967296, ptr %first, align 8
  store i64 -4294967295, ptr %second, align 8
  %a = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %first)
  %b = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %second)
  %x = load i32, ptr %a, align 4
  %y = load i32, ptr %b, align 4
  %sum = add i32 %x, %y
  ret i32 %sum
}

; C: return lookup(&zones, &k1) == lookup(&zones, &k2);
define i1 @same_zone(ptr %ctx) section "xdp" {
entry:
  %first = alloca i32, align 4
  %second = alloca i32, align 4
  store i32 1, ptr %first, align 4
  store i32 2, ptr %second, align 4
  %a = call ptr inttoptr (i64 1 to ptr)(ptr @zones, ptr %first)
  %b = call ptr inttoptr (i64 1 to ptr)(ptr @zones, ptr %second)
  %same = icmp eq ptr %a, %b
  ret i1 %same
}

define i32 @listed_index(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 1, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @levels, ptr %key)
  %level = load i32, ptr %v, align 4
  ret i32 %level
}

define i32 @index_beyond_the_array(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 9, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @levels, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

define i32 @unlisted_index(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 5, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @levels, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

; C: static long (*lookup)(void *, const void *) = (void *)1;
;    return lookup(&config, &key) ? XDP_DROP : XDP_PASS;
define i32 @integer_result(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  store i64 7, ptr %key, align 8
  %found = call i64 inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne i64 %found, 0
  %verdict = select i1 %hit, i32 1, i32 2
  ret i32 %verdict
}

;--- state.json
{"tables": {"config": {"type": "hash", "key_size": 8, "value_size": 8, "max_entries": 4096},
            "levels": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 8},
            "zones": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 8}},
 "maps": {"config": [{"key": "00000000 ffffffff", "value": "06000000 02000000"},
                     {"key": "01000000 ffffffff", "value": "06000000 02000000"}],
          "levels": [{"key": "00000000", "value": "01000000"},
                     {"key": "01000000", "value": "07000000"}],
          "zones": [{"key": "01000000", "value": "05000000"},
                    {"key": "02000000", "value": "05000000"}]}}
