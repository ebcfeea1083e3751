; A read-only LPM trie whose prefixes have a few lengths becomes a probe of
; a derived hash table per length, longest first, keyed by the key's data
; masked to that length, for keys of the whole width (a packet's address);
; other prefix lengths keep the real lookup. Routes: three
; /24s, 10.1.2.0 (stored with host bits 10.1.2.77: the trie ignores them,
; so does the mask), 10.1.3.0 and 192.168.0.0; routes6: two /64s, the first
; stored with host bits set.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-hash | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-code,lpm-as-array,lpm-as-hash | FileCheck %s --check-prefix=SMALL
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-code,lpm-as-array,lpm-as-hash --cost-model %t/slow-search.json | FileCheck %s --check-prefix=MODEL
; RUN: morpheus-opt %t/prog.ll --state %t/mixed.json -passes=lpm-as-hash | FileCheck %s --check-prefix=MIXED
; RUN: morpheus-opt %t/prog.ll --state %t/many.json -passes=lpm-as-hash | FileCheck %s --check-prefix=MANY
; RUN: morpheus-opt %t/prog.ll --state %t/lengths.json -passes=lpm-as-hash | FileCheck %s --check-prefix=LENGTHS

; One slot is the entry's number + 1 (0: empty), then its masked data,
; read as the program loads it (little-endian: 10.1.2 is 0x0002010a).
; CHECK: @__morpheus.routes.hash = private constant [16 x i32] [{{.*}}i32 1, i32 131338, {{.*}}], align 8
; CHECK: @__morpheus.routes6.hash = private constant [12 x i32]

; C: struct route_key { __u32 prefixlen; __u32 addr; } key = { ctx->len, iph->daddr };
; CHECK-LABEL: define i32 @route(
; CHECK:         [[KEY:%routes.key.memory.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    [[LEN:%routes.prefixlen.*]] = load i32, ptr [[KEY]], align 4
; CHECK:         [[DATA:%routes.data.*]] = load i32, ptr {{.*}}, align 4
; The first 24 bits of the address, in memory order.
; CHECK-NEXT:    [[MASKED:%routes.masked.*]] = and i32 [[DATA]], 16777215
; The whole address (prefix length 32) is hashed; any other prefix length
; keeps the real lookup.
; CHECK-NEXT:    [[WHOLE:%.*]] = icmp eq i32 [[LEN]], 32
; CHECK-NEXT:    br i1 [[WHOLE]], label %routes.hash, label %routes.other.prefixlen
; CHECK:       routes.hash:
; CHECK-NEXT:    [[WIDE:%.*]] = zext i32 [[MASKED]] to i64
; CHECK-NEXT:    [[H:%.*]] = mul i64 [[WIDE]], -7046029254386353131
; CHECK-NEXT:    [[TOP:%.*]] = lshr i64 [[H]], 61
; The home slot, checked below the home count on an opaque copy (the
; verifier's bound; always true, a failure answers null).
; CHECK-NEXT:    [[HOME:%routes.home.*]] = call i64 asm "", "=r,0"(i64 [[TOP]])
; CHECK-NEXT:    [[INSIDE:%.*]] = icmp ult i64 [[HOME]], 8
; CHECK-NEXT:    br i1 [[INSIDE]], label %routes.probe0, label %routes.miss
; CHECK:       routes.other.prefixlen:
; CHECK-NEXT:    [[KEPT:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key){{.*}}!morpheus.kept
; CHECK:       routes.probe0:
; CHECK:         [[AT:%.*]] = mul i64 {{.*}}, 2
; CHECK-NEXT:    getelementptr inbounds i32, ptr @__morpheus.routes.hash, i64 [[AT]]
; CHECK-NEXT:    [[TAG:%routes.slot.tag.*]] = load i32, ptr
; An empty slot: no prefix has these bits.
; CHECK-NEXT:    [[EMPTY:%.*]] = icmp eq i32 [[TAG]], 0
; CHECK-NEXT:    br i1 [[EMPTY]], label %routes.miss, label %routes.compare0
; CHECK:       routes.hit:
; CHECK-NEXT:    phi i32 [ [[TAG]], %routes.compare0 ]
; CHECK:         sub i64 {{.*}}, 1
; CHECK-NEXT:    [[NUM:%routes.entry.number.*]] = call i64 asm "", "=r,0"(i64
; CHECK-NEXT:    [[KNOWN:%.*]] = icmp ult i64 [[NUM]], 3
; CHECK-NEXT:    br i1 [[KNOWN]], label %routes.found, label %routes.miss
; CHECK:       routes.compare0:
; CHECK:         [[STORED:%routes.slot.data.*]] = load i32, ptr
; CHECK-NEXT:    [[SAME:%.*]] = icmp eq i32 [[STORED]], [[MASKED]]
; The last probe: past it no prefix has these bits.
; CHECK-NEXT:    br i1 [[SAME]], label %routes.hit, label %routes.miss
; CHECK:       routes.found:
; CHECK-NEXT:    [[OFF:%.*]] = mul i64 [[NUM]], 8
; CHECK-NEXT:    [[ENTRY:%routes.entry.*]] = getelementptr inbounds i8, ptr @__morpheus.routes.values, i64 [[OFF]]
; CHECK:         phi ptr [ [[ENTRY]], %routes.found ], [ null, %routes.miss ], [ [[KEPT]], %routes.other.prefixlen ]
;
; IPv6 (lpm-as-array has no table for it): the first two words, both
; compared. The program stores the prefix length 128 as a constant: every
; key has the whole width, so there is no test of it and no lookup kept.
; CHECK-LABEL: define i32 @route6(
; CHECK-NOT:     routes6.prefixlen
; CHECK:       routes6.compare0:
; CHECK:         icmp eq i32
; CHECK:         icmp eq i32
; CHECK-NEXT:    and i1
; CHECK-NOT:     routes6.other.prefixlen
; CHECK: ; site 0 routes lpm-as-hash applied: 3 prefixes of length 24 as a derived hash of 8 home slots, probes: at most 1 (64 bytes); other prefix lengths keep the lookup; predicted derived hash {{.*}} (chosen: derived hash; default costs)
; CHECK: ; site 1 routes6 lpm-as-hash applied: 2 prefixes of length 64 as a derived hash{{.*}}; every key has prefix length 128;

; With every representation offered, default costs price a search over a
; few intervals cheapest: the hash declines for it.
; SMALL-NOT:     @__morpheus.routes.hash
; (lpm-as-code runs first and takes the site: the others never see it.)
; SMALL: ; site 0 routes lpm-as-code applied: {{.*}} derived hash {{.*}} (chosen: search; default costs)
; SMALL-NOT: lpm-as-hash applied

; A calibration that finds search levels dear gets the hash, cheaper than the
; derived 16-8-8 table too (two loads, and 128 KiB its saving does not pay).
; MODEL:     @__morpheus.routes.hash
; MODEL-NOT: @__morpheus.routes.levels
; MODEL: ; site 0 routes lpm-as-code declined: the cost model prefers the derived hash
; MODEL: ; site 0 routes lpm-as-array declined: the cost model prefers the derived hash
; MODEL: ; site 1 routes6 lpm-as-array declined: prefix data of 16 bytes
; MODEL: ; site 0 routes lpm-as-hash applied: 3 prefixes of length 24 {{.*}}(chosen: derived hash; calibrated costs)

; Prefixes of two lengths, 10.1.2.0/24 and 10.1.0.0/16: a hash each, one
; after the other in one global (the /16's from word 4, its entry number 2),
; the /24s probed first; not found there (an empty slot, or a compare that
; fails), the /16s; not found there either, null.
; MIXED:       @__morpheus.routes.hash = private constant [8 x i32] [i32 1, i32 131338, i32 0, i32 0, i32 2, i32 266, i32 0, i32 0]
; MIXED-LABEL: define i32 @route(
; MIXED:         [[DATA:%routes.data.*]] = load i32
; MIXED-NEXT:    [[M24:%routes.masked.*]] = and i32 [[DATA]], 16777215
; MIXED-NEXT:    [[M16:%routes.masked.*]] = and i32 [[DATA]], 65535
; MIXED-NEXT:    icmp eq i32 {{.*}}, 32
; MIXED:       routes.hash:
; MIXED:         br i1 {{.*}}, label %routes.probe0, label %[[SHORTER:routes.hash.*]]
; MIXED:       [[SHORTER]]:
; MIXED-NEXT:    zext i32 [[M16]] to i64
; MIXED:         br i1 {{.*}}, label %[[PROBE16:routes.probe0.*]], label %routes.miss
; MIXED:       routes.probe0:
; MIXED:         br i1 {{.*}}, label %[[SHORTER]], label %routes.compare0
; MIXED:       routes.compare0:
; MIXED:         icmp eq i32 {{.*}}, [[M24]]
; MIXED-NEXT:    br i1 {{.*}}, label %routes.hit, label %[[SHORTER]]
; MIXED:       [[PROBE16]]:
; MIXED:         [[AT:%.*]] = mul i64 {{.*}}, 2
; MIXED-NEXT:    add i64 [[AT]], 4
; MIXED:         br i1 {{.*}}, label %routes.miss, label %[[COMPARE16:routes.compare0.*]]
; MIXED:       [[COMPARE16]]:
; MIXED:         icmp eq i32 {{.*}}, [[M16]]
; MIXED-NEXT:    br i1 {{.*}}, label %routes.hit, label %routes.miss
; MIXED: ; site 0 routes lpm-as-hash applied: 2 prefixes of 2 lengths (24, 16) as derived hashes probed longest first, 4 home slots in all, probes: at most 1 per length (32 bytes); other prefix lengths keep the lookup

; Nine lengths, one more than it probes: the lookup stays.
; LENGTHS-NOT:   @__morpheus.routes.hash
; LENGTHS-LABEL: define i32 @route(
; LENGTHS:         call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; LENGTHS: ; site 0 routes lpm-as-hash declined: prefixes of 9 lengths (the derived hash probes at most 8)

; 40 /32s: collisions probed linearly, unrolled up to the most a present key
; needs.
; MANY-LABEL: define i32 @route(
; MANY:       routes.probe1:
; MANY-NOT:   routes.probe2:
; MANY: ; site 0 routes lpm-as-hash applied: 40 prefixes of length 32 as a derived hash of 128 home slots, probes: at most 2 (1032 bytes)

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@routes6 = global { ptr, ptr } zeroinitializer, section ".maps", align 8

; C: struct route_key { __u32 prefixlen; __u32 addr; } key = { ctx->len, iph->daddr };
define i32 @route(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %len = load i32, ptr %ctx, align 4
  store i32 %len, ptr %key, align 4
  %daddrp = getelementptr i8, ptr %ctx, i64 4
  %daddr = load i32, ptr %daddrp, align 4
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

; C: struct { __u32 prefixlen; __u8 addr[16]; } key = { 128, ip6h->daddr };
define i32 @route6(ptr %ctx) section "xdp" {
entry:
  %key = alloca [20 x i8], align 4
  store i32 128, ptr %key, align 4
  %addrp = getelementptr i8, ptr %key, i64 4
  call void @llvm.memcpy.p0.p0.i64(ptr align 4 %addrp, ptr align 4 %ctx, i64 16, i1 false)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes6, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

declare void @llvm.memcpy.p0.p0.i64(ptr noalias nocapture writeonly, ptr noalias nocapture readonly, i64, i1 immarg)
;--- state.json
{"tables": {"routes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1},
            "routes6": {"type": "lpm_trie", "key_size": 20, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"routes": [{"key": "18000000 0a01024d", "value": "01000000"},
                     {"key": "18000000 0a010300", "value": "02000000"},
                     {"key": "18000000 c0a80000", "value": "03000000"}],
          "routes6": [{"key": "40000000 20010db8 00000001 ffffffff ffffffff", "value": "01000000"},
                      {"key": "40000000 20010db8 00000002 00000000 00000000", "value": "02000000"}]}}
;--- mixed.json
{"tables": {"routes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1},
            "routes6": {"type": "lpm_trie", "key_size": 20, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"routes": [{"key": "18000000 0a010200", "value": "01000000"},
                     {"key": "10000000 0a010000", "value": "02000000"}],
          "routes6": []}}
;--- slow-search.json
{"format": 3, "source": "test: slow search", "hash_lookup_ns": 29,
 "lpm_lookup_ns": [[2, 22], [4096, 44]], "array_lookup_ns": 0.6, "compare_ns": [[64, 0.4]],
 "search_level_ns": [[4, 20]], "derived_load_ns": [[4096, 1]], "helper_call_ns": 8}
;--- many.json
{"tables": {"routes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1}, "routes6": {"type": "lpm_trie", "key_size": 20, "value_size": 4, "max_entries": 64, "flags": 1}}, "maps": {"routes": [{"key": "20000000 0a000000", "value": "01000000"}, {"key": "20000000 0a3779b1", "value": "02000000"}, {"key": "20000000 0a6ef362", "value": "03000000"}, {"key": "20000000 0aa66d13", "value": "04000000"}, {"key": "20000000 0adde6c4", "value": "05000000"}, {"key": "20000000 0a156075", "value": "06000000"}, {"key": "20000000 0a4cda26", "value": "07000000"}, {"key": "20000000 0a8453d7", "value": "08000000"}, {"key": "20000000 0abbcd88", "value": "09000000"}, {"key": "20000000 0af34739", "value": "0a000000"}, {"key": "20000000 0a2ac0ea", "value": "0b000000"}, {"key": "20000000 0a623a9b", "value": "0c000000"}, {"key": "20000000 0a99b44c", "value": "0d000000"}, {"key": "20000000 0ad12dfd", "value": "0e000000"}, {"key": "20000000 0a08a7ae", "value": "0f000000"}, {"key": "20000000 0a40215f", "value": "10000000"}, {"key": "20000000 0a779b10", "value": "11000000"}, {"key": "20000000 0aaf14c1", "value": "12000000"}, {"key": "20000000 0ae68e72", "value": "13000000"}, {"key": "20000000 0a1e0823", "value": "14000000"}, {"key": "20000000 0a5581d4", "value": "15000000"}, {"key": "20000000 0a8cfb85", "value": "16000000"}, {"key": "20000000 0ac47536", "value": "17000000"}, {"key": "20000000 0afbeee7", "value": "18000000"}, {"key": "20000000 0a336898", "value": "19000000"}, {"key": "20000000 0a6ae249", "value": "1a000000"}, {"key": "20000000 0aa25bfa", "value": "1b000000"}, {"key": "20000000 0ad9d5ab", "value": "1c000000"}, {"key": "20000000 0a114f5c", "value": "1d000000"}, {"key": "20000000 0a48c90d", "value": "1e000000"}, {"key": "20000000 0a8042be", "value": "1f000000"}, {"key": "20000000 0ab7bc6f", "value": "20000000"}, {"key": "20000000 0aef3620", "value": "21000000"}, {"key": "20000000 0a26afd1", "value": "22000000"}, {"key": "20000000 0a5e2982", "value": "23000000"}, {"key": "20000000 0a95a333", "value": "24000000"}, {"key": "20000000 0acd1ce4", "value": "25000000"}, {"key": "20000000 0a049695", "value": "26000000"}, {"key": "20000000 0a3c1046", "value": "27000000"}, {"key": "20000000 0a7389f7", "value": "28000000"}], "routes6": []}}
;--- lengths.json
{"tables": {"routes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1},
            "routes6": {"type": "lpm_trie", "key_size": 20, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"routes": [{"key": "08000000 0a000000", "value": "01000000"},
                     {"key": "0c000000 0a000000", "value": "02000000"},
                     {"key": "10000000 0a010000", "value": "03000000"},
                     {"key": "14000000 0a010000", "value": "04000000"},
                     {"key": "18000000 0a010200", "value": "05000000"},
                     {"key": "1a000000 0a010200", "value": "06000000"},
                     {"key": "1c000000 0a010200", "value": "07000000"},
                     {"key": "1e000000 0a010200", "value": "08000000"},
                     {"key": "20000000 0a010203", "value": "09000000"}],
          "routes6": []}}
