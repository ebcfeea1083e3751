; A lookup in a hash table the data plane writes only through values (a
; hit counter beside the rule's flags) compares the key with every key the
; table holds: a held key goes on to the real lookup, any other key is
; answered null without it. Tables whose keys the data plane may change, or
; whose lookups have side effects (LRU), keep their lookup.
;
; struct rule { __u32 flags; __u32 pad; __u64 hits; };
; blocked (hash u32 -> rule): r = lookup(&blocked, &saddr); if (r) { r->hits++; return r->flags; }
; sessions (hash u32 -> u64): looked up, and inserted on a miss by the program
; recent (lru_hash u32 -> u64): looked up, counted through the value
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=key-set-filter | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/empty.json -passes=key-set-filter \
; RUN:   | FileCheck %s --check-prefix=EMPTY
; Compares dearer than half the lookup: kept, with both predictions.
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=key-set-filter \
; RUN:   --cost-model %t/slow-compares.json | FileCheck %s --check-prefix=SLOW
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --print-analysis \
; RUN:   | FileCheck %s --check-prefix=ANALYSIS

; The two keys the table holds (10.0.0.100 and 10.0.0.101, network order
; as the packet gives it) lead to the kept lookup; anything else to null.
; CHECK-LABEL: define i32 @prog(
; No compare per key (each would be a branch the verifier walks): the
; bits that differ from each key, hidden from LLVM, reduced to one branch.
; CHECK: [[KEY:%blocked.key[0-9]*]] = load i32, ptr
; CHECK-NOT: icmp
; CHECK: xor i32 [[KEY]], 1677721610
; CHECK: call i64 asm "", "=r,0"
; CHECK: lshr i64 {{.*}}, 63
; CHECK: xor i32 [[KEY]], 1694498826
; CHECK: call i64 asm "", "=r,0"
; CHECK: lshr i64 {{.*}}, 63
; CHECK: [[HELD:%blocked.held]] = icmp eq i64 {{.*}}, 0
; CHECK-NEXT: br i1 [[HELD]], label %blocked.lookup, label
; CHECK: blocked.lookup:
; CHECK-NEXT: call ptr inttoptr (i64 1 to ptr)(ptr @blocked
; CHECK: phi ptr [ null, {{.*}} ], [ %r, %blocked.lookup ]
; The sessions table, whose keys the program inserts, and the LRU keep
; their lookups where they were.
; CHECK: call ptr inttoptr (i64 1 to ptr)(ptr @sessions
; CHECK: call ptr inttoptr (i64 1 to ptr)(ptr @recent

; A constant key the table holds keeps its lookup; one it does not hold
; is null.
; CHECK-LABEL: define i32 @constant_keys(
; CHECK: call ptr inttoptr (i64 1 to ptr)(ptr @blocked, ptr {{.*}}%held)
; CHECK-NOT: call ptr inttoptr (i64 1 to ptr)(ptr @blocked
; CHECK: ret i32
; CHECK-DAG: ; site 4 blocked key-set-filter declined: the table holds the constant key: the lookup answers
; CHECK-DAG: ; site 5 blocked key-set-filter applied: the table does not hold the constant key: answered null without the lookup
; CHECK-DAG: ; site 0 blocked key-set-filter applied: a key that is none of the table's 2 keys is answered null without the lookup
; CHECK-DAG: ; site 1 sessions key-set-filter declined: the data plane may add or remove keys: map_update_elem in prog
; CHECK-DAG: ; site 3 recent key-set-filter declined: its lookups have side effects (lru_hash)

; EMPTY-NOT: call ptr inttoptr (i64 1 to ptr)(ptr @blocked
; EMPTY: ; site 0 blocked key-set-filter applied: a key that is none of the table's 0 keys

; SLOW: call ptr inttoptr (i64 1 to ptr)(ptr @blocked
; SLOW: ; site 0 blocked key-set-filter declined: the compares over 2 keys (40.0 ns) cost more than half the lookup (29.0 ns)

; ANALYSIS: table blocked rw-in-part
; ANALYSIS: table recent rw
; ANALYSIS: table sessions rw

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@blocked = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@sessions = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@recent = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@llvm.compiler.used = appending global [3 x ptr] [ptr @blocked, ptr @sessions, ptr @recent], section "llvm.metadata"

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %saddr = alloca i32, align 4
  %one = alloca i64, align 8
  %source = load i32, ptr %ctx, align 4
  store i32 %source, ptr %saddr, align 4
  store i64 1, ptr %one, align 8
  %r = call ptr inttoptr (i64 1 to ptr)(ptr @blocked, ptr %saddr)
  %miss = icmp eq ptr %r, null
  br i1 %miss, label %session, label %hit
hit:
  %hits = getelementptr inbounds i8, ptr %r, i64 8
  %old = atomicrmw add ptr %hits, i64 1 seq_cst, align 8
  %flags = load i32, ptr %r, align 4
  ret i32 %flags
session:
  %s = call ptr inttoptr (i64 1 to ptr)(ptr @sessions, ptr %saddr)
  %new = icmp eq ptr %s, null
  br i1 %new, label %insert, label %recent
insert:
  %u = call i64 inttoptr (i64 2 to ptr)(ptr @sessions, ptr %saddr, ptr %one, i64 0)
  br label %recent
recent:
  %c = call ptr inttoptr (i64 1 to ptr)(ptr @recent, ptr %saddr)
  %none = icmp eq ptr %c, null
  br i1 %none, label %out, label %count
count:
  %n = load i64, ptr %c, align 8
  %n1 = add i64 %n, 1
  store i64 %n1, ptr %c, align 8
  br label %out
out:
  ret i32 2
}

define i32 @constant_keys(ptr %ctx) section "xdp" {
entry:
  %held = alloca i32, align 4
  %absent = alloca i32, align 4
  store i32 1677721610, ptr %held, align 4
  store i32 117440522, ptr %absent, align 4
  %a = call ptr inttoptr (i64 1 to ptr)(ptr @blocked, ptr %held)
  %b = call ptr inttoptr (i64 1 to ptr)(ptr @blocked, ptr %absent)
  %x = icmp eq ptr %a, null
  %y = icmp eq ptr %b, null
  %both = and i1 %x, %y
  %r = zext i1 %both to i32
  ret i32 %r
}

;--- state.json
{"tables": {"blocked": {"type": "hash", "key_size": 4, "value_size": 16, "max_entries": 64},
            "sessions": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 64},
            "recent": {"type": "lru_hash", "key_size": 4, "value_size": 8, "max_entries": 64}},
 "maps": {"blocked": [{"key": "0a000064", "value": "01000000 00000000 0500000000000000"},
                      {"key": "0a000065", "value": "03000000 00000000 0000000000000000"}]}}
;--- empty.json
{"tables": {"blocked": {"type": "hash", "key_size": 4, "value_size": 16, "max_entries": 64},
            "sessions": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 64},
            "recent": {"type": "lru_hash", "key_size": 4, "value_size": 8, "max_entries": 64}},
 "maps": {"blocked": []}}
;--- slow-compares.json
{"format": 3, "source": "test: slow compares", "hash_lookup_ns": 29,
 "lpm_lookup_ns": [[2, 22], [4096, 44]], "array_lookup_ns": 0.6, "compare_ns": [[64, 20]],
 "search_level_ns": [[4, 3]], "derived_load_ns": [[4096, 1]], "helper_call_ns": 8}
