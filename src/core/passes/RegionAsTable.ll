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
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=region-as-table --cleanup | FileCheck %s --check-prefix=CLEANUP

; Each lookup's class by slot: null is class 0, then the distinct values.
; CHECK-DAG: @__morpheus.protos.classes0 = private constant [3 x i8] c"\01\02\01", align 8
; CHECK-DAG: @__morpheus.ports.classes1 = private constant [3 x i8] c"\01\02\03", align 8
; Row protos × 4 + ports: {6,0}&{4,0} -> bit 2, {6,0}&{2,8} -> 1,
; {6,0}&0 -> 128, {0,8}&{4,0} -> 128, {0,8}&{2,8} -> 64 + 3 = 67 ('C'),
; {0,8}&0 -> 128; a row of a null class is never read (the program tests
; both answers first) and repeats the first row read (2), so that the
; column's values are the region's results only: 1..128.
; CHECK-DAG: @__morpheus.classify.region0.c0 = private constant [12 x i8] c"\02\02\02\02\02\02\01\80\02\80C\80", align 8
; The rule each class of rules (4, 0, 0x30, 0x41) gives: 2, 7 (none set),
; 4, 0; the null class's row repeats the first.
; CHECK-DAG: @__morpheus.pick.region1.c0 = private constant [5 x i8] c"\02\02\07\04\00", align 8

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
; The verifier knows the loaded byte as 0..255: the rule is clamped to the
; region's own values (1..128) on an opaque copy.
; CHECK-NEXT:    [[COPY:%classify.region0.c0.bounded]] = call i32 asm "", "=r,0"(i32 [[RULE32]])
; CHECK-NEXT:    [[HIGH:%.*]] = call i32 @llvm.umin.i32(i32 [[COPY]], i32 128)
; CHECK-NEXT:    [[LOW:%.*]] = call i32 @llvm.umax.i32(i32 [[HIGH]], i32 1)
; CHECK-NEXT:    br label %done
; CHECK-NOT:   loop:
; CHECK:         phi i32 [ 129, %entry ], [ [[LOW]], %classify.region0 ]
;
; The same loop also reading the packet stays code.
; CHECK-LABEL: define i32 @mixed(
; CHECK:       loop:
; The issue's case: a loop (unrolled) picks the first of seven rule bits,
; 7 when none is set (0..7), and the index picks a byte of an 8-byte value.
; From the table it is a byte (0..255): masked back to 0..7.
;   for (i = 0; i < 7; i++) if (*bits & (1u << i)) { rule = i; break; }
;   tally->hits[rule]++;
; CHECK-LABEL: define i32 @pick(
; CHECK:       pick.region1:
; CHECK:         [[PICK:%pick.region1.c0]] = load i8, ptr {{%.*}}, align 1
; CHECK-NEXT:    [[PICK32:%.*]] = zext i8 [[PICK]] to i32
; CHECK-NEXT:    [[PCOPY:%pick.region1.c0.bounded]] = call i32 asm "", "=r,0"(i32 [[PICK32]])
; CHECK-NEXT:    [[MASKED:%.*]] = and i32 [[PCOPY]], 7
; CHECK-NEXT:    br label %picked
; CHECK:       count:
; CHECK-NEXT:    %at = zext i32 [[MASKED]] to i64
; CHECK-NEXT:    getelementptr inbounds [8 x i8], ptr %tally, i64 0, i64 %at
;
; CHECK: ; site 0 ports+protos region-as-table applied: 4 blocks (16 instructions, a loop) as a table of 12 rows (6 reachable, 12 bytes) indexed by 2 answers' classes
; CHECK: ; site 2 ports+protos region-as-table declined: left as code: it reads %ctx: %ctx is neither a lookup's answer nor a constant
; CHECK: ; site 4 rules region-as-table applied: 8 blocks (15 instructions) as a table of 5 rows (4 reachable, 5 bytes) indexed by 1 answers' classes

; CLEANUP-LABEL: define {{.*}}i32 @classify(
; CLEANUP-NOT:   llvm.cttz
; CLEANUP-NOT:   asm sideeffect
; CLEANUP:     load i8, ptr
; CLEANUP-LABEL: define {{.*}}i32 @mixed(
; CLEANUP:     llvm.cttz

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

@rules = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@tallies = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @pick(ptr %ctx) section "xdp" {
entry:
  %kc = alloca i32, align 4
  %kz = alloca i32, align 4
  %x = load i32, ptr %ctx, align 4
  %class = and i32 %x, 3
  store i32 %class, ptr %kc, align 4
  store i32 0, ptr %kz, align 4
  %bits = call ptr inttoptr (i64 1 to ptr)(ptr @rules, ptr %kc)
  %nobits = icmp eq ptr %bits, null
  br i1 %nobits, label %out, label %scan
scan:
  %w = load i32, ptr %bits, align 4
  %b0 = and i32 %w, 1
  %z0 = icmp eq i32 %b0, 0
  br i1 %z0, label %s1, label %picked
s1:
  %b1 = and i32 %w, 2
  %z1 = icmp eq i32 %b1, 0
  br i1 %z1, label %s2, label %picked
s2:
  %b2 = and i32 %w, 4
  %z2 = icmp eq i32 %b2, 0
  br i1 %z2, label %s3, label %picked
s3:
  %b3 = and i32 %w, 8
  %z3 = icmp eq i32 %b3, 0
  br i1 %z3, label %s4, label %picked
s4:
  %b4 = and i32 %w, 16
  %z4 = icmp eq i32 %b4, 0
  br i1 %z4, label %s5, label %picked
s5:
  %b5 = and i32 %w, 32
  %z5 = icmp eq i32 %b5, 0
  br i1 %z5, label %s6, label %picked
s6:
  %b6 = and i32 %w, 64
  %z6 = icmp eq i32 %b6, 0
  br i1 %z6, label %none, label %picked
none:
  br label %picked
picked:
  %rule = phi i32 [ 0, %scan ], [ 1, %s1 ], [ 2, %s2 ], [ 3, %s3 ], [ 4, %s4 ], [ 5, %s5 ], [ 6, %s6 ], [ 7, %none ]
  %tally = call ptr inttoptr (i64 1 to ptr)(ptr @tallies, ptr %kz)
  %notally = icmp eq ptr %tally, null
  br i1 %notally, label %out, label %count
count:
  %at = zext i32 %rule to i64
  %hit = getelementptr inbounds [8 x i8], ptr %tally, i64 0, i64 %at
  %n = load i8, ptr %hit, align 1
  %n1 = add i8 %n, 1
  store i8 %n1, ptr %hit, align 1
  %odd = and i32 %rule, 1
  br label %out
out:
  %r = phi i32 [ 0, %entry ], [ 0, %picked ], [ %odd, %count ]
  ret i32 %r
}

declare i64 @llvm.cttz.i64(i64, i1)

;--- state.json
{"tables": {"protos": {"type": "array", "key_size": 4, "value_size": 24, "max_entries": 3},
            "ports": {"type": "array", "key_size": 4, "value_size": 24, "max_entries": 3},
            "rules": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 4},
            "tallies": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1}},
 "maps": {
  "protos": [
   {"key": "00000000", "value": "0000000000000000 0600000000000000 0000000000000000"},
   {"key": "01000000", "value": "0000000000000000 0000000000000000 0800000000000000"},
   {"key": "02000000", "value": "0000000000000000 0600000000000000 0000000000000000"}],
  "ports": [
   {"key": "00000000", "value": "0000000000000000 0400000000000000 0000000000000000"},
   {"key": "01000000", "value": "0000000000000000 0200000000000000 0800000000000000"},
   {"key": "02000000", "value": "0000000000000000 0000000000000000 0000000000000000"}],
  "rules": [
   {"key": "00000000", "value": "04000000"},
   {"key": "01000000", "value": "00000000"},
   {"key": "02000000", "value": "30000000"},
   {"key": "03000000", "value": "41000000"}]}}
