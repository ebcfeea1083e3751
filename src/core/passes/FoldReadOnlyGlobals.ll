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

; A struct copied whole (`struct cfg c = cfg;` kept as a memcpy: an index
; into `c` varies) becomes stores of the live bytes into `c`, checked at the
; entry in aligned pieces; a copy of a global the program writes is kept.
;
;   struct cfg { __u32 mode; __u16 ports[4]; __u32 hits; } cfg;  // .data
;   struct lim { __u32 max; __u32 seen; } lim;                    // lim.seen++
;   int copies(ctx) { struct cfg c = cfg; struct lim l = lim; lim.seen++;
;                     if (c.mode != 1) return 1; if (p[1] > l.max) return 1;
;                     return c.ports[p[0] & 3] == p[2] ? 3 : 2; }
; RUN: morpheus-opt %t/copy.ll --state %t/copy.json --guard-version 7 -passes=fold-read-only-globals | FileCheck %s --check-prefix=COPY
; RUN: morpheus-opt %t/copy.ll --state %t/copy.json -passes=fold-read-only-globals | FileCheck %s --check-prefix=COPY-UNGUARDED

; COPY-LABEL: define i32 @copies(ptr %ctx)
; COPY-NEXT:  morpheus.guard:
; COPY-NEXT:    %c = alloca
; COPY-NEXT:    %l = alloca
; COPY-NEXT:    [[A:%.*]] = load volatile i32, ptr @cfg
; COPY-NEXT:    icmp eq i32 [[A]], 1
; COPY-NEXT:    [[B:%.*]] = load volatile i32, ptr getelementptr inbounds (i8, ptr @cfg, i64 4)
; COPY-NEXT:    icmp eq i32 [[B]], 29032528
; COPY-NEXT:    and i1
; COPY-NEXT:    [[C:%.*]] = load volatile i32, ptr getelementptr inbounds (i8, ptr @cfg, i64 8)
; COPY-NEXT:    icmp eq i32 [[C]], 1441845
; COPY-NEXT:    and i1
; COPY-NEXT:    [[D:%.*]] = load volatile i32, ptr getelementptr inbounds (i8, ptr @cfg, i64 12)
; COPY-NEXT:    icmp eq i32 [[D]], 0
; COPY:       entry:
; COPY-NOT:     call void @llvm.memcpy.p0.p0.i64(ptr align 4 %c
; COPY:         store i32 1, ptr %c, align 4
; COPY-NEXT:    [[P1:%.*]] = getelementptr inbounds i8, ptr %c, i64 4
; COPY-NEXT:    store i32 29032528, ptr [[P1]], align 4
; COPY-NEXT:    [[P2:%.*]] = getelementptr inbounds i8, ptr %c, i64 8
; COPY-NEXT:    store i32 1441845, ptr [[P2]], align 4
; COPY-NEXT:    [[P3:%.*]] = getelementptr inbounds i8, ptr %c, i64 12
; COPY-NEXT:    store i32 0, ptr [[P3]], align 4
; COPY-NEXT:    call void @llvm.memcpy.p0.p0.i64(ptr align 4 %l, ptr align 4 @lim, i64 8, i1 false)
; COPY: ; global cfg applied: 1 copy folded, checked against the live bytes at every guarded entry
; COPY: ; global lim declined: written by the program (store in copies)
; COPY: ; check cfg at 0: 01 00 00 00
; COPY: ; check cfg at 4: 50 00 bb 01
; COPY: ; check cfg at 8: 35 00 16 00
; COPY: ; check cfg at 12: 00 00 00 00

; COPY-UNGUARDED-LABEL: define i32 @copies(ptr %ctx)
; COPY-UNGUARDED:  call void @llvm.memcpy.p0.p0.i64(ptr align 4 %c, ptr align 4 @cfg, i64 16, i1 false)
; COPY-UNGUARDED-NOT: ; global

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

;--- copy.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@cfg = dso_local global { i32, [4 x i16], i32 } { i32 1, [4 x i16] [i16 80, i16 443, i16 53, i16 22], i32 0 }, align 4
@lim = dso_local global { i32, i32 } { i32 10, i32 0 }, align 4

declare i64 @morpheus_guard_enter(ptr, i64, i32, i32)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define i32 @copies(ptr %ctx) section "xdp" {
entry:
  %c = alloca { i32, [4 x i16], i32 }, align 4
  %l = alloca { i32, i32 }, align 4
  call void @llvm.memcpy.p0.p0.i64(ptr align 4 %c, ptr align 4 @cfg, i64 16, i1 false)
  call void @llvm.memcpy.p0.p0.i64(ptr align 4 %l, ptr align 4 @lim, i64 8, i1 false)
  %seenp = getelementptr inbounds i8, ptr @lim, i64 4
  %seen = load i32, ptr %seenp
  %seen1 = add i32 %seen, 1
  store i32 %seen1, ptr %seenp
  %mode = load i32, ptr %c
  %configured = icmp eq i32 %mode, 1
  br i1 %configured, label %limit, label %other

limit:
  %data = load i32, ptr %ctx
  %ttl = lshr i32 %data, 8
  %ttl8 = and i32 %ttl, 255
  %max = load i32, ptr %l
  %over = icmp ugt i32 %ttl8, %max
  br i1 %over, label %other, label %lookup

lookup:
  %index = and i32 %data, 3
  %index64 = zext i32 %index to i64
  %ports = getelementptr inbounds i8, ptr %c, i64 4
  %portp = getelementptr inbounds [4 x i16], ptr %ports, i64 0, i64 %index64
  %port = load i16, ptr %portp, align 2
  %wanted = lshr i32 %data, 16
  %wanted16 = trunc i32 %wanted to i16
  %match = icmp eq i16 %port, %wanted16
  %r = select i1 %match, i32 3, i32 2
  ret i32 %r

other:
  ret i32 1
}

;--- copy.json
{"tables": {}, "maps": {},
 "globals": {"cfg": "010000005000bb013500160000000000",
             "lim": "0a00000000000000"}}
