; Loads of bytes the data plane never writes, through a lookup with a
; constant key, become the snapshot's bytes; the lookup stays, so the
; counter beside them is still written in the real entry.
;
; struct rule { __u32 action; __u32 port; __u64 hits; };
; rules (array): r = lookup(&rules, &zero); if (r) { r->hits++ (atomic); return r->action + r->port; }
; stats (hash): key 0 config, key 1 an atomic counter:
;   c = lookup(&stats, &one); if (c) atomic c->count++;  cfg = lookup(&stats, &zero); return cfg->limit;
; wild (array): written at an offset the analysis cannot know: nothing to fold.
; acl (array), an unrolled rule scan whose matches LLVM merges into one block:
;   for (i = 0; i < 2; i++) { r = lookup(&acl, &i); if (r && r->port == tos) { hit = r; break; } }
;   if (hit) { atomic hit->hits++; return hit->action; }   -- the counter is
;   written through a phi of both lookups, at a known offset: ports still fold.
;   A phi of r and r + 8 points at two offsets: every byte of key 0 is written.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=fold-read-only-fields | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --print-analysis | FileCheck %s --check-prefix=ANALYSIS
; rules as a PERCPU_ARRAY whose per-CPU hit counters differ: the configuration
; bytes every CPU holds alike still fold; a port that differs between CPUs
; does not.
; RUN: morpheus-opt %t/prog.ll --state %t/percpu.json -passes=fold-read-only-fields \
; RUN:   | FileCheck %s --check-prefix=PERCPU
; RUN: morpheus-opt %t/prog.ll --state %t/percpu-port.json -passes=fold-read-only-fields \
; RUN:   | FileCheck %s --check-prefix=PORT

; ANALYSIS: table acl rw-in-part
; ANALYSIS-DAG: value write: key 00 00 00 00 bytes 8..15
; ANALYSIS-DAG: value write: key 01 00 00 00 bytes 8..15
; ANALYSIS: table rules rw-in-part
; ANALYSIS-NEXT: written: atomic update
; ANALYSIS-NEXT: value write: key 00 00 00 00 bytes 8..15
; ANALYSIS: table shifted rw-in-part
; ANALYSIS: value write: key 00 00 00 00 whole value
; ANALYSIS: table stats rw-in-part
; ANALYSIS-NEXT: written: atomic update
; ANALYSIS-NEXT: value write: key 01 00 00 00 bytes 0..7
; ANALYSIS: table wild rw-in-part
; ANALYSIS-NEXT: written: store
; ANALYSIS-NEXT: value write: key 00 00 00 00 whole value

; CHECK-LABEL: define i32 @rule_with_counter(
; The lookup stays for the counter.
; CHECK:         %r = call ptr inttoptr (i64 1 to ptr)(ptr @rules
; CHECK:         atomicrmw add ptr %hits
; action = 2, port = 443: the loads are gone.
; CHECK-NOT:     load i32
; CHECK:         %sum = add i32 2, 443
; CHECK-LABEL: define i32 @config_beside_counter(
; CHECK:         atomicrmw add ptr %c
; Key 0 is never written: its field folds.
; CHECK:         %cfg = call ptr inttoptr (i64 1 to ptr)(ptr @stats
; CHECK-NOT:     load i64, ptr %cfg
; CHECK:         %limit.trunc = trunc i64 1000 to i32
; Must not fire: the write's offset is unknown, so every byte of key 0 may change.
; CHECK-LABEL: define i32 @unknown_offset(
; CHECK:         %x = load i32, ptr %w

; CHECK-LABEL: define i32 @merged_counter(
; CHECK-NOT:     load i32, ptr %p0port
; CHECK:         icmp eq i32 443, %tos
; CHECK-NOT:     load i32, ptr %p1port
; CHECK:         icmp eq i32 22, %tos
; CHECK:         atomicrmw add ptr %hitsp
; CHECK-LABEL: define i32 @shifted_pointer(
; CHECK:         load i32, ptr %s

; Every byte of wild's key 0 may be written: declined up front.
; CHECK: ; site 3 wild analysis declined: table is written by the data plane
; CHECK: ; site 0 rules fold-read-only-fields applied: 2 loads of read-only bytes folded; the lookup stays for the writes
; CHECK: ; site 2 stats fold-read-only-fields applied: 1 load of read-only bytes folded

; PERCPU-LABEL: define i32 @rule_with_counter(
; PERCPU:         atomicrmw add ptr %hits
; PERCPU-NOT:     load i32
; PERCPU:         %sum = add i32 2, 443
; PERCPU: ; site 0 rules fold-read-only-fields applied: 2 loads of read-only bytes folded

; PORT-LABEL: define i32 @rule_with_counter(
; PORT:         %port = load i32, ptr %portp
; PORT:         %sum = add i32 2, %port
; PORT: ; site 0 rules fold-read-only-fields applied: 1 load of read-only bytes folded

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@rules = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@stats = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@wild = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@acl = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@shifted = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @rule_with_counter(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %r = call ptr inttoptr (i64 1 to ptr)(ptr @rules, ptr %key)
  %miss = icmp eq ptr %r, null
  br i1 %miss, label %out, label %hit
hit:
  %hits = getelementptr i8, ptr %r, i64 8
  %old = atomicrmw add ptr %hits, i64 1 seq_cst
  %action = load i32, ptr %r, align 4
  %portp = getelementptr i8, ptr %r, i64 4
  %port = load i32, ptr %portp, align 4
  %sum = add i32 %action, %port
  ret i32 %sum
out:
  ret i32 0
}

define i32 @config_beside_counter(ptr %ctx) section "xdp" {
entry:
  %one = alloca i32, align 4
  %zero = alloca i32, align 4
  store i32 1, ptr %one, align 4
  %c = call ptr inttoptr (i64 1 to ptr)(ptr @stats, ptr %one)
  %nc = icmp eq ptr %c, null
  br i1 %nc, label %config, label %count
count:
  %old = atomicrmw add ptr %c, i64 1 seq_cst
  br label %config
config:
  store i32 0, ptr %zero, align 4
  %cfg = call ptr inttoptr (i64 1 to ptr)(ptr @stats, ptr %zero)
  %ncfg = icmp eq ptr %cfg, null
  br i1 %ncfg, label %out, label %read
read:
  %limit = load i64, ptr %cfg, align 8
  %limit.trunc = trunc i64 %limit to i32
  ret i32 %limit.trunc
out:
  ret i32 0
}

define i32 @unknown_offset(ptr %ctx, i64 %i) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %w = call ptr inttoptr (i64 1 to ptr)(ptr @wild, ptr %key)
  %miss = icmp eq ptr %w, null
  br i1 %miss, label %out, label %hit
hit:
  %slot = getelementptr i8, ptr %w, i64 %i
  store i8 1, ptr %slot, align 1
  %x = load i32, ptr %w, align 4
  ret i32 %x
out:
  ret i32 0
}

define i32 @merged_counter(ptr %ctx, i32 %tos) section "xdp" {
entry:
  %k0 = alloca i32, align 4
  %k1 = alloca i32, align 4
  store i32 0, ptr %k0, align 4
  %p0 = call ptr inttoptr (i64 1 to ptr)(ptr @acl, ptr %k0)
  %n0 = icmp eq ptr %p0, null
  br i1 %n0, label %second, label %test0
test0:
  %p0port = getelementptr inbounds i8, ptr %p0, i64 4
  %port0 = load i32, ptr %p0port, align 4
  %m0 = icmp eq i32 %port0, %tos
  br i1 %m0, label %hit, label %second
second:
  store i32 1, ptr %k1, align 4
  %p1 = call ptr inttoptr (i64 1 to ptr)(ptr @acl, ptr %k1)
  %n1 = icmp eq ptr %p1, null
  br i1 %n1, label %miss, label %test1
test1:
  %p1port = getelementptr inbounds i8, ptr %p1, i64 4
  %port1 = load i32, ptr %p1port, align 4
  %m1 = icmp eq i32 %port1, %tos
  br i1 %m1, label %hit, label %miss
hit:
  %r = phi ptr [ %p0, %test0 ], [ %p1, %test1 ]
  %hitsp = getelementptr inbounds i8, ptr %r, i64 8
  %old = atomicrmw add ptr %hitsp, i64 1 seq_cst
  %action = load i32, ptr %r, align 4
  ret i32 %action
miss:
  ret i32 0
}

define i32 @shifted_pointer(ptr %ctx, i1 %c) section "xdp" {
entry:
  %k = alloca i32, align 4
  store i32 0, ptr %k, align 4
  %s = call ptr inttoptr (i64 1 to ptr)(ptr @shifted, ptr %k)
  %ns = icmp eq ptr %s, null
  br i1 %ns, label %out, label %use
use:
  %s8 = getelementptr inbounds i8, ptr %s, i64 8
  %either = select i1 %c, ptr %s, ptr %s8
  store i32 1, ptr %either, align 4
  %x = load i32, ptr %s, align 4
  ret i32 %x
out:
  ret i32 0
}

;--- state.json
{"tables": {"rules": {"type": "array", "key_size": 4, "value_size": 16, "max_entries": 4},
            "stats": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 4},
            "wild": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "acl": {"type": "array", "key_size": 4, "value_size": 16, "max_entries": 2},
            "shifted": {"type": "array", "key_size": 4, "value_size": 16, "max_entries": 1}},
 "maps": {"rules": [{"key": "00000000", "value": "02000000 bb010000 0500000000000000"}],
          "stats": [{"key": "00000000", "value": "e803000000000000"},
                    {"key": "01000000", "value": "0700000000000000"}],
          "wild": [{"key": "00000000", "value": "0900000000000000"}],
          "acl": [{"key": "00000000", "value": "03000000 bb010000 0000000000000000"},
                  {"key": "01000000", "value": "02000000 16000000 0000000000000000"}],
          "shifted": [{"key": "00000000", "value": "01000000 02000000 0000000000000000"}]}}

;--- percpu.json
{"tables": {"rules": {"type": "percpu_array", "key_size": 4, "value_size": 16, "max_entries": 4},
            "stats": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 4},
            "wild": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "acl": {"type": "array", "key_size": 4, "value_size": 16, "max_entries": 2},
            "shifted": {"type": "array", "key_size": 4, "value_size": 16, "max_entries": 1}},
 "maps": {"rules": [{"key": "00000000", "values": ["02000000 bb010000 0500000000000000",
                                                  "02000000 bb010000 0900000000000000"]}]}}

;--- percpu-port.json
{"tables": {"rules": {"type": "percpu_array", "key_size": 4, "value_size": 16, "max_entries": 4},
            "stats": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 4},
            "wild": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "acl": {"type": "array", "key_size": 4, "value_size": 16, "max_entries": 2},
            "shifted": {"type": "array", "key_size": 4, "value_size": 16, "max_entries": 1}},
 "maps": {"rules": [{"key": "00000000", "values": ["02000000 bb010000 0500000000000000",
                                                  "02000000 bc010000 0900000000000000"]}]}}
