; Inner maps: a lookup whose table operand comes out of a lookup in a table
; of tables can only reach the program's tables that fit the outer table's
; inner template; the others stay read-only.
;
; struct inner { HASH; __u32 key; __u64 value; 16 entries } conn_a, conn_b;
; struct { ARRAY_OF_MAPS; __array(values, struct inner); } outer = { .values = { &conn_a } };
; struct { ARRAY; __u32 key; __u64 value; } other;   // another layout
; void *m = bpf_map_lookup_elem(&outer, &k);
; __u64 *v = bpf_map_lookup_elem(m, &k); if (v) *v += 1;
; __u64 *o = bpf_map_lookup_elem(&other, &k); return o ? *o : 2;
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --print-analysis | FileCheck %s
; Without the outer table's template, every table is written (the old rule).
; An array template without BPF_F_INNER_MAP fixes max_entries too: arrays of
; another size are never stored there (the kernel refuses them).
; RUN: morpheus-opt %t/prog.ll --state %t/arrays.json --print-analysis \
; RUN:   | FileCheck %s --check-prefix=ARRAYS
; RUN: morpheus-opt %t/prog.ll --state %t/notemplate.json --print-analysis \
; RUN:   | FileCheck %s --check-prefix=UNKNOWN

; Fits the template: the store through the inner value may reach it.
; CHECK: table conn_a rw-in-part
; CHECK-NEXT: written: store {{.*}}(value of an inner map of outer looked up
; CHECK: table conn_b rw-in-part
; The outer table is only read (its result is used as a table).
; CHECK: table other ro
; CHECK: table outer ro
; CHECK: site 1 map_lookup_elem ? key=constant constant=00 00 00 00 inner-of=outer candidates=[conn_a,conn_b]

; ARRAYS: table conn_a rw-in-part
; ARRAYS: table conn_b ro
; ARRAYS: table other ro
; ARRAYS: candidates=[conn_a]

; UNKNOWN: table other rw
; UNKNOWN-NEXT: written: unresolved table operand of map_lookup_elem in prog

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

%struct.inner = type { ptr, ptr, ptr, ptr }

@conn_a = global %struct.inner zeroinitializer, section ".maps", align 8
@outer = global { ptr, ptr, ptr, [1 x ptr] } { ptr null, ptr null, ptr null, [1 x ptr] [ptr @conn_a] }, section ".maps", align 8
@other = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@conn_b = global %struct.inner zeroinitializer, section ".maps", align 8
@llvm.compiler.used = appending global [4 x ptr] [ptr @conn_a, ptr @conn_b, ptr @other, ptr @outer], section "llvm.metadata"

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %k = alloca i32, align 4
  store i32 0, ptr %k, align 4
  %m = call ptr inttoptr (i64 1 to ptr)(ptr @outer, ptr %k)
  %none = icmp eq ptr %m, null
  br i1 %none, label %out, label %inner
inner:
  %v = call ptr inttoptr (i64 1 to ptr)(ptr %m, ptr %k)
  %miss = icmp eq ptr %v, null
  br i1 %miss, label %config, label %count
count:
  %n = load i64, ptr %v, align 8
  %n1 = add i64 %n, 1
  store i64 %n1, ptr %v, align 8
  br label %config
config:
  %o = call ptr inttoptr (i64 1 to ptr)(ptr @other, ptr %k)
  %hit = icmp eq ptr %o, null
  br i1 %hit, label %out, label %read
read:
  %x = load i64, ptr %o, align 8
  %r = trunc i64 %x to i32
  ret i32 %r
out:
  ret i32 2
}

;--- state.json
{"tables": {"conn_a": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 16},
            "conn_b": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 16},
            "other": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "outer": {"type": "array_of_maps", "key_size": 4, "value_size": 4, "max_entries": 4,
                      "inner": {"type": "hash", "key_size": 4, "value_size": 8}}}}

;--- notemplate.json
{"tables": {"conn_a": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 16},
            "conn_b": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 16},
            "other": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "outer": {"type": "array_of_maps", "key_size": 4, "value_size": 4, "max_entries": 4}}}
;--- arrays.json
{"tables": {"conn_a": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 16},
            "conn_b": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 8},
            "other": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "outer": {"type": "array_of_maps", "key_size": 4, "value_size": 4, "max_entries": 4,
                      "inner": {"type": "array", "key_size": 4, "value_size": 8,
                                "max_entries": 16}}}}
