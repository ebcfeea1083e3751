; The prefetch stage derived from a handler (user backend): the handler's
; code up to its first lookup with a per-packet key, which becomes a
; prefetch, each path returning before anything that writes memory off the
; stage's stack. The configuration's lookup (a constant key) runs as in the
; handler, so the key's offset in the packet can be read from its entry; a
; counter's lookup (constant key) runs too, and its path returns before the
; counter is written; the flow table's lookup (the key read from the packet)
; is prefetched. `writer` writes the packet before any lookup: no stage.
; `remember` looks a constant key up in a table whose lookups have side
; effects (an LRU's, which steer its evictions) before its flow lookup: the
; stage must not run that lookup, so its only path returns first: no stage.
;
; From (clang-19 -O2 for x86-64; TBAA, attributes and debug info dropped):
;   #include <morpheus_user.h>
;   struct config { uint32_t enabled; uint32_t offset; };
;   MU_TABLE(config, MU_ARRAY, uint32_t, struct config, 1);
;   MU_TABLE(flows, MU_HASH, uint64_t, uint32_t, 1024);
;   MU_TABLE(stats, MU_ARRAY, uint32_t, uint64_t, 4);
;   static inline __attribute__((always_inline)) int count(uint32_t reason, int verdict) {
;     uint64_t *counter = mu_lookup(&stats, &reason);
;     if (counter) *counter += 1;
;     return verdict;
;   }
;   MU_HANDLER int handler(struct mu_packet *packet) {
;     uint32_t zero = 0;
;     struct config *cfg = mu_lookup(&config, &zero);
;     uint32_t *port;
;     uint64_t key;
;     if (!cfg || !cfg->enabled) return MU_DROP;
;     if (packet->len < cfg->offset + 8) return count(1, MU_DROP);
;     __builtin_memcpy(&key, packet->data + cfg->offset, 8);
;     port = mu_lookup(&flows, &key);
;     if (!port) return count(2, MU_PASS);
;     packet->port = *port;
;     return MU_TX;
;   }
;   MU_HANDLER int writer(struct mu_packet *packet) {
;     uint64_t key = packet->port;
;     uint32_t *port;
;     packet->data[0] ^= 1;
;     port = mu_lookup(&flows, &key);
;     return port ? MU_TX : MU_DROP;
;   }
;   MU_TABLE(recent, MU_HASH, uint64_t, uint32_t, 64); // an LRU in state.json
;   MU_HANDLER int remember(struct mu_packet *packet) {
;     uint64_t last = 0, key = packet->port;
;     uint32_t *seen = mu_lookup(&recent, &last);
;     uint32_t *port = mu_lookup(&flows, &key);
;     return seen && port ? MU_TX : MU_DROP;
;   }
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/handler.ll --state %t/state.json --backend user \
; RUN:   --prefetch-stage mu_prefetch | FileCheck %s

; The handler itself is unchanged.
; CHECK-LABEL: define {{.*}} i32 @handler(
; CHECK:         call ptr @mu_lookup(ptr noundef nonnull @flows
; CHECK:         store i32 %{{.*}}, ptr %{{.*}}, align 4
; CHECK:         ret i32

; CHECK-LABEL: define void @handler_prefetch(ptr
; CHECK:         call ptr @mu_lookup(ptr noundef nonnull @config
; CHECK-NOT:     store i64
; CHECK:         call ptr @mu_lookup(ptr noundef nonnull @stats
; CHECK-NOT:     store i64
; CHECK:         load i64, ptr %{{.*}}, align 1
; CHECK-NEXT:    store i64 %{{.*}}, ptr %[[KEY:[0-9]+]], align 8
; CHECK-NEXT:    call void @mu_prefetch(ptr @flows, ptr %[[KEY]])
; CHECK-NEXT:    ret void
; CHECK-NOT:     @mu_lookup(ptr noundef nonnull @flows
; CHECK-NOT:     store i32
; CHECK:       }
; CHECK-NOT:   define void @writer_prefetch

; CHECK-NOT:   define void @remember_prefetch

; CHECK:       ; prefetch stage handler: prefetches flows (1 site)
; CHECK-NEXT:  ; prefetch stage remember: declined: no path reaches a lookup with a per-packet key before the handler writes memory, calls a function that may, or runs a lookup with side effects
; CHECK-NEXT:  ; prefetch stage writer: declined: no path reaches a lookup

;--- handler.ll
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%struct.mu_table_def = type { i32, i32, i32, i32 }

@config = dso_local global %struct.mu_table_def { i32 2, i32 4, i32 8, i32 1 }, section "morpheus_tables", align 4
@flows = dso_local global %struct.mu_table_def { i32 1, i32 8, i32 4, i32 1024 }, section "morpheus_tables", align 4
@stats = dso_local global %struct.mu_table_def { i32 2, i32 4, i32 8, i32 4 }, section "morpheus_tables", align 4

define dso_local range(i32 0, 3) i32 @handler(ptr nocapture noundef %0) section "morpheus_handler" {
  %2 = alloca i32, align 4
  %3 = alloca i32, align 4
  %4 = alloca i32, align 4
  %5 = alloca i64, align 8
  call void @llvm.lifetime.start.p0(i64 4, ptr nonnull %4)
  store i32 0, ptr %4, align 4
  %6 = call ptr @mu_lookup(ptr noundef nonnull @config, ptr noundef nonnull %4)
  call void @llvm.lifetime.start.p0(i64 8, ptr nonnull %5)
  %7 = icmp eq ptr %6, null
  br i1 %7, label %42, label %8

8:                                                ; preds = %1
  %9 = load i32, ptr %6, align 4
  %10 = icmp eq i32 %9, 0
  br i1 %10, label %42, label %11

11:                                               ; preds = %8
  %12 = getelementptr inbounds i8, ptr %0, i64 8
  %13 = load i32, ptr %12, align 8
  %14 = getelementptr inbounds i8, ptr %6, i64 4
  %15 = load i32, ptr %14, align 4
  %16 = add i32 %15, 8
  %17 = icmp ult i32 %13, %16
  br i1 %17, label %18, label %25

18:                                               ; preds = %11
  call void @llvm.lifetime.start.p0(i64 4, ptr nonnull %2)
  store i32 1, ptr %2, align 4
  %19 = call ptr @mu_lookup(ptr noundef nonnull @stats, ptr noundef nonnull %2)
  %20 = icmp eq ptr %19, null
  br i1 %20, label %24, label %21

21:                                               ; preds = %18
  %22 = load i64, ptr %19, align 8
  %23 = add i64 %22, 1
  store i64 %23, ptr %19, align 8
  br label %24

24:                                               ; preds = %18, %21
  call void @llvm.lifetime.end.p0(i64 4, ptr nonnull %2)
  br label %42

25:                                               ; preds = %11
  %26 = load ptr, ptr %0, align 8
  %27 = zext i32 %15 to i64
  %28 = getelementptr inbounds i8, ptr %26, i64 %27
  %29 = load i64, ptr %28, align 1
  store i64 %29, ptr %5, align 8
  %30 = call ptr @mu_lookup(ptr noundef nonnull @flows, ptr noundef nonnull %5)
  %31 = icmp eq ptr %30, null
  br i1 %31, label %32, label %39

32:                                               ; preds = %25
  call void @llvm.lifetime.start.p0(i64 4, ptr nonnull %3)
  store i32 2, ptr %3, align 4
  %33 = call ptr @mu_lookup(ptr noundef nonnull @stats, ptr noundef nonnull %3)
  %34 = icmp eq ptr %33, null
  br i1 %34, label %38, label %35

35:                                               ; preds = %32
  %36 = load i64, ptr %33, align 8
  %37 = add i64 %36, 1
  store i64 %37, ptr %33, align 8
  br label %38

38:                                               ; preds = %32, %35
  call void @llvm.lifetime.end.p0(i64 4, ptr nonnull %3)
  br label %42

39:                                               ; preds = %25
  %40 = load i32, ptr %30, align 4
  %41 = getelementptr inbounds i8, ptr %0, i64 12
  store i32 %40, ptr %41, align 4
  br label %42

42:                                               ; preds = %1, %8, %39, %38, %24
  %43 = phi i32 [ 0, %24 ], [ 2, %39 ], [ 1, %38 ], [ 0, %8 ], [ 0, %1 ]
  call void @llvm.lifetime.end.p0(i64 8, ptr nonnull %5)
  call void @llvm.lifetime.end.p0(i64 4, ptr nonnull %4)
  ret i32 %43
}

declare void @llvm.lifetime.start.p0(i64 immarg, ptr nocapture)

declare ptr @mu_lookup(ptr noundef, ptr noundef)

declare void @llvm.lifetime.end.p0(i64 immarg, ptr nocapture)

@recent = dso_local global %struct.mu_table_def { i32 1, i32 8, i32 4, i32 64 }, section "morpheus_tables", align 4

define dso_local range(i32 0, 3) i32 @remember(ptr nocapture noundef readonly %0) section "morpheus_handler" {
  %2 = alloca i64, align 8
  %3 = alloca i64, align 8
  call void @llvm.lifetime.start.p0(i64 8, ptr nonnull %2)
  store i64 0, ptr %2, align 8
  call void @llvm.lifetime.start.p0(i64 8, ptr nonnull %3)
  %4 = getelementptr inbounds i8, ptr %0, i64 12
  %5 = load i32, ptr %4, align 4
  %6 = zext i32 %5 to i64
  store i64 %6, ptr %3, align 8
  %7 = call ptr @mu_lookup(ptr noundef nonnull @recent, ptr noundef nonnull %2)
  %8 = call ptr @mu_lookup(ptr noundef nonnull @flows, ptr noundef nonnull %3)
  %9 = icmp ne ptr %7, null
  %10 = icmp ne ptr %8, null
  %11 = select i1 %9, i1 %10, i1 false
  %12 = select i1 %11, i32 2, i32 0
  call void @llvm.lifetime.end.p0(i64 8, ptr nonnull %3)
  call void @llvm.lifetime.end.p0(i64 8, ptr nonnull %2)
  ret i32 %12
}

define dso_local range(i32 0, 3) i32 @writer(ptr nocapture noundef readonly %0) section "morpheus_handler" {
  %2 = alloca i64, align 8
  call void @llvm.lifetime.start.p0(i64 8, ptr nonnull %2)
  %3 = getelementptr inbounds i8, ptr %0, i64 12
  %4 = load i32, ptr %3, align 4
  %5 = zext i32 %4 to i64
  store i64 %5, ptr %2, align 8
  %6 = load ptr, ptr %0, align 8
  %7 = load i8, ptr %6, align 1
  %8 = xor i8 %7, 1
  store i8 %8, ptr %6, align 1
  %9 = call ptr @mu_lookup(ptr noundef nonnull @flows, ptr noundef nonnull %2)
  %10 = icmp eq ptr %9, null
  %11 = select i1 %10, i32 0, i32 2
  call void @llvm.lifetime.end.p0(i64 8, ptr nonnull %2)
  ret i32 %11
}


;--- state.json
{"tables": {"config": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "flows": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 1024},
            "stats": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 4},
            "recent": {"type": "lru_hash", "key_size": 8, "value_size": 4, "max_entries": 64}}}
