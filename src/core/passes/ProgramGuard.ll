; The guard goes where the kernel enters specialized code: every program
; entry and every callback (a function whose address the program takes),
; unless nothing it reaches is specialized. In-program fallback: a generic
; copy of the root (and of what it calls that was specialized) is kept and
; called on a stale version. Tail-call fallback: the original program in
; the entry's slot. A guard that cannot be placed fails the specialization.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 | FileCheck %s --check-prefix=TAIL
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 --failure-verdict 2 | FileCheck %s --check-prefix=SHOT
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 --fallback in-program | FileCheck %s --check-prefix=INPROG
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 --fallback none | FileCheck %s --check-prefix=NONE
; RUN: morpheus-opt %t/prog.ll --state %t/state.json | FileCheck %s --check-prefix=UNGUARDED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 --version-slots | FileCheck %s --check-prefix=SLOTS
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 --fallback in-program --version-slots | FileCheck %s --check-prefix=SLOTSIN
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 --fallback in-program --inline-limit 2 -passes=constant-key-lookup,inline-small-table,lpm-as-code | FileCheck %s --check-prefix=ELIDED
; RUN: not morpheus-opt %t/noctx.ll --state %t/state.json --guard-version 7 2>&1 | FileCheck %s --check-prefix=NOCTX
; RUN: not morpheus-opt %t/noruntime.ll --state %t/state.json --guard-version 7 --fallback in-program 2>&1 | FileCheck %s --check-prefix=NORUNTIME

; TAIL-LABEL: define i32 @first(ptr %ctx)
; TAIL-NEXT:  morpheus.guard:
; TAIL-NEXT:    %zero = alloca i32
; TAIL-NEXT:    [[G:%.*]] = call i64 @morpheus_guard_enter(ptr %ctx, i64 7, i32 0, i32 0)
; TAIL-NEXT:    [[OK:%.*]] = icmp slt i64 [[G]], 0
; TAIL-NEXT:    br i1 [[OK]], label %entry, label %morpheus.fallback
; TAIL:       morpheus.fallback:
; TAIL-NEXT:    [[V:%.*]] = trunc i64 [[G]] to i32
; TAIL-NEXT:    ret i32 [[V]]
; TAIL-LABEL: define i32 @second(ptr %ctx)
; TAIL:         call i64 @morpheus_guard_enter(ptr %ctx, i64 7, i32 1, i32 0)
; The verdict returned when the original cannot be reached is the
; backend's, per program type (2 = TC_ACT_SHOT for a TC entry).
; SHOT-LABEL: define i32 @first(ptr %ctx)
; SHOT:         call i64 @morpheus_guard_enter(ptr %ctx, i64 7, i32 0, i32 2)
; SHOT-LABEL: define i32 @second(ptr %ctx)
; SHOT:         call i64 @morpheus_guard_enter(ptr %ctx, i64 7, i32 1, i32 2)
; Nothing specialized below it: no guard.
; TAIL-LABEL: define i32 @untouched(ptr %ctx)
; TAIL-NOT:     @morpheus_guard
; TAIL:         ret i32
; Helpers of the programs are not roots.
; TAIL-LABEL: define internal i32 @read_config(
; TAIL-NOT:     @morpheus_guard
; TAIL-NOT:     generic
; A callback cannot tail-call: with its program falling back by tail call,
; it is left generic (and unguarded).
; TAIL-LABEL: define internal i64 @add_one(
; TAIL-NOT:     @morpheus_guard
; TAIL:         call ptr inttoptr (i64 1 to ptr)(ptr @config
; TAIL: ; guard first: tail call: morpheus-opt --fallback
; TAIL: ; guard untouched: none: nothing it reaches is specialized: no guard
; TAIL: ; guard add_one: none: callback of program 'looping', whose fallback is tail call (morpheus-opt --fallback); a callback can only fall back inside the program
; TAIL: ; site {{[0-9]+}} config analysis declined: runs under 'add_one', which has no guard

; INPROG-LABEL: define i32 @first(ptr %ctx)
; INPROG-NEXT:  morpheus.guard:
; INPROG-NEXT:    %zero = alloca i32
; INPROG-NEXT:    [[H:%.*]] = call i32 @morpheus_guard_holds(i64 7)
; INPROG-NEXT:    [[OK:%.*]] = icmp ne i32 [[H]], 0
; INPROG-NEXT:    br i1 [[OK]], label %entry, label %morpheus.fallback
; INPROG:       morpheus.fallback:
; INPROG-NEXT:    [[R:%.*]] = call i32 @first__morpheus_generic(ptr %ctx)
; INPROG-NEXT:    ret i32 [[R]]
; INPROG:       entry:
; INPROG-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr @config
; INPROG:         ret i32
; INPROG-LABEL: define i32 @second(ptr %ctx)
; INPROG:         call i32 @second__morpheus_generic(ptr %ctx)
; INPROG-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr @config
; A callback falls back inside the program too: it checks the guard itself.
; INPROG-LABEL: define internal i64 @add_one(
; INPROG:         call i32 @morpheus_guard_holds(i64 7)
; INPROG:         call i64 @add_one__morpheus_generic(i32 %index, ptr %sum)
; Under the default inline limit, lpm-as-code turns @route's lookup into
; code: guarded (see ELIDED for the limit of 2).
; INPROG-LABEL: define i32 @route(ptr %ctx)
; INPROG:         call i32 @morpheus_guard_holds(i64 7)
; The generic copies: untouched by the table passes, internal, in .text,
; inlined into their root (alwaysinline), calling generic copies only.
; INPROG-LABEL: define internal i32 @first__morpheus_generic(ptr %ctx)
; INPROG-SAME:    #[[INLINE:[0-9]+]] {
; INPROG:         call ptr inttoptr (i64 1 to ptr)(ptr @config
; INPROG-LABEL: define internal i32 @second__morpheus_generic(ptr %ctx)
; INPROG:         call i32 @read_config__morpheus_generic()
; INPROG-LABEL: define internal i32 @read_config__morpheus_generic()
; INPROG:         call ptr inttoptr (i64 1 to ptr)(ptr @config
; INPROG-LABEL: define internal i64 @add_one__morpheus_generic(
; INPROG:         call ptr inttoptr (i64 1 to ptr)(ptr @config
; INPROG:       attributes #[[INLINE]] = { alwaysinline }
; INPROG: ; guard add_one: in-program: callback: falls back inside the program

; Guard elision: with 3 prefixes over the inline limit of 2, every pass
; run declines the site in @route (lpm-as-array, which would derive a table
; for it, is not run); its code is what it was, and holds for any
; contents of the table: no guard, and no generic copy. @first, whose
; lookup became a constant, keeps its guard.
; ELIDED-LABEL: define i32 @first(ptr %ctx)
; ELIDED:         call i32 @morpheus_guard_holds(i64 7)
; ELIDED-LABEL: define i32 @route(ptr %ctx)
; ELIDED-NOT:     @morpheus_guard
; ELIDED:         call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; ELIDED-NOT:   define {{.*}}@route__morpheus_generic
; ELIDED: ; guard first: in-program: morpheus-opt --fallback
; ELIDED: ; guard route: none: the table passes changed nothing it reaches (no entry inlined, no field folded, no fast path): no guard

; NONE-LABEL: define i32 @first(ptr %ctx)
; NONE-NOT:     @morpheus_guard
; NONE:         call ptr inttoptr (i64 1 to ptr)(ptr @config
; NONE: ; site 0 config analysis declined: runs under 'first', which has no guard (morpheus-opt --fallback)

; UNGUARDED-NOT: call {{.*}}@morpheus_guard

; With version slots, each entry reads the version it expects from its
; slot of an array of the version's own (7 in every slot as built), which
; the backend may rewrite once it found the program's tables unchanged.
; Only a volatile load: O2 must neither fold it to 7 nor hoist it.
; SLOTS:        @morpheus_expected_versions = global [5 x i64] [i64 7, i64 7, i64 7, i64 7, i64 7], section ".data.morpheus_versions", align 8
; SLOTS-LABEL: define i32 @first(ptr %ctx)
; SLOTS:          [[E:%.*]] = load volatile i64, ptr @morpheus_expected_versions
; SLOTS-NEXT:     [[G:%.*]] = call i64 @morpheus_guard_enter(ptr %ctx, i64 [[E]], i32 0, i32 0)
; SLOTS-LABEL: define i32 @second(ptr %ctx)
; SLOTS:          [[E:%.*]] = load volatile i64, ptr getelementptr inbounds ([5 x i64], ptr @morpheus_expected_versions, i64 0, i64 1)
; SLOTS-NEXT:     call i64 @morpheus_guard_enter(ptr %ctx, i64 [[E]], i32 1, i32 0)
; SLOTS-NOT:      call i64 @morpheus_guard_enter(ptr %ctx, i64 7
; SLOTSIN-LABEL: define i32 @first(ptr %ctx)
; SLOTSIN:        [[E:%.*]] = load volatile i64, ptr @morpheus_expected_versions
; SLOTSIN-NEXT:   call i32 @morpheus_guard_holds(i64 [[E]])
; A callback keeps the immediate: the backend reuses no program that
; registers callbacks.
; SLOTSIN-LABEL: define internal i64 @add_one(
; SLOTSIN:        call i32 @morpheus_guard_holds(i64 7)

; NOCTX: morpheus-opt: {{.*}}guard of 'no_ctx': a tail-call fallback needs a ctx parameter and an integer result; not specialized
; NORUNTIME: morpheus-opt: {{.*}}guard of 'first': the guard runtime 'morpheus_guard_holds' is not linked in; not specialized

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8

declare i64 @morpheus_guard_enter(ptr, i64, i32, i32)
declare i32 @morpheus_guard_holds(i64)

define i32 @first(ptr %ctx) section "xdp" {
entry:
  %zero = alloca i32
  store i32 0, ptr %zero
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
  %r = load i32, ptr %v
  ret i32 %r
}

define i32 @second(ptr %ctx) section "xdp" {
entry:
  %r = call i32 @read_config()
  ret i32 %r
}

define i32 @untouched(ptr %ctx) section "xdp" {
entry:
  ret i32 2
}

define internal i32 @read_config() noinline {
  %zero = alloca i32
  store i32 0, ptr %zero
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
  %r = load i32, ptr %v
  ret i32 %r
}

; C: static long add_one(u32 index, u64 *sum) { *sum += config[0]; return 0; }
define internal i64 @add_one(i32 %index, ptr %sum) {
  %zero = alloca i32
  store i32 0, ptr %zero
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
  %w = load i32, ptr %v
  %wide = zext i32 %w to i64
  %old = load i64, ptr %sum
  %new = add i64 %old, %wide
  store i64 %new, ptr %sum
  ret i64 0
}

; C: bpf_loop(8, add_one, &sum, 0)
define i32 @looping(ptr %ctx) section "xdp" {
entry:
  %sum = alloca i64
  store i64 0, ptr %sum
  %n = call i64 inttoptr (i64 181 to ptr)(i32 8, ptr @add_one, ptr %sum, i64 0)
  %total = load i64, ptr %sum
  %verdict = trunc i64 %total to i32
  ret i32 %verdict
}

; C: struct { __u32 prefixlen; __u32 addr; } key = { 32, iph->daddr };
;    __u32 *port = bpf_map_lookup_elem(&routes, &key); return port ? *port : XDP_DROP;
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
  ret i32 %out
miss:
  ret i32 1
}

;--- noctx.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8

declare i64 @morpheus_guard_enter(ptr, i64, i32, i32)
declare i32 @morpheus_guard_holds(i64)

; C: SEC("xdp") int no_ctx(void)
define i32 @no_ctx() section "xdp" {
entry:
  %zero = alloca i32
  store i32 0, ptr %zero
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
  %r = load i32, ptr %v
  ret i32 %r
}

;--- noruntime.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @first(ptr %ctx) section "xdp" {
entry:
  %zero = alloca i32
  store i32 0, ptr %zero
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
  %r = load i32, ptr %v
  ret i32 %r
}

;--- state.json
{"tables": {"config": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 1},
            "routes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"config": [{"key": "00000000", "value": "02000000"}],
          "routes": [{"key": "08000000 0a000000", "value": "02000000"},
                     {"key": "10000000 0a01ffff", "value": "03000000"},
                     {"key": "20000000 0a010203", "value": "04000000"}]}}
