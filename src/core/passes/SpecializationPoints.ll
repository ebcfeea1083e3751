; specialization-points on a user-space handler: the configuration assumes
; "factor" = 2 and "short"; each becomes a test of its input where the
; marker stands, a miss calling the handler's generic copy (kept by the
; guard's in-program fallback) with the same packet, and past the test the
; value is a constant (the multiply by 2 becomes a shift under -O2). "port"
; stands after the packet's byte 1 and the counter are written: it is
; declined and stays its input. Without the guard (no generic copy to fall back to)
; and in a configuration that names no point, every marker becomes its
; input and nothing is tested.
;
; From (clang-19 -O2 for x86-64, debug and TBAA metadata dropped):
;   #include <morpheus_spec.h>
;   #include <morpheus_user.h>
;   MU_TABLE(stats, MU_ARRAY, uint32_t, uint64_t, 1);
;   MU_HANDLER int scale(struct mu_packet *packet) {
;     uint32_t zero = 0, factor = spec_enum("factor", packet->data[0], 1, 2, 4);
;     uint64_t *count;
;     spec_assume("short", packet->len <= 64);
;     packet->data[1] = (uint8_t)(packet->data[1] * factor);
;     count = mu_lookup(&stats, &zero);
;     if (count)
;       *count += 1;
;     packet->port = spec_generic("port", packet->port);
;     return packet->len <= 64 ? MU_TX : MU_PASS;
;   }
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/handler.ll --state %t/assumed.json --backend user --guard-version 7 --fallback in-program | FileCheck %s
; RUN: morpheus-opt %t/handler.ll --state %t/assumed.json --backend user --guard-version 7 --fallback in-program -O2 | FileCheck %s --check-prefix=O2
; RUN: morpheus-opt %t/handler.ll --state %t/assumed.json --backend user | FileCheck %s --check-prefix=NOGUARD
; RUN: morpheus-opt %t/handler.ll --state %t/none.json --backend user --guard-version 7 --fallback in-program | FileCheck %s --check-prefix=NONE

; CHECK-NOT:   declare {{.*}} @mu_spec_
; CHECK-LABEL: define {{.*}} i32 @scale(
; CHECK-NOT:     @mu_spec_
; CHECK:         [[FACTOR:%.*]] = zext i8 {{.*}} to i64
; CHECK:         [[HIT:%.*]] = icmp eq i64 [[FACTOR]], 2
; CHECK:         br i1 [[HIT]], label %spec.factor, label %spec.factor.miss
; CHECK:       spec.factor:
; CHECK:         [[TWO:%.*]] = trunc i64 2 to i8
; CHECK:         [[SHORT:%.*]] = icmp ne i32 {{.*}}, 0
; CHECK:         br i1 [[SHORT]], label %spec.short, label %spec.short.miss
; CHECK:       spec.short:
; CHECK:         mul i8 {{.*}}, [[TWO]]
; CHECK:         call ptr @mu_lookup(
; CHECK:         store i32 {{%.*}}, ptr
; CHECK-NOT:     @mu_spec_
; CHECK:       spec.factor.miss:
; CHECK-NEXT:    [[R1:%.*]] = call i32 @[[GENERIC:.*]](ptr %0)
; CHECK-NEXT:    ret i32 [[R1]]
; CHECK:       spec.short.miss:
; CHECK-NEXT:    [[R2:%.*]] = call i32 @[[GENERIC]](ptr %0)
; CHECK-NEXT:    ret i32 [[R2]]
; CHECK:       define {{.*}} i32 @[[GENERIC]](
; CHECK-NOT:     @mu_spec_
; CHECK-NOT:     spec.
; CHECK:       ; point factor in scale applied: assumed 2, guarded
; CHECK:       ; point short in scale applied: assumed true, guarded
; CHECK:       ; point port in scale declined: a store may write memory before the point

; O2-LABEL:    define {{.*}} i32 @scale(
; O2-NOT:        @mu_spec_
; O2:            icmp eq i8 {{.*}}, 2
; O2:            shl i8

; NOGUARD-LABEL: define {{.*}} i32 @scale(
; NOGUARD-NOT:   @mu_spec_
; NOGUARD-NOT:   spec.
; NOGUARD:       mul i8
; NOGUARD:     ; point factor in scale declined: not in a root with a generic copy

; NONE-LABEL:  define {{.*}} i32 @scale(
; NONE-NOT:      @mu_spec_
; NONE-NOT:      spec.
; NONE:        ; point factor in scale declined: not assumed by this configuration
; NONE:        ; point short in scale declined: not assumed by this configuration

;--- handler.ll
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%struct.mu_table_def = type { i32, i32, i32, i32 }

@stats = dso_local global %struct.mu_table_def { i32 2, i32 4, i32 8, i32 1 }, section "morpheus_tables", align 4
@.str = private unnamed_addr constant [7 x i8] c"factor\00", align 1
@.str.1 = private unnamed_addr constant [6 x i8] c"short\00", align 1
@.str.2 = private unnamed_addr constant [5 x i8] c"port\00", align 1

define dso_local range(i32 1, 3) i32 @scale(ptr nocapture noundef %0) local_unnamed_addr section "morpheus_handler" {
  %2 = alloca i32, align 4
  call void @llvm.lifetime.start.p0(i64 4, ptr nonnull %2)
  store i32 0, ptr %2, align 4
  %3 = load ptr, ptr %0, align 8
  %4 = load i8, ptr %3, align 1
  %5 = zext i8 %4 to i64
  %6 = tail call i64 (ptr, i64, ...) @mu_spec_enum(ptr noundef nonnull @.str, i64 noundef %5, i32 noundef 1, i32 noundef 2, i32 noundef 4)
  %7 = trunc i64 %6 to i8
  %8 = getelementptr inbounds i8, ptr %0, i64 8
  %9 = load i32, ptr %8, align 8
  %10 = icmp ult i32 %9, 65
  %11 = zext i1 %10 to i32
  %12 = tail call i32 @mu_spec_assume(ptr noundef nonnull @.str.1, i32 noundef %11)
  %13 = icmp ne i32 %12, 0
  tail call void @llvm.assume(i1 %13)
  %14 = getelementptr inbounds i8, ptr %3, i64 1
  %15 = load i8, ptr %14, align 1
  %16 = mul i8 %15, %7
  store i8 %16, ptr %14, align 1
  %17 = call ptr @mu_lookup(ptr noundef nonnull @stats, ptr noundef nonnull %2)
  %18 = icmp eq ptr %17, null
  br i1 %18, label %22, label %19

19:                                               ; preds = %1
  %20 = load i64, ptr %17, align 8
  %21 = add i64 %20, 1
  store i64 %21, ptr %17, align 8
  br label %22

22:                                               ; preds = %19, %1
  %23 = getelementptr inbounds i8, ptr %0, i64 12
  %24 = load i32, ptr %23, align 4
  %25 = zext i32 %24 to i64
  %26 = call i64 @mu_spec_generic(ptr noundef nonnull @.str.2, i64 noundef %25)
  %27 = trunc i64 %26 to i32
  store i32 %27, ptr %23, align 4
  %28 = load i32, ptr %8, align 8
  %29 = icmp ult i32 %28, 65
  %30 = select i1 %29, i32 2, i32 1
  call void @llvm.lifetime.end.p0(i64 4, ptr nonnull %2)
  ret i32 %30
}

declare void @llvm.lifetime.start.p0(i64 immarg, ptr nocapture)

declare i64 @mu_spec_enum(ptr noundef, i64 noundef, ...) local_unnamed_addr

declare i32 @mu_spec_assume(ptr noundef, i32 noundef) local_unnamed_addr

declare ptr @mu_lookup(ptr noundef, ptr noundef) local_unnamed_addr

declare i64 @mu_spec_generic(ptr noundef, i64 noundef) local_unnamed_addr

declare void @llvm.lifetime.end.p0(i64 immarg, ptr nocapture)

declare void @llvm.assume(i1 noundef)

declare i32 @morpheus_guard_holds(i64)

;--- assumed.json
{"tables": {"stats": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1}},
 "maps": {},
 "points": {"factor": 2, "short": 1, "port": 3}}
;--- none.json
{"tables": {"stats": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1}},
 "maps": {}}
