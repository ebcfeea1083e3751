; An inner-map operand becomes the program's table the snapshot shows stored
; in the outer slot it reads, so the later passes treat the access like any
; other: here constant-key-lookup then inlines the configuration.
;
; struct cfg_array { ARRAY; __u32 key; struct { __u32 action, port; } value; 2 entries }
;   primary, secondary;
; struct { ARRAY_OF_MAPS; 2 entries; __array(values, struct cfg_array); } configs
;   = { .values = { [0] = &primary } };
; struct { HASH_OF_MAPS; 4 entries; __array(values, struct cfg_array); } tenants;
; int constant_slot(ctx) { __u32 k = 0; void *m = bpf_map_lookup_elem(&configs, &k);
;   if (!m) return 0; struct cfg *c = bpf_map_lookup_elem(m, &k); return c ? c->action : 1; }
; int any_slot(ctx):    the same with k = ctx->ingress_ifindex for the outer key
; int loader_slot(ctx): the same through tenants[1], a map the loader created
; int empty_slot(ctx):  the same through configs[1], empty
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=resolve-inner-table,constant-key-lookup \
; RUN:   | FileCheck %s
; With two different tables stored, a key that is not constant resolves to neither.
; RUN: morpheus-opt %t/prog.ll --state %t/two.json -passes=resolve-inner-table,constant-key-lookup \
; RUN:   | FileCheck %s --check-prefix=TWO

; CHECK-LABEL: define i32 @constant_slot(
; The outer lookup stays (the program's own null test), the inner one is gone.
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @configs
; CHECK-NOT:     inttoptr (i64 1 to ptr)(ptr %m
; CHECK:         load i32, ptr @__morpheus.primary.values
; CHECK-LABEL: define i32 @any_slot(
; CHECK-NOT:     inttoptr (i64 1 to ptr)(ptr %m
; CHECK:         load i32, ptr @__morpheus.primary.values
; A map the program does not declare: its loader updates it, not Morpheus.
; CHECK-LABEL: define i32 @loader_slot(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr %m
; CHECK-LABEL: define i32 @empty_slot(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr %m

; The outer lookup itself stays: it returns a table, not a value.
; CHECK-DAG: ; site 0 configs analysis declined: a lookup in a map of maps returns a table, not a value (the accesses to that table are resolve-inner-table's)
; CHECK-DAG: ; site 1 primary resolve-inner-table applied: configs[00 00 00 00] holds primary
; CHECK-DAG: ; site 1 primary constant-key-lookup applied: constant key: value inlined
; CHECK-DAG: ; site 3 primary resolve-inner-table applied: every slot of configs holds primary
; CHECK-DAG: ; site 5  analysis declined: table operand is an inner map of tenants: tenants[01 00 00 00] holds a map the program does not declare (its loader's), whose updates bypass the guard
; CHECK-DAG: ; site 7  analysis declined: table operand is an inner map of configs: configs[01 00 00 00] is empty, the outer lookup misses

; TWO-LABEL: define i32 @constant_slot(
; TWO:         load i32, ptr @__morpheus.primary.values
; TWO-LABEL: define i32 @any_slot(
; TWO:         call ptr inttoptr (i64 1 to ptr)(ptr %m
; TWO-LABEL: define i32 @empty_slot(
; TWO:         load i32, ptr @__morpheus.secondary.values
; TWO-DAG: ; site 3  analysis declined: table operand is an inner map of configs: outer key not constant and configs holds 2 tables

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

%struct.cfg_array = type { ptr, ptr, ptr, ptr }

@primary = global %struct.cfg_array zeroinitializer, section ".maps", align 8
@secondary = global %struct.cfg_array zeroinitializer, section ".maps", align 8
@configs = global { ptr, ptr, ptr, [2 x ptr] } { ptr null, ptr null, ptr null, [2 x ptr] [ptr @primary, ptr null] }, section ".maps", align 8
@tenants = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@llvm.compiler.used = appending global [4 x ptr] [ptr @primary, ptr @secondary, ptr @configs, ptr @tenants], section "llvm.metadata"

define i32 @constant_slot(ptr %ctx) section "xdp" {
entry:
  %k = alloca i32, align 4
  store i32 0, ptr %k, align 4
  %m = call ptr inttoptr (i64 1 to ptr)(ptr @configs, ptr %k)
  %none = icmp eq ptr %m, null
  br i1 %none, label %out, label %inner
inner:
  %c = call ptr inttoptr (i64 1 to ptr)(ptr %m, ptr %k)
  %miss = icmp eq ptr %c, null
  br i1 %miss, label %out1, label %read
read:
  %action = load i32, ptr %c, align 4
  ret i32 %action
out1:
  ret i32 1
out:
  ret i32 0
}

define i32 @any_slot(ptr %ctx) section "xdp" {
entry:
  %k = alloca i32, align 4
  %zero = alloca i32, align 4
  %port = load i32, ptr %ctx, align 4
  store i32 %port, ptr %k, align 4
  store i32 0, ptr %zero, align 4
  %m = call ptr inttoptr (i64 1 to ptr)(ptr @configs, ptr %k)
  %none = icmp eq ptr %m, null
  br i1 %none, label %out, label %inner
inner:
  %c = call ptr inttoptr (i64 1 to ptr)(ptr %m, ptr %zero)
  %miss = icmp eq ptr %c, null
  br i1 %miss, label %out1, label %read
read:
  %action = load i32, ptr %c, align 4
  ret i32 %action
out1:
  ret i32 1
out:
  ret i32 0
}

define i32 @loader_slot(ptr %ctx) section "xdp" {
entry:
  %k = alloca i32, align 4
  store i32 1, ptr %k, align 4
  %m = call ptr inttoptr (i64 1 to ptr)(ptr @tenants, ptr %k)
  %none = icmp eq ptr %m, null
  br i1 %none, label %out, label %inner
inner:
  %c = call ptr inttoptr (i64 1 to ptr)(ptr %m, ptr %k)
  %miss = icmp eq ptr %c, null
  br i1 %miss, label %out1, label %read
read:
  %action = load i32, ptr %c, align 4
  ret i32 %action
out1:
  ret i32 1
out:
  ret i32 0
}

define i32 @empty_slot(ptr %ctx) section "xdp" {
entry:
  %k = alloca i32, align 4
  %zero = alloca i32, align 4
  store i32 1, ptr %k, align 4
  store i32 0, ptr %zero, align 4
  %m = call ptr inttoptr (i64 1 to ptr)(ptr @configs, ptr %k)
  %none = icmp eq ptr %m, null
  br i1 %none, label %out, label %inner
inner:
  %c = call ptr inttoptr (i64 1 to ptr)(ptr %m, ptr %zero)
  %miss = icmp eq ptr %c, null
  br i1 %miss, label %out1, label %read
read:
  %action = load i32, ptr %c, align 4
  ret i32 %action
out1:
  ret i32 1
out:
  ret i32 0
}

;--- state.json
{"tables": {"primary": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 2},
            "secondary": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 2},
            "configs": {"type": "array_of_maps", "key_size": 4, "value_size": 4, "max_entries": 2,
                        "inner": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 2}},
            "tenants": {"type": "hash_of_maps", "key_size": 4, "value_size": 4, "max_entries": 4,
                        "inner": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 2}}},
 "maps": {"configs": [{"key": "00000000", "table": "primary"}],
          "tenants": [{"key": "01000000", "value": "2a000000"}],
          "primary": [{"key": "00000000", "value": "07000000 02000000"},
                      {"key": "01000000", "value": "00000000 00000000"}]}}

;--- two.json
{"tables": {"primary": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 2},
            "secondary": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 2},
            "configs": {"type": "array_of_maps", "key_size": 4, "value_size": 4, "max_entries": 2,
                        "inner": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 2}},
            "tenants": {"type": "hash_of_maps", "key_size": 4, "value_size": 4, "max_entries": 4,
                        "inner": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 2}}},
 "maps": {"configs": [{"key": "00000000", "table": "primary"}, {"key": "01000000", "table": "secondary"}],
          "tenants": [],
          "primary": [{"key": "00000000", "value": "07000000 02000000"},
                      {"key": "01000000", "value": "00000000 00000000"}],
          "secondary": [{"key": "00000000", "value": "09000000 02000000"},
                        {"key": "01000000", "value": "00000000 00000000"}]}}
