; Code that reads only what a few lookups answered becomes a table indexed
; by their answers' classes. protos and ports are arrays of three rule sets
; { u16 first, u16 last, u32 pad, u64 bits[2] }; classify ANDs the two sets
; word by word (behind the program's own empty-asm barrier) and returns the
; first common bit, 128 when there is none, 129 when a lookup found none.
; protos: {6, 0}, {0, 8}, {6, 0} (slots 0 and 2 alike: two classes and
; null); ports: {4, 0}, {2, 8}, zeros (three classes and null).
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=region-as-table | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=region-as-table -O2 | FileCheck %s --check-prefix=O2

; Each lookup's class by slot: null is class 0, then the distinct values.
; CHECK-DAG: @__morpheus.protos.classes0 = private constant [3 x i8] c"\01\02\01", align 8
; CHECK-DAG: @__morpheus.ports.classes1 = private constant [3 x i8] c"\01\02\03", align 8
; Row protos × 4 + ports: a null class is never read there (the program
; tests both answers first: 0); {6,0}&{4,0} -> bit 2, {6,0}&{2,8} -> 1,
; {6,0}&0 -> 128, {0,8}&{4,0} -> 128, {0,8}&{2,8} -> 64 + 3 = 67 ('C'),
; {0,8}&0 -> 128.
; CHECK-DAG: @__morpheus.classify.region0.c0 = private constant [12 x i8] c"\00\00\00\00\00\02\01\80\00\80C\80", align 8

; C: a = lookup(&protos, &ctx->a); b = lookup(&ports, &ctx->b);
;    if (!a || !b) return 129;
;    return first_common_bit(a, b);   (a loop over the two words)
; CHECK-LABEL: define i32 @classify(
; The key as the helper reads it, its slot checked below the array's 3.
; CHECK:         [[A:%a]] = call ptr inttoptr (i64 1 to ptr)(ptr @protos
; CHECK-NEXT:    [[KEY:%protos.key.memory]] = call ptr asm "", "=r,0"(ptr %ka)
; CHECK-NEXT:    [[K:%protos.key]] = load i32, ptr [[KEY]], align 4
; CHECK-NEXT:    [[KW:%.*]] = zext i32 [[K]] to i64
; CHECK-NEXT:    [[SLOT:%a.slot]] = call i64 asm "", "=r,0"(i64 [[KW]])
; CHECK-NEXT:    [[IN:%.*]] = icmp ult i64 [[SLOT]], 3
; CHECK-NEXT:    [[AT:%.*]] = select i1 [[IN]], i64 [[SLOT]], i64 0
; CHECK-NEXT:    [[P:%.*]] = getelementptr inbounds i8, ptr @__morpheus.protos.classes0, i64 [[AT]]
; CHECK-NEXT:    [[C:%a.class]] = load i8, ptr [[P]], align 1
; CHECK-NEXT:    [[CW:%.*]] = zext i8 [[C]] to i64
; CHECK-NEXT:    [[AC:%.*]] = select i1 [[IN]], i64 [[CW]], i64 0
; CHECK:         [[BC:%.*]] = select i1 {{%.*}}, i64 {{%[0-9]+}}, i64 0
; CHECK:         br i1 %none, label %done, label %classify.region0
; The loop is gone: one row read at protos × 4 + ports.
; CHECK:       classify.region0:
; CHECK-NEXT:    [[ROW4:%.*]] = mul i64 [[AC]], 4
; CHECK-NEXT:    [[ROW:%.*]] = add i64 [[ROW4]], [[BC]]
; CHECK-NEXT:    [[OPAQUE:%classify.region0.row]] = call i64 asm "", "=r,0"(i64 [[ROW]])
; CHECK-NEXT:    [[INSIDE:%.*]] = icmp ult i64 [[OPAQUE]], 12
; CHECK-NEXT:    [[R:%.*]] = select i1 [[INSIDE]], i64 [[OPAQUE]], i64 0
; CHECK-NEXT:    [[RP:%.*]] = getelementptr inbounds i8, ptr @__morpheus.classify.region0.c0, i64 [[R]]
; CHECK-NEXT:    [[RULE:%.*]] = load i8, ptr [[RP]], align 1
; CHECK-NEXT:    [[RULE32:%.*]] = zext i8 [[RULE]] to i32
; CHECK-NEXT:    br label %done
; CHECK-NOT:   loop:
; CHECK:         phi i32 [ 129, %entry ], [ [[RULE32]], %classify.region0 ]
;
; The same loop also reading the packet stays code.
; CHECK-LABEL: define i32 @mixed(
; CHECK:       loop:
; CHECK: ; site 0 ports+protos region-as-table applied: 4 blocks (16 instructions, a loop) as a table of 12 rows (6 reachable, 12 bytes) indexed by 2 answers' classes
; CHECK: ; site 2 ports+protos region-as-table declined: left as code: it reads %ctx: %ctx is neither a lookup's answer nor a constant

; O2-LABEL: define {{.*}}i32 @classify(
; O2-NOT:     llvm.cttz
; O2-NOT:     asm sideeffect
; O2:         load i8, ptr
; O2-LABEL: define {{.*}}i32 @mixed(
; O2:         llvm.cttz

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@protos = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@ports = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @classify(ptr %ctx) section "xdp" {
entry:
  %ka = alloca i32, align 4
  %kb = alloca i32, align 4
  %x = load i32, ptr %ctx, align 4
  store i32 %x, ptr %ka, align 4
  %a = call ptr inttoptr (i64 1 to ptr)(ptr @protos, ptr %ka)
  %yp = getelementptr i8, ptr %ctx, i64 4
  %y = load i32, ptr %yp, align 4
  store i32 %y, ptr %kb, align 4
  %b = call ptr inttoptr (i64 1 to ptr)(ptr @ports, ptr %kb)
  %na = icmp eq ptr %a, null
  %nb = icmp eq ptr %b, null
  %none = or i1 %na, %nb
  br i1 %none, label %done, label %search
search:
  %wa = getelementptr inbounds i8, ptr %a, i64 8
  %wb = getelementptr inbounds i8, ptr %b, i64 8
  br label %loop
loop:
  %w = phi i32 [ 0, %search ], [ %next, %again ]
  %o = call i32 asm sideeffect "", "=r,0"(i32 %w)
  %at = and i32 %o, 1
  %at64 = zext i32 %at to i64
  %pa = getelementptr inbounds [2 x i64], ptr %wa, i64 0, i64 %at64
  %ba = load i64, ptr %pa, align 8
  %pb = getelementptr inbounds [2 x i64], ptr %wb, i64 0, i64 %at64
  %bb = load i64, ptr %pb, align 8
  %both = and i64 %ba, %bb
  %empty = icmp eq i64 %both, 0
  br i1 %empty, label %again, label %found
again:
  %next = add nuw nsw i32 %w, 1
  %more = icmp ult i32 %next, 2
  br i1 %more, label %loop, label %done
found:
  %low = call i64 @llvm.cttz.i64(i64 %both, i1 true)
  %low32 = trunc i64 %low to i32
  %base = shl i32 %at, 6
  %rule = add i32 %base, %low32
  br label %done
done:
  %r = phi i32 [ 129, %entry ], [ 128, %again ], [ %rule, %found ]
  ret i32 %r
}

define i32 @mixed(ptr %ctx) section "xdp" {
entry:
  %ka = alloca i32, align 4
  %kb = alloca i32, align 4
  %x = load i32, ptr %ctx, align 4
  store i32 %x, ptr %ka, align 4
  %a = call ptr inttoptr (i64 1 to ptr)(ptr @protos, ptr %ka)
  %yp = getelementptr i8, ptr %ctx, i64 4
  %y = load i32, ptr %yp, align 4
  store i32 %y, ptr %kb, align 4
  %b = call ptr inttoptr (i64 1 to ptr)(ptr @ports, ptr %kb)
  %na = icmp eq ptr %a, null
  %nb = icmp eq ptr %b, null
  %none = or i1 %na, %nb
  br i1 %none, label %done, label %search
search:
  %wa = getelementptr inbounds i8, ptr %a, i64 8
  %wb = getelementptr inbounds i8, ptr %b, i64 8
  br label %loop
loop:
  %w = phi i32 [ 0, %search ], [ %next, %again ]
  %o = call i32 asm sideeffect "", "=r,0"(i32 %w)
  %at = and i32 %o, 1
  %at64 = zext i32 %at to i64
  %pa = getelementptr inbounds [2 x i64], ptr %wa, i64 0, i64 %at64
  %ba = load i64, ptr %pa, align 8
  %pb = getelementptr inbounds [2 x i64], ptr %wb, i64 0, i64 %at64
  %bb = load i64, ptr %pb, align 8
  %pp = getelementptr inbounds [2 x i64], ptr %ctx, i64 0, i64 %at64
  %bp = load i64, ptr %pp, align 8
  %both0 = and i64 %ba, %bb
  %both = and i64 %both0, %bp
  %empty = icmp eq i64 %both, 0
  br i1 %empty, label %again, label %found
again:
  %next = add nuw nsw i32 %w, 1
  %more = icmp ult i32 %next, 2
  br i1 %more, label %loop, label %done
found:
  %low = call i64 @llvm.cttz.i64(i64 %both, i1 true)
  %low32 = trunc i64 %low to i32
  %base = shl i32 %at, 6
  %rule = add i32 %base, %low32
  br label %done
done:
  %r = phi i32 [ 129, %entry ], [ 128, %again ], [ %rule, %found ]
  ret i32 %r
}

declare i64 @llvm.cttz.i64(i64, i1)

;--- state.json
{"tables": {"protos": {"type": "array", "key_size": 4, "value_size": 24, "max_entries": 3},
            "ports": {"type": "array", "key_size": 4, "value_size": 24, "max_entries": 3}},
 "maps": {
  "protos": [
   {"key": "00000000", "value": "0000000000000000 0600000000000000 0000000000000000"},
   {"key": "01000000", "value": "0000000000000000 0000000000000000 0800000000000000"},
   {"key": "02000000", "value": "0000000000000000 0600000000000000 0000000000000000"}],
  "ports": [
   {"key": "00000000", "value": "0000000000000000 0400000000000000 0000000000000000"},
   {"key": "01000000", "value": "0000000000000000 0200000000000000 0800000000000000"},
   {"key": "02000000", "value": "0000000000000000 0000000000000000 0000000000000000"}]}}
