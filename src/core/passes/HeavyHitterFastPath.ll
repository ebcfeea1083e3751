; Before the lookup of a read-only table too large to inline whole, the hot
; keys the traffic profile chose for that site (hottest first) are compared
; in full; a hit yields the address of a constant copy of the table's answer
; for that key, a miss falls through to the untouched lookup. For an LPM
; trie the whole lookup key is compared, prefix length included, and the
; answer is what the trie returns for exactly that key (a probed key, or
; the prefix of a trie read whole that holds it).
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=heavy-hitter-fast-path | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=heavy-hitter-fast-path --cleanup | FileCheck %s --check-prefix=FOLDED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=instrument-table-sites,heavy-hitter-fast-path --profile | FileCheck %s --check-prefix=PROFILED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=heavy-hitter-fast-path --verifier-paths 2 | FileCheck %s --check-prefix=BUDGET
; RUN: morpheus-opt %t/prog.ll --state %t/percpu.json -passes=heavy-hitter-fast-path | FileCheck %s --check-prefix=PERCPU
; RUN: morpheus-opt %t/prog.ll --state %t/samecpus.json -passes=heavy-hitter-fast-path | FileCheck %s --check-prefix=SAMECPUS
; RUN: morpheus-opt %t/prog.ll --state %t/percpu.json -passes=heavy-hitter-fast-path --verifier-paths 2 | FileCheck %s --check-prefix=PERCPU-BUDGET
; RUN: morpheus-opt %t/prog.ll --state %t/wholetrie.json -passes=heavy-hitter-fast-path --inline-limit 1 | FileCheck %s --check-prefix=WHOLETRIE

; Hot keys B (0a000002) then A (0a000001); C is hot but was not read: left
; to the lookup.
; CHECK-LABEL: define i32 @route(
; CHECK:         [[KEY:%routes.key.memory.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK:         [[K0:%routes.key.*]] = load i32, ptr [[KEY]], align 4
; CHECK:         [[K1:%routes.key.*]] = load i32, ptr
; CHECK:         icmp eq i32 [[K0]], 33554442
; CHECK:         icmp eq i32 [[K1]], 7
; CHECK:         icmp eq i32 [[K0]], 16777226
; CHECK-NOT:     icmp eq i32 [[K0]], 50331658
; CHECK:         [[KEPT:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key){{.*}}!morpheus.kept
; CHECK:         phi ptr [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 8), %{{.*}} ], [ @__morpheus.routes.values, %{{.*}} ], [ [[KEPT]], %{{.*}} ]
; LPM: the prefix length is part of the compare; the answer is the trie's.
; CHECK-LABEL: define i32 @lpm(
; CHECK:         [[LEN:%prefixes.key.*]] = load i32, ptr [[LKEY:%prefixes.key.memory.*]], align 4
; CHECK:         icmp eq i32 [[LEN]], 32
; CHECK:         icmp eq i32 {{.*}}, 16777226
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @prefixes, ptr {{.*}}%key){{.*}}!morpheus.kept
; Written by the data plane: no fast path, whatever the profile says.
; CHECK-LABEL: define i32 @written(
; CHECK-NOT:     key.memory
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @flows
; A trie read whole, larger than the inline limit, that no derived
; representation took (10/8 -> 2, 10.0.0/24 -> 3): each hot key is compared
; whole and answered by the prefix that holds it: 10.0.0.1/32 by the /24
; (the second value), 10.9.9.9/32 by the /8 (the first); 11.0.0.1, which no
; prefix holds, is left to the lookup.
; WHOLETRIE-LABEL: define i32 @lpm(
; WHOLETRIE:         [[LEN:%prefixes.key.*]] = load i32, ptr [[LKEY:%prefixes.key.memory.*]], align 4
; WHOLETRIE:         [[ADDR:%prefixes.key.*]] = load i32, ptr
; WHOLETRIE:         icmp eq i32 [[LEN]], 32
; WHOLETRIE:         icmp eq i32 [[ADDR]], 16777226
; WHOLETRIE:         icmp eq i32 [[ADDR]], 151587082
; WHOLETRIE-NOT:     icmp eq i32 [[ADDR]], 16777227
; WHOLETRIE:         [[KEPT:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @prefixes, ptr {{.*}}%key){{.*}}!morpheus.kept
; WHOLETRIE:         phi ptr [ getelementptr inbounds (i8, ptr @__morpheus.prefixes.values, i64 8), %{{.*}} ], [ @__morpheus.prefixes.values, %{{.*}} ], [ [[KEPT]], %{{.*}} ]
; WHOLETRIE: ; site 1 prefixes heavy-hitter-fast-path applied: 2 hot keys compared before the lookup
; Read whole: not a fast-path candidate (inline-small-table's).
; CHECK-LABEL: define i32 @small_table(
; CHECK-NOT:     key.memory
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @small
; CHECK: ; site 0 routes heavy-hitter-fast-path applied: 2 hot keys compared before the lookup
; CHECK: ; site 1 prefixes heavy-hitter-fast-path applied: 1 hot keys compared before the lookup
; CHECK: ; site 3 small heavy-hitter-fast-path declined: table read whole: not a fast-path candidate

; After the clean-up the hot keys take no lookup: only the last compare's miss
; reaches it. (Their values are loaded from the constant array where the
; hit paths join the kernel's; folded only where the use is on their path.)
; FOLDED-LABEL: define {{.*}}i32 @route(
; FOLDED:         br i1 {{.*}}, label %found, label %routes.next
; FOLDED:       routes.next:
; FOLDED:         br i1 {{.*}}, label %found, label %[[MISS:.*]]
; FOLDED:       [[MISS]]:
; FOLDED-NEXT:    call ptr inttoptr (i64 1 to ptr)(ptr nonnull @routes

; A verifier budget of 2 paths per entry: each key answered with a value
; multiplies the entry's paths (the answers are distinct states), so the
; route's 2 hot keys (3 paths) go and the trie's 1 (2 paths) stays.
; BUDGET-LABEL: define i32 @route(
; BUDGET-NOT:     key.memory
; BUDGET-LABEL: define i32 @lpm(
; BUDGET:         icmp eq i32 {{.*}}, 32
; BUDGET: ; site 0 routes heavy-hitter-fast-path declined: over the verifier budget with the compare chains already planned
; BUDGET: ; site 1 prefixes heavy-hitter-fast-path applied: 1 hot keys compared before the lookup

; The key is sampled before the fast path, so hits are counted too.
; PROFILED-LABEL: define i32 @route(
; PROFILED:         call ptr @morpheus_profile_slot(i32 0)
; PROFILED:         routes.key.memory
; PROFILED:         !morpheus.kept

; Per-CPU chains: the CPU number read (the helper the verifier inlines),
; a switch to one copy of the lookup per listed CPU, each with its own
; chain (CPU 0: B; CPU 1: B then A; CPU 2: its hot key is not in the table,
; so the lookup alone), every other CPU the global chain (A); every copy's
; miss the untouched lookup, kept; the copies joined where the call was.
; PERCPU-LABEL: define i32 @route(
; PERCPU:         [[CPU:%routes.cpu]] = call i64 inttoptr (i64 8 to ptr)()
; PERCPU:         [[CPU32:%.*]] = trunc i64 [[CPU]] to i32
; PERCPU:         switch i32 [[CPU32]], label %routes.cpu.others [
; PERCPU-NEXT:      i32 0, label %routes.cpu0
; PERCPU-NEXT:      i32 1, label %routes.cpu1
; PERCPU-NEXT:      i32 2, label %routes.cpu2
; PERCPU:       routes.cpu.others:
; PERCPU:         icmp eq i32 {{.*}}, 16777226
; PERCPU-NOT:     icmp eq i32 {{.*}}, 33554442
; PERCPU:         [[OTHERS:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes, {{.*}}!morpheus.kept
; PERCPU:         phi ptr [ @__morpheus.routes.values, %{{.*}} ], [ [[OTHERS]], %{{.*}} ]
; PERCPU:       routes.cpu0:
; PERCPU:         icmp eq i32 {{.*}}, 33554442
; PERCPU-NOT:     icmp eq i32 {{.*}}, 16777226
; PERCPU:         [[ON0:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes, {{.*}}!morpheus.kept
; PERCPU:       routes.cpu1:
; PERCPU:         icmp eq i32 {{.*}}, 33554442
; PERCPU:         icmp eq i32 {{.*}}, 16777226
; PERCPU:         call ptr inttoptr (i64 1 to ptr)(ptr @routes, {{.*}}!morpheus.kept
; PERCPU:       routes.cpu2:
; PERCPU-NEXT:    [[ON2:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes, {{.*}}!morpheus.kept
; PERCPU-NEXT:    br label %routes.cpu.join
; PERCPU:       routes.cpu.join:
; PERCPU-NEXT:    %v = phi ptr
; PERCPU-SAME:      [[ON2]], %routes.cpu2
; PERCPU: ; site 0 routes heavy-hitter-fast-path applied: per-CPU chains: CPU 0: 1 hot keys compared before the lookup; CPU 1: 2 hot keys compared before the lookup; CPU 2: none; other CPUs: 1 hot keys compared before the lookup

; Every CPU's chain is the global one: no CPU number, no switch, one chain.
; SAMECPUS-LABEL: define i32 @route(
; SAMECPUS-NOT:     inttoptr (i64 8 to ptr)
; SAMECPUS:         icmp eq i32 {{.*}}, 33554442
; SAMECPUS:         icmp eq i32 {{.*}}, 16777226
; SAMECPUS-NOT:     switch
; SAMECPUS:         !morpheus.kept
; SAMECPUS-LABEL: define i32 @lpm(
; SAMECPUS: ; site 0 routes heavy-hitter-fast-path applied: 2 hot keys compared before the lookup

; A budget of 2 paths: the per-CPU chains count every key any arm answers
; with a value (A and B) + 1 = 3 and go first; the global chain (A: 2)
; fits.
; PERCPU-BUDGET-LABEL: define i32 @route(
; PERCPU-BUDGET-NOT:     inttoptr (i64 8 to ptr)
; PERCPU-BUDGET:         icmp eq i32 {{.*}}, 16777226
; PERCPU-BUDGET-NOT:     icmp eq i32 {{.*}}, 33554442
; PERCPU-BUDGET:         !morpheus.kept
; PERCPU-BUDGET-LABEL: define i32 @lpm(
; PERCPU-BUDGET: ; site 0 routes heavy-hitter-fast-path declined: per-CPU chains over the verifier budget: one chain for every CPU
; PERCPU-BUDGET: ; site 0 routes heavy-hitter-fast-path applied: 1 hot keys compared before the lookup

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@prefixes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@flows = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@small = global { ptr, ptr } zeroinitializer, section ".maps", align 8

; C: struct { u32 daddr; u32 vrf; } key = {...}; v = lookup(&routes, &key);
;    return v ? v->port : 1;
define i32 @route(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %daddr = load i64, ptr %ctx, align 4
  store i64 %daddr, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 1
}

; C: struct { u32 prefixlen; u32 daddr; } key = {32, daddr};
define i32 @lpm(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  store i32 32, ptr %key, align 4
  %daddr = load i32, ptr %ctx, align 4
  %at = getelementptr i8, ptr %key, i64 4
  store i32 %daddr, ptr %at, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @prefixes, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 1
}

; C: v = lookup(&flows, &key); if (v) v->packets++;
define i32 @written(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %packets = load i64, ptr %v, align 8
  %more = add i64 %packets, 1
  store i64 %more, ptr %v, align 8
  ret i32 2
miss:
  ret i32 1
}

define i32 @small_table(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @small, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

;--- state.json
{"tables": {"routes": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 4096},
            "prefixes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 1024, "flags": 1},
            "flows": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1024},
            "small": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 16}},
 "maps": {"routes": [{"key": "0a000001 07000000", "value": "05000000"},
                     {"key": "0a000002 07000000", "value": "09000000"}],
          "prefixes": [{"key": "20000000 0a000001", "value": "04000000"}],
          "flows": [{"key": "01000000", "value": "0000000000000000"}],
          "small": [{"key": "01000000", "value": "02000000"}]},
 "probed_maps": ["routes", "prefixes", "flows"],
 "hot_keys": {"0": ["0a000002 07000000", "0a000001 07000000", "0a000003 07000000"],
              "1": ["20000000 0a000001"],
              "2": ["01000000"],
              "3": ["01000000"]}}

;--- percpu.json
{"tables": {"routes": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 4096},
            "prefixes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 1024, "flags": 1},
            "flows": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1024},
            "small": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 16}},
 "maps": {"routes": [{"key": "0a000001 07000000", "value": "05000000"},
                     {"key": "0a000002 07000000", "value": "09000000"}],
          "prefixes": [{"key": "20000000 0a000001", "value": "04000000"}],
          "flows": [{"key": "01000000", "value": "0000000000000000"}],
          "small": [{"key": "01000000", "value": "02000000"}]},
 "probed_maps": ["routes", "prefixes", "flows"],
 "hot_keys": {"0": ["0a000001 07000000"]},
 "hot_keys_per_cpu": {"0": {"0": ["0a000002 07000000"],
                            "1": ["0a000002 07000000", "0a000001 07000000"],
                            "2": ["0a000009 07000000"]}}}

;--- samecpus.json
{"tables": {"routes": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 4096},
            "prefixes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 1024, "flags": 1},
            "flows": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1024},
            "small": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 16}},
 "maps": {"routes": [{"key": "0a000001 07000000", "value": "05000000"},
                     {"key": "0a000002 07000000", "value": "09000000"}],
          "prefixes": [{"key": "20000000 0a000001", "value": "04000000"}],
          "flows": [{"key": "01000000", "value": "0000000000000000"}],
          "small": [{"key": "01000000", "value": "02000000"}]},
 "probed_maps": ["routes", "prefixes", "flows"],
 "hot_keys": {"0": ["0a000002 07000000", "0a000001 07000000"]},
 "hot_keys_per_cpu": {"0": {"0": ["0a000002 07000000", "0a000001 07000000"],
                            "1": ["0a000002 07000000", "0a000001 07000000"]}}}

;--- wholetrie.json
{"tables": {"routes": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 4096},
            "prefixes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 1024, "flags": 1},
            "flows": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 1024},
            "small": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 16}},
 "maps": {"routes": [{"key": "0a000001 07000000", "value": "05000000"}],
          "prefixes": [{"key": "08000000 0a000000", "value": "02000000"},
                       {"key": "18000000 0a000000", "value": "03000000"}],
          "flows": [{"key": "01000000", "value": "0000000000000000"}],
          "small": [{"key": "01000000", "value": "02000000"}]},
 "probed_maps": ["routes", "flows"],
 "hot_keys": {"1": ["20000000 0a000001", "20000000 0a090909", "20000000 0b000001"]}}
