; A lookup in a read-only table a custom generator serves becomes the
; generator's code (linked in, its own name per site) and a switch from the
; entry index it returns to that entry's value address; -1 is null, any
; other answer keeps the real lookup on that path. The generator here
; (gen.ll, what a handler's author would make from the routes) answers
; 10.x.x.x with entry 1 (10.0.0.0/8), everything else with entry 0 (the
; default route), and leaves keys of other prefix lengths to the table.
; Routes: 0.0.0.0/0 (entry 0), 10.0.0.0/8 (1), 10.1.0.0/16 (2).
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=custom-generator --generator routes=%t/gen.ll:pick --generator seen=%t/gen.ll:pick | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=custom-generator --generator routes=%t/gen.ll:writes | FileCheck %s --check-prefix=WRITES
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=custom-generator --generator routes=%t/gen.ll:calls | FileCheck %s --check-prefix=CALLS
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=custom-generator --generator routes=%t/gen.ll:absent | FileCheck %s --check-prefix=ABSENT
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=custom-generator | FileCheck %s --check-prefix=NONE

; C: struct route_key { __u32 prefixlen; __u32 addr; } key = { 32, iph->daddr };
;    route = bpf_map_lookup_elem(&routes, &key);
; CHECK-LABEL: define i32 @route(
; CHECK:         [[KEY:%routes.key.memory.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    [[INDEX:%routes.generated.*]] = call i64 @__morpheus.generated.routes.0(ptr [[KEY]])
; CHECK-NEXT:    switch i64 [[INDEX]], label %routes.ask.table [
; CHECK-NEXT:      i64 -1, label %routes.generated.miss
; CHECK-NEXT:      i64 0, label %routes.generated.entry
; CHECK-NEXT:      i64 1, label %routes.generated.entry{{[0-9]+}}
; CHECK-NEXT:      i64 2, label %routes.generated.entry{{[0-9]+}}
; CHECK-NEXT:    ]
; CHECK:       routes.ask.table:
; CHECK-NEXT:    [[KEPT:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key){{.*}}!morpheus.kept
; Each entry its own address in the value array; null for a miss.
; CHECK:         phi ptr [ null, %routes.generated.miss ], [ @__morpheus.routes.values, %routes.generated.entry ], [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 8), %{{.*}} ], [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 16), %{{.*}} ], [ [[KEPT]], %routes.ask.table ]
; CHECK-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key){{$}}
;
; A trie the data plane writes stays a lookup, generator or not.
; CHECK-LABEL: define i32 @learn(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @seen
; The generator's function, internal, inlined by O2; its helper renamed
; beside the program's own @helper.
; CHECK-LABEL: define internal i64 @__morpheus.generated.routes.0(ptr %key)
; CHECK:       define internal i32 @helper{{[.0-9]+}}(
; CHECK: ; site 0 routes custom-generator applied: generator '{{.*}}gen.ll' over 3 entries; keys it leaves keep the lookup
; CHECK-NOT: ; site {{[0-9]+}} seen custom-generator applied

; WRITES-LABEL: define i32 @route(
; WRITES:         call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; WRITES: ; site 0 routes custom-generator declined: generator '{{.*}}gen.ll': its function 'writes': it writes memory off its stack
; CALLS: ; site 0 routes custom-generator declined: generator '{{.*}}gen.ll': its function 'calls': it calls 'external', not defined in its code
; ABSENT: ; site 0 routes custom-generator declined: generator '{{.*}}gen.ll': no function 'absent' in its code
; No generator: the pass does nothing.
; NONE-LABEL: define i32 @route(
; NONE:         call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; NONE-NOT:     custom-generator

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@seen = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define internal i32 @helper(i32 %x) {
  ret i32 %x
}

define i32 @route(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  store i32 32, ptr %key, align 4
  %daddr = load i32, ptr %ctx, align 4
  %addrp = getelementptr i8, ptr %key, i64 4
  store i32 %daddr, ptr %addrp, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  %r = call i32 @helper(i32 %out)
  ret i32 %r
miss:
  ret i32 1
}

; C: bpf_map_update_elem(&seen, &key, &one, BPF_ANY) after a lookup
define i32 @learn(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %one = alloca i32, align 4
  store i32 1, ptr %one, align 4
  store i32 32, ptr %key, align 4
  %daddr = load i32, ptr %ctx, align 4
  %addrp = getelementptr i8, ptr %key, i64 4
  store i32 %daddr, ptr %addrp, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @seen, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  ret i32 2
miss:
  %r = call i64 inttoptr (i64 2 to ptr)(ptr @seen, ptr %key, ptr %one, i64 0)
  ret i32 1
}

;--- gen.ll
; C: long long pick(const void *key) { if (len != 32) return -2;
;      return helper(first byte) == 10 ? 1 : 0; }
@count = global i64 0

define internal i32 @helper(i32 %x) {
  ret i32 %x
}

define i64 @pick(ptr %key) {
  %length = load i32, ptr %key, align 4
  %whole = icmp eq i32 %length, 32
  br i1 %whole, label %address, label %ask
address:
  %at = getelementptr i8, ptr %key, i64 4
  %first = load i8, ptr %at, align 1
  %wide = zext i8 %first to i32
  %same = call i32 @helper(i32 %wide)
  %ten = icmp eq i32 %same, 10
  %index = select i1 %ten, i64 1, i64 0
  ret i64 %index
ask:
  ret i64 -2
}

; A generator that counts: it writes a global.
define i64 @writes(ptr %key) {
  %old = load i64, ptr @count, align 8
  %new = add i64 %old, 1
  store i64 %new, ptr @count, align 8
  ret i64 0
}

declare i64 @external(ptr)

define i64 @calls(ptr %key) {
  %r = call i64 @external(ptr %key)
  ret i64 %r
}

;--- state.json
{"tables": {"routes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1},
            "seen": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"routes": [{"key": "00000000 00000000", "value": "01000000"},
                     {"key": "08000000 0a000000", "value": "02000000"},
                     {"key": "10000000 0a010000", "value": "03000000"}],
          "seen": [{"key": "20000000 0a000001", "value": "01000000"}]}}
