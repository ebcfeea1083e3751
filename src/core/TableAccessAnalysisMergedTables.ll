; Merged table operands: a lookup or update whose table operand is a phi or
; select of the program's tables (alone, or with an inner map) can reach
; each of them and no other table. Katran-style: the per-CPU connection
; table comes out of a map of maps, with a global table as the fallback
; when the CPU's slot is empty, and the flow is inserted into whichever it
; is; a configuration array beside it is only read.
;
; void *t = bpf_map_lookup_elem(&per_cpu, &cpu); if (!t) t = &fallback;
; __u64 *v = bpf_map_lookup_elem(t, &k);
; if (v) *v += 1; else bpf_map_update_elem(t, &k, &one, 0);
; void *s = ctx->ingress ? &stats_a : &stats_b;    // two globals merged
; __u64 *c = bpf_map_lookup_elem(s, &zero); if (c) *c += 1;
; __u64 *o = bpf_map_lookup_elem(&config, &zero); return o ? *o : 2;
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --print-analysis | FileCheck %s
; Specialization never names one table for such a site, and says why.
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=resolve-inner-table,constant-key-lookup \
; RUN:   | FileCheck %s --check-prefix=LOG

; The fallback, which the inner template does not fit (another value
; size), is written by the update and through the lookup's value, at the
; one key the site names; the tables merged by the select likewise.
; CHECK: table config ro
; CHECK: table fallback rw-in-part
; CHECK-DAG: written: map_update_elem in prog (through an inner map of per_cpu or fallback) (key 07 00 00 00)
; CHECK-DAG: written: store (value of an inner map of per_cpu or fallback looked up) (bytes 0..7) (key 07 00 00 00)
; CHECK: table per_cpu ro
; CHECK: table stats_a rw-in-part
; CHECK-NEXT: written: store (value of stats_b or stats_a looked up) (bytes 0..7) (key 00 00 00 00)
; CHECK: table stats_b rw-in-part
; CHECK-NEXT: written: store (value of stats_b or stats_a looked up) (bytes 0..7) (key 00 00 00 00)
; CHECK: site 1 map_lookup_elem ? key=constant constant=07 00 00 00 inner-of=per_cpu candidates=[] merged=[fallback]
; CHECK: site 2 map_update_elem ? key=constant constant=07 00 00 00 inner-of=per_cpu candidates=[] merged=[fallback]
; CHECK: site 3 map_lookup_elem ? key=constant constant=00 00 00 00 merged=[stats_b,stats_a]
; CHECK: site 4 map_lookup_elem config

; LOG-DAG: ; site 1  analysis declined: table operand is an inner map of per_cpu or fallback, merged by a phi or select: not one table
; LOG-DAG: ; site 3  analysis declined: table operand is stats_b or stats_a, merged by a phi or select: not one table
; LOG-DAG: ; site 4 config constant-key-lookup applied

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

%struct.flows = type { ptr, ptr, ptr, ptr }

@fallback = global %struct.flows zeroinitializer, section ".maps", align 8
@per_cpu = global { ptr, ptr, ptr, [1 x ptr] } zeroinitializer, section ".maps", align 8
@stats_a = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@stats_b = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@config = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@llvm.compiler.used = appending global [5 x ptr] [ptr @fallback, ptr @per_cpu, ptr @stats_a, ptr @stats_b, ptr @config], section "llvm.metadata"

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %cpu = alloca i32, align 4
  %k = alloca i32, align 4
  %one = alloca i64, align 8
  store i32 0, ptr %cpu, align 4
  store i32 7, ptr %k, align 4
  store i64 1, ptr %one, align 8
  %inner = call ptr inttoptr (i64 1 to ptr)(ptr @per_cpu, ptr %cpu)
  %empty = icmp eq ptr %inner, null
  %t = select i1 %empty, ptr @fallback, ptr %inner
  %v = call ptr inttoptr (i64 1 to ptr)(ptr %t, ptr %k)
  %miss = icmp eq ptr %v, null
  br i1 %miss, label %insert, label %count
insert:
  %u = call i64 inttoptr (i64 2 to ptr)(ptr %t, ptr %k, ptr %one, i64 0)
  br label %stats
count:
  %n = load i64, ptr %v, align 8
  %n1 = add i64 %n, 1
  store i64 %n1, ptr %v, align 8
  br label %stats
stats:
  %ingress = load i32, ptr %ctx, align 4
  %first = icmp eq i32 %ingress, 0
  %s = select i1 %first, ptr @stats_a, ptr @stats_b
  %c = call ptr inttoptr (i64 1 to ptr)(ptr %s, ptr %cpu)
  %nostat = icmp eq ptr %c, null
  br i1 %nostat, label %config, label %bump
bump:
  %m = load i64, ptr %c, align 8
  %m1 = add i64 %m, 1
  store i64 %m1, ptr %c, align 8
  br label %config
config:
  %o = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %cpu)
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
{"tables": {"fallback": {"type": "lru_hash", "key_size": 4, "value_size": 8, "max_entries": 16},
            "per_cpu": {"type": "array_of_maps", "key_size": 4, "value_size": 4, "max_entries": 2,
                        "inner": {"type": "lru_hash", "key_size": 4, "value_size": 16}},
            "stats_a": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "stats_b": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "config": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1}},
 "maps": {"config": [{"key": "00 00 00 00", "value": "05 00 00 00 00 00 00 00"}]}}
