; Loads of the bytes of a writable global (.data, .bss) the program never
; writes become the live bytes, and every guarded entry compares those bytes
; with the live ones before anything else (a control plane writing through
; mmap bypasses the version guard): a difference falls back.
;
;   __u32 blocked_ttl;              // .bss, set by the loader through mmap
;   struct { __u32 mode; __u32 hits; } cfg = { 1, 0 };   // .data
;   __u64 seen;                     // .bss, counted by the program
;   volatile __u32 knob = 3;        // volatile: never folded
;   int prog(ctx) { seen++ (atomic); cfg.hits++;
;                   if (ttl == blocked_ttl) return XDP_DROP;
;                   return cfg.mode + cfg.hits + knob; }
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 -passes=fold-read-only-globals | FileCheck %s --check-prefix=TAIL
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --guard-version 7 --fallback in-program -passes=fold-read-only-globals | FileCheck %s --check-prefix=INPROG
; Without a guard (offline) nothing can check the live bytes: nothing folded.
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=fold-read-only-globals | FileCheck %s --check-prefix=UNGUARDED
; A global whose live bytes were not read is left alone.
; RUN: morpheus-opt %t/prog.ll --state %t/partial.json --guard-version 7 -passes=fold-read-only-globals | FileCheck %s --check-prefix=PARTIAL

; TAIL-LABEL: define i32 @prog(ptr %ctx)
; TAIL-NEXT:  morpheus.guard:
; TAIL-NEXT:    [[B:%.*]] = load volatile i32, ptr @blocked_ttl
; TAIL-NEXT:    [[SB:%.*]] = icmp eq i32 [[B]], 9
; TAIL-NEXT:    [[M:%.*]] = load volatile i32, ptr @cfg
; TAIL-NEXT:    [[SM:%.*]] = icmp eq i32 [[M]], 1
; TAIL-NEXT:    [[SAME:%.*]] = and i1 [[SB]], [[SM]]
; TAIL-NEXT:    [[V:%.*]] = select i1 [[SAME]], i64 7, i64 -1
; TAIL-NEXT:    call i64 @morpheus_guard_enter(ptr %ctx, i64 [[V]], i32 0, i32 0)
; TAIL:       entry:
; TAIL:         atomicrmw add ptr @seen
; The counter beside the configuration is still loaded and stored.
; TAIL:         %hits = load i32, ptr %hitsp
; TAIL-NOT:     load i32, ptr @blocked_ttl
; TAIL:         icmp eq i32 %ttl, 9
; TAIL-NOT:     load i32, ptr @cfg,
; TAIL:         load volatile i32, ptr @knob
; TAIL:         add i32 1,
; TAIL: ; global blocked_ttl applied: 1 load folded
; TAIL: ; global cfg applied: 1 load folded, checked against the live bytes at every guarded entry (1 load of bytes the program writes kept)
; TAIL: ; global seen declined: written by the program (atomic update in prog)
; TAIL: ; global knob declined: no load at a known offset to fold
; TAIL: ; check blocked_ttl at 0: 09 00 00 00
; TAIL: ; check cfg at 0: 01 00 00 00

; The generic copy reads the live globals; the check joins the version test.
; INPROG-LABEL: define i32 @prog(ptr %ctx)
; INPROG:         [[H:%.*]] = call i32 @morpheus_guard_holds(i64 7)
; INPROG-NEXT:    [[OK:%.*]] = icmp ne i32 [[H]], 0
; INPROG-NEXT:    [[VALID:%.*]] = and i1 [[OK]], {{%.*}}
; INPROG-NEXT:    br i1 [[VALID]], label %entry, label %morpheus.fallback
; INPROG-LABEL: define internal i32 @prog__morpheus_generic(ptr %ctx)
; INPROG:         load i32, ptr @blocked_ttl
; INPROG:         load i32, ptr @cfg

; UNGUARDED-LABEL: define i32 @prog(ptr %ctx)
; UNGUARDED-NOT:   morpheus.global
; UNGUARDED:       load i32, ptr @blocked_ttl
; UNGUARDED:       load i32, ptr @cfg
; UNGUARDED-NOT: ; global

; PARTIAL-LABEL: define i32 @prog(ptr %ctx)
; PARTIAL:         load volatile i32, ptr @cfg
; PARTIAL-NOT:     load volatile i32, ptr @blocked_ttl
; PARTIAL:         load i32, ptr @blocked_ttl
; PARTIAL: ; global blocked_ttl declined: its live bytes were not read (no section layout)

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@blocked_ttl = dso_local global i32 0, align 4
@cfg = dso_local global { i32, i32 } { i32 1, i32 0 }, align 4
@seen = dso_local global i64 0, align 8
@knob = dso_local global i32 3, align 4

declare i64 @morpheus_guard_enter(ptr, i64, i32, i32)
declare i32 @morpheus_guard_holds(i64)

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %old = atomicrmw add ptr @seen, i64 1 seq_cst
  %hitsp = getelementptr inbounds i8, ptr @cfg, i64 4
  %hits = load i32, ptr %hitsp
  %hits1 = add i32 %hits, 1
  store i32 %hits1, ptr %hitsp
  %data = load i32, ptr %ctx
  %ttl = and i32 %data, 255
  %blocked = load i32, ptr @blocked_ttl
  %drop = icmp eq i32 %ttl, %blocked
  br i1 %drop, label %dropped, label %pass

dropped:
  ret i32 1

pass:
  %mode = load i32, ptr @cfg
  %knob = load volatile i32, ptr @knob
  %sum = add i32 %mode, %hits1
  %r = add i32 %sum, %knob
  ret i32 %r
}

;--- state.json
{"tables": {}, "maps": {},
 "globals": {"blocked_ttl": "09000000", "cfg": "0100000005000000",
             "seen": "0000000000000000", "knob": "03000000"}}

;--- partial.json
{"tables": {}, "maps": {},
 "globals": {"cfg": "0100000005000000", "seen": "0000000000000000", "knob": "03000000"}}
