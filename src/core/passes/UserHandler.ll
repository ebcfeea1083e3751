; The table passes on a user-space handler (backend/user): the same passes,
; unchanged, find the accesses through UserSignatures (calls to mu_lookup,
; tables in "morpheus_tables") instead of BPF helper ids. A constant-key
; lookup in the configuration array becomes its value, the two-entry ports
; table a compare chain; the counters the handler writes stay a real lookup.
; Read with the eBPF backend's signatures the same IR holds no table access
; at all, and nothing changes.
;
; From (clang-19 -O2 for x86-64, debug and TBAA metadata dropped):
;   #include <morpheus_user.h>
;   struct config { uint32_t mode; uint32_t port; };
;   MU_TABLE(config, MU_ARRAY, uint32_t, struct config, 1);
;   MU_TABLE(ports, MU_HASH, uint32_t, uint32_t, 16);
;   MU_TABLE(stats, MU_ARRAY, uint32_t, uint64_t, 4);
;   MU_HANDLER int handler(struct mu_packet *packet) {
;     uint32_t zero = 0, in = packet->port;
;     struct config *cfg = mu_lookup(&config, &zero);
;     uint64_t *count = mu_lookup(&stats, &zero);
;     uint32_t *out;
;     if (count) *count += 1;
;     if (!cfg || cfg->mode == 0) return MU_DROP;
;     out = mu_lookup(&ports, &in);
;     if (!out) return MU_PASS;
;     packet->port = *out + cfg->port;
;     return MU_TX;
;   }
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/handler.ll --state %t/state.json --backend user | FileCheck %s
; RUN: morpheus-opt %t/handler.ll --state %t/state.json | FileCheck %s --check-prefix=BPF

; CHECK:       @__morpheus.config.values = private constant [8 x i8] c"\01\00\00\00d\00\00\00"
; CHECK:       @__morpheus.ports.values = private constant [16 x i8]
; CHECK-LABEL: define {{.*}} i32 @handler(
; CHECK-NOT:     call ptr @mu_lookup(ptr {{.*}}@config
; CHECK:         call ptr @mu_lookup(ptr noundef nonnull @stats
; CHECK-NOT:     call ptr @mu_lookup(ptr {{.*}}@config
; CHECK:         load i32, ptr @__morpheus.config.values
; CHECK-NOT:     call ptr @mu_lookup(ptr {{.*}}@ports
; CHECK:         %ports.key = load i32
; CHECK:         phi ptr [ @__morpheus.ports.values, %ports.hit ]
; CHECK-NOT:     call ptr @mu_lookup(ptr {{.*}}@ports
; CHECK:       ; site 1 stats analysis declined: table is written by the data plane
; CHECK:       ; site 0 config constant-key-lookup applied
; CHECK:       ; site 2 ports inline-small-table applied: 2 entries inlined as compares

; BPF-LABEL:   define {{.*}} i32 @handler(
; BPF:           call ptr @mu_lookup(ptr noundef nonnull @config
; BPF:           call ptr @mu_lookup(ptr noundef nonnull @stats
; BPF:           call ptr @mu_lookup(ptr noundef nonnull @ports
; BPF-NOT:     @__morpheus
; BPF-NOT:     ; site

;--- handler.ll
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%struct.mu_table_def = type { i32, i32, i32, i32 }

@config = dso_local global %struct.mu_table_def { i32 2, i32 4, i32 8, i32 1 }, section "morpheus_tables", align 4
@ports = dso_local global %struct.mu_table_def { i32 1, i32 4, i32 4, i32 16 }, section "morpheus_tables", align 4
@stats = dso_local global %struct.mu_table_def { i32 2, i32 4, i32 8, i32 4 }, section "morpheus_tables", align 4

define dso_local range(i32 0, 3) i32 @handler(ptr nocapture noundef %0) section "morpheus_handler" {
  %2 = alloca i32, align 4
  %3 = alloca i32, align 4
  call void @llvm.lifetime.start.p0(i64 4, ptr nonnull %2)
  store i32 0, ptr %2, align 4
  call void @llvm.lifetime.start.p0(i64 4, ptr nonnull %3)
  %4 = getelementptr inbounds i8, ptr %0, i64 12
  %5 = load i32, ptr %4, align 4
  store i32 %5, ptr %3, align 4
  %6 = call ptr @mu_lookup(ptr noundef nonnull @config, ptr noundef nonnull %2)
  %7 = call ptr @mu_lookup(ptr noundef nonnull @stats, ptr noundef nonnull %2)
  %8 = icmp eq ptr %7, null
  br i1 %8, label %12, label %9

9:                                                ; preds = %1
  %10 = load i64, ptr %7, align 8
  %11 = add i64 %10, 1
  store i64 %11, ptr %7, align 8
  br label %12

12:                                               ; preds = %9, %1
  %13 = icmp eq ptr %6, null
  br i1 %13, label %25, label %14

14:                                               ; preds = %12
  %15 = load i32, ptr %6, align 4
  %16 = icmp eq i32 %15, 0
  br i1 %16, label %25, label %17

17:                                               ; preds = %14
  %18 = call ptr @mu_lookup(ptr noundef nonnull @ports, ptr noundef nonnull %3)
  %19 = icmp eq ptr %18, null
  br i1 %19, label %25, label %20

20:                                               ; preds = %17
  %21 = load i32, ptr %18, align 4
  %22 = getelementptr inbounds i8, ptr %6, i64 4
  %23 = load i32, ptr %22, align 4
  %24 = add i32 %23, %21
  store i32 %24, ptr %4, align 4
  br label %25

25:                                               ; preds = %17, %12, %14, %20
  %26 = phi i32 [ 2, %20 ], [ 0, %14 ], [ 0, %12 ], [ 1, %17 ]
  call void @llvm.lifetime.end.p0(i64 4, ptr nonnull %3)
  call void @llvm.lifetime.end.p0(i64 4, ptr nonnull %2)
  ret i32 %26
}

declare void @llvm.lifetime.start.p0(i64 immarg, ptr nocapture)

declare ptr @mu_lookup(ptr noundef, ptr noundef)
declare void @llvm.lifetime.end.p0(i64 immarg, ptr nocapture)

;--- state.json
{"tables": {"config": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "ports": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 16},
            "stats": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 4}},
 "maps": {"config": [{"key": "00000000", "value": "01000000 64000000"}],
          "ports": [{"key": "00000000", "value": "02000000"},
                    {"key": "01000000", "value": "03000000"}]}}
