; A small read-only table becomes a compare chain over every key byte, each
; hit yielding the address of that entry's value. The key is read through an
; opaque copy of its pointer, in the widest chunks its alignment allows, so
; it stays in memory and every byte compares as memory holds it; a key with
; bytes the program never writes (padding) is declined. Arrays whose
; snapshot does not list every index keep the lookup for the others; over
; the verifier budget a chain yields an index instead of constants.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table --inline-limit 1 | FileCheck %s --check-prefix=LIMIT
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table --cleanup | FileCheck %s --check-prefix=FOLDED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table --verifier-paths 2 | FileCheck %s --check-prefix=BUDGET
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table -stats 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table --verifier-paths 2 -stats 2>&1 >/dev/null | FileCheck %s --check-prefix=BUDGET-STATS
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=inline-small-table 2>&1 >/dev/null | FileCheck %s --allow-empty --check-prefix=NO-STATS

; CHECK-LABEL: define i32 @route(
; CHECK:         [[KEY:%routes.key.memory.*]] = call ptr asm "", "=r,0"(ptr %key) #[[NOMEMORY:[0-9]+]]
; CHECK-NEXT:    [[K0:%routes.key.*]] = load i32, ptr [[KEY]], align 4
; CHECK-NEXT:    [[AT:%.*]] = getelementptr inbounds i8, ptr [[KEY]], i32 4
; CHECK-NEXT:    [[K1:%routes.key.*]] = load i16, ptr [[AT]], align 2
; CHECK-NOT:     freeze
; CHECK:         icmp eq i32 [[K0]], 16777226
; CHECK:         icmp eq i16 [[K1]], 20480
; CHECK:         icmp eq i32 [[K0]], 33554442
; Equal values, distinct entries: distinct addresses, as in the kernel.
; CHECK:         phi ptr [ @__morpheus.routes.values, %{{.*}} ], [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 8), %{{.*}} ], [ null, %{{.*}} ]
; CHECK-NOT:     inttoptr (i64 1 to ptr)(ptr @routes
; The padding bytes (1-3) are never written: the helper compares what the
; stack holds there, which differs between the original's frame and the
; specialized one's, so the lookup stays.
; CHECK-LABEL: define i32 @padded_key(
; CHECK-NOT:     asm
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr nocapture readonly %key)
; An array whose snapshot lists indexes 0 and 1 of 4: the others exist and
; keep the real lookup, on the miss path only.
; CHECK-LABEL: define i32 @partial_array(
; CHECK:         icmp eq i32 {{.*}}, 0
; CHECK:         icmp eq i32 {{.*}}, 1
; CHECK:         [[KEPT:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @levels, ptr {{.*}}%key){{.*}}!morpheus.kept
; CHECK:         phi ptr [ @__morpheus.levels.values, %{{.*}} ], [ getelementptr inbounds (i8, ptr @__morpheus.levels.values, i64 8), %{{.*}} ], [ [[KEPT]], %{{.*}} ]
; Every index listed: a miss is an index beyond the array, null.
; CHECK-LABEL: define i32 @whole_array(
; CHECK-NOT:     inttoptr (i64 1 to ptr)(ptr @flags
; CHECK:         [ null, %{{.*}} ]
; The value goes to a global function: the verifier would refuse an
; inlined read-only value there.
; CHECK-LABEL: define i32 @to_global_function(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @verdicts
; CHECK:       attributes #[[NOMEMORY]] = { memory(none) }
; CHECK: ; site 1 flows analysis declined: key bytes 1..3 are never written: the kernel compares the stack's stale bytes, which no rewrite can reproduce
; CHECK: ; site 4 verdicts analysis declined: value passed to global function 'decide', which the verifier checks with writable pointer arguments

; With room for one entry only, the two-entry table stays a real lookup.
; LIMIT-LABEL: define i32 @route(
; LIMIT:         call ptr inttoptr (i64 1 to ptr)(ptr @routes

; Both entries send to port 3, so after the clean-up the port is a constant; the key
; stays in memory (padding included) and is read through the opaque copy.
; FOLDED-LABEL: define {{.*}}i32 @route(
; FOLDED:         %key = alloca [6 x i8], align 4
; FOLDED:         call ptr asm "", "=r,0"(ptr {{.*}}%key)
; FOLDED-NOT:     load i32, ptr @__morpheus
; FOLDED:         ret i32

; Over a budget of two paths per program, chains yield an index hidden from
; the optimizer, and the value is read from the table's value array there.
; BUDGET-LABEL: define i32 @route(
; BUDGET:         routes.found:
; BUDGET-NEXT:    [[INDEX:%routes.index.*]] = phi i64 [ 0, %{{.*}} ], [ 1, %{{.*}} ]
; BUDGET-NEXT:    [[HIDDEN:%.*]] = call i64 asm "", "=r,0"(i64 [[INDEX]])
; BUDGET-NEXT:    [[OFFSET:%.*]] = mul i64 [[HIDDEN]], 8
; BUDGET-NEXT:    [[ENTRY:%.*]] = getelementptr inbounds i8, ptr @__morpheus.routes.values, i64 [[OFFSET]]
; BUDGET:         phi ptr [ [[ENTRY]], %routes.found ], [ null, %{{.*}} ]
; An array's lookup, which the verifier inlines, is what such a chain saves:
; the model prices the chain at no less, so the arrays keep their lookups.
; BUDGET-LABEL: define i32 @ring_slot(
; BUDGET:         call ptr inttoptr (i64 1 to ptr)(ptr @rings
; BUDGET: ; site 0 routes inline-small-table applied: 2 entries inlined as compares, yielding an index into their values (verifier budget)
; BUDGET: ; site 5 rings inline-small-table declined: a chain yielding an index (verifier budget) folds no value and is not faster than the lookup; predicted map 0.6 ns, compare chain 1.8 ns (chosen: map; default costs)

; What the pass did, counted: -stats prints its statistics on stderr, by
; pass. Four chains over 2 + 2 + 2 + 8 entries; the padded key and the
; value handed to a global function were declined before the pass, not by it.
; STATS:      Statistics Collected
; STATS:      14 inline-small-table - entries compared in those chains
; STATS-NEXT:  4 inline-small-table - lookups replaced by a compare chain over every entry
; STATS-NOT:  inline-small-table
; Over the budget: one chain, yielding an index; the three arrays declined.
; BUDGET-STATS:      2 inline-small-table - entries compared in those chains
; BUDGET-STATS-NEXT: 1 inline-small-table - chains yielding an index, not constants (verifier budget)
; BUDGET-STATS-NEXT: 3 inline-small-table - lookups of tables read whole left alone
; BUDGET-STATS-NEXT: 1 inline-small-table - lookups replaced by a compare chain over every entry
; Without -stats, nothing.
; NO-STATS-NOT: Statistics

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@flows = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@levels = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@flags = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@verdicts = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@rings = global { ptr, ptr } zeroinitializer, section ".maps", align 8

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

; C: struct { u8 protocol; /* 3 bytes never written */ u32 address; } key;
;    key.protocol = ...; key.address = ...; lookup(&flows, &key)
define i32 @padded_key(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %protocol = load i8, ptr %ctx, align 1
  store i8 %protocol, ptr %key, align 4
  %addressp = getelementptr i8, ptr %ctx, i64 4
  %address = load i32, ptr %addressp, align 4
  %keyaddress = getelementptr i8, ptr %key, i64 4
  store i32 %address, ptr %keyaddress, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 1, i32 2
  ret i32 %verdict
}

define i32 @partial_array(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %index = load i32, ptr %ctx, align 4
  store i32 %index, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @levels, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %level = load i32, ptr %v, align 4
  ret i32 %level
miss:
  ret i32 0
}

define i32 @whole_array(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %index = load i32, ptr %ctx, align 4
  store i32 %index, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flags, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 0
  ret i32 %verdict
}

; C: int decide(const struct verdict *v) { ... }   /* global, not static */
define i32 @decide(ptr nocapture readonly %verdict) {
  %action = load i32, ptr %verdict, align 4
  ret i32 %action
}

define i32 @to_global_function(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @verdicts, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %verdict = call i32 @decide(ptr %v)
  ret i32 %verdict
miss:
  ret i32 2
}

define i32 @ring_slot(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %index = load i32, ptr %ctx, align 4
  store i32 %index, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @rings, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %slot = load i32, ptr %v, align 4
  ret i32 %slot
miss:
  ret i32 0
}

;--- state.json
{"tables": {"routes": {"type": "hash", "key_size": 6, "value_size": 4, "max_entries": 1024},
            "flows": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 16},
            "levels": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 4},
            "flags": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 2},
            "verdicts": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 16},
            "rings": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 8}},
 "maps": {"routes": [{"key": "0a000001 0050", "value": "03000000"},
                     {"key": "0a000002 0050", "value": "03000000"}],
          "flows": [{"key": "11000000 0a000001", "value": "01000000"}],
          "levels": [{"key": "00000000", "value": "05000000"},
                     {"key": "01000000", "value": "06000000"}],
          "flags": [{"key": "00000000", "value": "01000000"},
                    {"key": "01000000", "value": "00000000"}],
          "verdicts": [{"key": "01000000", "value": "01000000"}],
          "rings": [{"key": "00000000", "value": "01000000"}, {"key": "01000000", "value": "02000000"},
                    {"key": "02000000", "value": "03000000"}, {"key": "03000000", "value": "04000000"},
                    {"key": "04000000", "value": "05000000"}, {"key": "05000000", "value": "06000000"},
                    {"key": "06000000", "value": "07000000"}, {"key": "07000000", "value": "08000000"}]}}
