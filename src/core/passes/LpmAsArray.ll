; A read-only IPv4 LPM trie with more prefixes than lpm-as-code takes
; becomes loads from a derived 16-8-8 table; keys whose prefix length is not
; 32 keep the real lookup. Routes: 0.0.0.0/0 (entry 0), 10.0.0.0/8 (1),
; 10.1.0.0/16 (2, stored with host bits set: the trie ignores them),
; 10.1.2.3/32 (3). The /16 block 10.1 holds several answers: chunk 0 splits
; it by /24, and its 10.1.2 slot names chunk 1, which splits that block by
; address (10.1.2.3 answers entry 3, the rest of the block entry 2).
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-array --inline-limit 2 | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-code,lpm-as-array | FileCheck %s --check-prefix=SMALL
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-array --inline-limit 0 | FileCheck %s --check-prefix=IPV6
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-code,lpm-as-array --cost-model %t/slow-search.json | FileCheck %s --check-prefix=MODEL
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-code,lpm-as-array --cost-model %t/cheap-trie.json | FileCheck %s --check-prefix=TRIE

; 65,536 first-level slots and two chunks of 256, one table for both sites.
; CHECK: @__morpheus.routes.levels = private constant [66048 x i16] {{.*}}, align 8
; CHECK-NOT: @__morpheus.routes.levels.1

; C: struct route_key { __u32 prefixlen; __u32 addr; } key = { ctx->len, iph->daddr };
;    route = bpf_map_lookup_elem(&routes, &key);
; CHECK-LABEL: define i32 @route(
; CHECK:         [[KEY:%routes.key.memory.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    [[LEN:%routes.prefixlen.*]] = load i32, ptr [[KEY]], align 4
; CHECK:         [[DATA:%routes.data.*]] = load i32, ptr {{.*}}, align 4
; CHECK-NEXT:    [[ADDR:%routes.address.*]] = call i32 @llvm.bswap.i32(i32 [[DATA]])
; CHECK-NEXT:    [[WIDE:%.*]] = zext i32 [[ADDR]] to i64
; CHECK-NEXT:    [[WHOLE:%.*]] = icmp eq i32 [[LEN]], 32
; CHECK-NEXT:    br i1 [[WHOLE]], label %routes.level0, label %routes.other.prefixlen
; The top 16 bits index the first level.
; CHECK:       routes.level0:
; CHECK-NEXT:    [[TOP:%.*]] = lshr i64 [[WIDE]], 16
; CHECK-NEXT:    [[AT0:%.*]] = getelementptr inbounds i16, ptr @__morpheus.routes.levels, i64 [[TOP]]
; CHECK-NEXT:    [[SLOT0:%routes.slot0.*]] = load i16, ptr [[AT0]]
; CHECK-NEXT:    [[FLAG0:%.*]] = and i16 [[SLOT0]], -32768
; CHECK-NEXT:    [[SPLIT0:%.*]] = icmp ne i16 [[FLAG0]], 0
; CHECK-NEXT:    br i1 [[SPLIT0]], label %routes.chunk1, label %routes.answer
; CHECK:       routes.answer:
; CHECK-NEXT:    [[SLOT:%.*]] = phi i16 [ [[SLOT0]], %routes.level0 ], [ %routes.slot1, %routes.level1 ], [ %routes.slot2, %routes.level2 ]
; CHECK-NEXT:    [[NONE:%.*]] = icmp eq i16 [[SLOT]], 0
; CHECK-NEXT:    br i1 [[NONE]], label %routes.miss, label %routes.hit
; CHECK:       routes.other.prefixlen:
; CHECK-NEXT:    [[KEPT:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key){{.*}}!morpheus.kept
; A chunk number is checked below the chunk count (the verifier's bound;
; always true, a failure answers null).
; CHECK:       routes.chunk1:
; CHECK-NEXT:    and i16 [[SLOT0]], 32767
; CHECK-NEXT:    zext i16
; CHECK-NEXT:    [[NUMBER:%routes.chunk.number.*]] = call i64 asm "", "=r,0"(i64
; CHECK-NEXT:    [[INSIDE:%.*]] = icmp ult i64 [[NUMBER]], 2
; CHECK-NEXT:    br i1 [[INSIDE]], label %routes.level1, label %routes.miss
; CHECK:       routes.level1:
; CHECK-NEXT:    lshr i64 [[WIDE]], 8
; CHECK-NEXT:    and i64 {{.*}}, 255
; CHECK-NEXT:    %routes.bits = call i64 asm "", "=r,0"(i64
; CHECK-NEXT:    shl i64 [[NUMBER]], 8
; CHECK-NEXT:    add i64 {{.*}}, 65536
; CHECK:         %routes.slot1 = load i16, ptr
; The last level: a slot per address, never a chunk.
; CHECK:       routes.level2:
; CHECK:         %routes.slot2 = load i16, ptr
; CHECK-NEXT:    br label %routes.answer
; The slot's answer: 0 is no prefix, i + 1 is entry i of the value array.
; CHECK:       routes.hit:
; CHECK:         sub i64 {{.*}}, 1
; CHECK-NEXT:    [[NUM:%routes.entry.number.*]] = call i64 asm "", "=r,0"(i64
; CHECK-NEXT:    [[KNOWN:%.*]] = icmp ult i64 [[NUM]], 4
; A bound that failed (never: the table is cut so) answers null, keeping the
; verifier off the trie's own values after a hit.
; CHECK-NEXT:    br i1 [[KNOWN]], label %routes.found, label %routes.miss
; CHECK:       routes.found:
; CHECK-NEXT:    [[OFF:%.*]] = mul i64 [[NUM]], 8
; CHECK-NEXT:    [[ENTRY:%routes.entry.*]] = getelementptr inbounds i8, ptr @__morpheus.routes.values, i64 [[OFF]]
; CHECK:         phi ptr [ null, %routes.miss ], [ [[ENTRY]], %routes.found ], [ [[KEPT]], %routes.other.prefixlen ]
; CHECK-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr @routes,
;
; The IPv6 trie is lpm-as-code's (one prefix), the written trie nobody's.
; CHECK-LABEL: define i32 @route6(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @routes6
; A constant key is still a prefix match: the same derived table answers.
; CHECK-LABEL: define i32 @constant_route(
; CHECK:         getelementptr inbounds i16, ptr @__morpheus.routes.levels,
; CHECK-LABEL: define i32 @learn(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @seen
; CHECK: ; site 0 routes lpm-as-array applied: 4 prefixes as a derived 16-8-8 table of 2 chunks (132096 bytes); other prefix lengths keep the lookup

; Within the inline limit the trie is lpm-as-code's, which runs first: its
; sites are gone when lpm-as-array runs.
; SMALL-NOT:     @__morpheus.routes.levels
; SMALL-LABEL: define i32 @route(
; SMALL:         routes.search:
; SMALL-NOT:     lpm-as-array
; SMALL:         ; site 0 routes lpm-as-code applied
; SMALL-NOT:     lpm-as-array

; IPv6-sized data has no derived table: the lookup stays.
; IPV6-LABEL: define i32 @route6(
; IPV6:         call ptr inttoptr (i64 1 to ptr)(ptr @routes6, ptr {{.*}}%key)
; IPV6: ; site {{[0-9]+}} routes6 lpm-as-array declined: prefix data of 16 bytes (an IPv4 address, alone or after a 32-bit leading word)

; The representation is the cost model's: within the inline limit, where
; lpm-as-code would take the trie by limits alone, a calibration that finds
; a search level dearer than a derived-table load gets the derived table...
; MODEL:         @__morpheus.routes.levels = private constant [66048 x i16]
; MODEL-LABEL: define i32 @route(
; MODEL-NOT:     routes.search:
; MODEL:         getelementptr inbounds i16, ptr @__morpheus.routes.levels,
; MODEL: ; site 0 routes lpm-as-code declined: the cost model prefers the derived table; predicted derived table {{.*}} (chosen: derived table; calibrated costs)
; MODEL: ; site 0 routes lpm-as-array applied: 4 prefixes as a derived 16-8-8 table
;
; ... and one that finds the trie's own lookup cheapest keeps it.
; TRIE-NOT:     @__morpheus.routes.levels
; TRIE-LABEL: define i32 @route(
; TRIE:         call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; TRIE: ; site 0 routes lpm-as-code declined: the cost model prefers the map; predicted map
; TRIE: ; site 0 routes lpm-as-array declined: the cost model prefers the map

; A trie whose data is a 32-bit leading word, then the address (the
; firewall's (generation, prefix) keys, prefixlen = 32 + the prefix's
; length): one table per leading word, picked by a compare on it; any other
; leading word finds no prefix. The program stores the prefix length 64, a
; constant: every key has the whole width, so there is no test of it and no
; lookup kept for other lengths.
; Generation 0: 10.0.0.0/8 (entry 0), 10.1.2.0/24 (1); generation 1:
; 0.0.0.0/0 (2), 10.1.2.3/32 (3). Generation 0's table splits the 10.1
; block once, generation 1's twice: 65,536 + 256 and 65,536 + 512 slots.
; The two tables' 258 KiB pay only against a trie priced above the
; defaults (slow-trie.json); at default costs they save 11.8 ns, under what
; their memory asks, and the lookup stays (MEMORY).
; RUN: morpheus-opt %t/leading.ll --state %t/two-generations.json -passes=lpm-as-array --cost-model %t/slow-trie.json | FileCheck %s --check-prefix=LEADING
; RUN: morpheus-opt %t/leading.ll --state %t/two-generations.json -passes=lpm-as-array | FileCheck %s --check-prefix=MEMORY
; MEMORY: site 0 prefixes lpm-as-array declined: {{.*}}the derived table's 258 KiB save {{.*}} under the {{.*}} its memory asks
; MEMORY-NOT: @__morpheus.prefixes.levels
; RUN: morpheus-opt %t/leading.ll --state %t/five-generations.json -passes=lpm-as-array | FileCheck %s --check-prefix=MANY
; RUN: morpheus-opt %t/leading.ll --state %t/short-prefix.json -passes=lpm-as-array | FileCheck %s --check-prefix=SHORT
; LEADING: @__morpheus.prefixes.levels = private constant [131840 x i16]
; LEADING-LABEL: define i32 @classify(
; LEADING-NOT:     prefixes.prefixlen
; LEADING:         [[GEN:%prefixes.leading.data.*]] = load i32, ptr
; LEADING-NEXT:    [[WORD:%prefixes.leading.*]] = call i32 @llvm.bswap.i32(i32 [[GEN]])
; LEADING:         [[DATA:%prefixes.data.*]] = load i32, ptr
; LEADING-NEXT:    [[ADDR:%prefixes.address.*]] = call i32 @llvm.bswap.i32(i32 [[DATA]])
; LEADING:         br label %prefixes.leading.word
; LEADING:       prefixes.leading.word:
; LEADING-NEXT:    [[GEN0:%.*]] = icmp eq i32 [[WORD]], 0
; LEADING-NEXT:    br i1 [[GEN0]], label %prefixes.leading0, label %prefixes.leading.other
; LEADING-NOT:   prefixes.other.prefixlen:
; LEADING:       prefixes.leading0:
; LEADING-NEXT:    [[TOP0:%.*]] = lshr i64 {{.*}}, 16
; LEADING-NEXT:    getelementptr inbounds i16, ptr @__morpheus.prefixes.levels, i64 [[TOP0]]
; Generation 1 (its first byte 1: 0x01000000 read in the trie's bit order);
; its table starts after generation 0's 65,792 slots.
; LEADING:       prefixes.leading.other:
; LEADING-NEXT:    [[GEN1:%.*]] = icmp eq i32 [[WORD]], 16777216
; LEADING-NEXT:    br i1 [[GEN1]], label %prefixes.leading16777216, label %prefixes.miss
; LEADING:       prefixes.leading16777216:
; LEADING-NEXT:    [[TOP1:%.*]] = lshr i64 {{.*}}, 16
; LEADING-NEXT:    [[AT1:%.*]] = add i64 [[TOP1]], 65792
; LEADING-NEXT:    getelementptr inbounds i16, ptr @__morpheus.prefixes.levels, i64 [[AT1]]
; Its chunks are numbered from 0 within it, checked below its own count.
; LEADING:         icmp ult i64 {{%prefixes.chunk.number.*}}, 2
; LEADING:         add i64 {{.*}}, 131328
; LEADING:         icmp ult i64 {{%prefixes.entry.number.*}}, 4
; LEADING: ; site 0 prefixes lpm-as-array applied: 4 prefixes as derived 16-8-8 tables, one per leading word (2 words), of 3 chunks (263680 bytes; other leading words find no prefix); every key has prefix length 64; predicted derived table

; Five generations: a leading word with too many values keeps the trie.
; MANY-NOT:     @__morpheus.prefixes.levels
; MANY-LABEL: define i32 @classify(
; MANY:         call ptr inttoptr (i64 1 to ptr)(ptr @prefixes, ptr {{.*}}%key)
; MANY: ; site 0 prefixes lpm-as-array declined: a leading word taking more than 4 values across the prefixes, or prefixes shorter than it

; A prefix shorter than the leading word (prefixlen 16: generations 0 to
; 65,535) covers too many leading words too.
; SHORT-NOT:     @__morpheus.prefixes.levels
; SHORT: ; site 0 prefixes lpm-as-array declined: a leading word taking more than 4 values across the prefixes, or prefixes shorter than it

;--- leading.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@prefixes = global { ptr, ptr } zeroinitializer, section ".maps", align 8

; C: struct fw_prefix_key key = { 64, cfg->generation, iph->saddr };
;    set = bpf_map_lookup_elem(&src_prefixes, &key);
define i32 @classify(ptr %ctx) section "xdp" {
entry:
  %key = alloca [12 x i8], align 4
  store i32 64, ptr %key, align 4
  %generation = load i32, ptr %ctx, align 4
  %generationp = getelementptr i8, ptr %key, i64 4
  store i32 %generation, ptr %generationp, align 4
  %saddrp = getelementptr i8, ptr %ctx, i64 4
  %saddr = load i32, ptr %saddrp, align 4
  %addrp = getelementptr i8, ptr %key, i64 8
  store i32 %saddr, ptr %addrp, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @prefixes, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 1
}
;--- two-generations.json
{"tables": {"prefixes": {"type": "lpm_trie", "key_size": 12, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"prefixes": [{"key": "28000000 00000000 0a000000", "value": "01000000"},
                       {"key": "38000000 00000000 0a010200", "value": "02000000"},
                       {"key": "20000000 01000000 00000000", "value": "03000000"},
                       {"key": "40000000 01000000 0a010203", "value": "04000000"}]}}
;--- five-generations.json
{"tables": {"prefixes": {"type": "lpm_trie", "key_size": 12, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"prefixes": [{"key": "28000000 00000000 0a000000", "value": "01000000"},
                       {"key": "28000000 01000000 0a000000", "value": "02000000"},
                       {"key": "28000000 02000000 0a000000", "value": "03000000"},
                       {"key": "28000000 03000000 0a000000", "value": "04000000"},
                       {"key": "28000000 04000000 0a000000", "value": "05000000"}]}}
;--- short-prefix.json
{"tables": {"prefixes": {"type": "lpm_trie", "key_size": 12, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"prefixes": [{"key": "28000000 00000000 0a000000", "value": "01000000"},
                       {"key": "10000000 00000000 00000000", "value": "02000000"}]}}
;--- slow-search.json
{"format": 3, "source": "test: slow search", "hash_lookup_ns": 29,
 "lpm_lookup_ns": [[2, 22], [4096, 44]], "array_lookup_ns": 0.6, "compare_ns": [[64, 0.4]],
 "search_level_ns": [[4, 20]], "derived_load_ns": [[4096, 1]], "helper_call_ns": 8}
;--- slow-trie.json
{"format": 3, "source": "test: slow trie", "hash_lookup_ns": 29,
 "lpm_lookup_ns": [[2, 60], [4096, 120]], "array_lookup_ns": 0.6, "compare_ns": [[64, 0.4]],
 "search_level_ns": [[4, 3]], "derived_load_ns": [[4096, 1]], "helper_call_ns": 8}
;--- cheap-trie.json
{"format": 3, "source": "test: cheap trie", "hash_lookup_ns": 29,
 "lpm_lookup_ns": [[2, 0.1]], "array_lookup_ns": 0.6, "compare_ns": [[64, 0.4]],
 "search_level_ns": [[4, 20]], "derived_load_ns": [[4096, 20]], "helper_call_ns": 8}
;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@routes6 = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@seen = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @route(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %lenp = getelementptr i8, ptr %ctx, i64 16
  %len = load i32, ptr %lenp, align 4
  store i32 %len, ptr %key, align 4
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

; C: key = { 24, 10.1.2.0 }; lookup(&routes, &key)  (a constant key: still a
;    prefix match, answered by the /16)
define i32 @constant_route(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  store i32 24, ptr %key, align 4
  %addrp = getelementptr i8, ptr %key, i64 4
  store i32 131594, ptr %addrp, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

; C: bpf_map_update_elem(&seen, &key, &one, BPF_ANY) after a lookup
define i32 @learn(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %one = alloca i32, align 4
  store i32 1, ptr %one, align 4
  store i32 32, ptr %key, align 4
  %daddr = load i32, ptr %ctx, align 4
  %addrp = getelementptr i8, ptr %key, i64 4
  store i32 %daddr, ptr %addrp, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @seen, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  ret i32 2
miss:
  %r = call i64 inttoptr (i64 2 to ptr)(ptr @seen, ptr %key, ptr %one, i64 0)
  ret i32 1
}

declare void @llvm.memcpy.p0.p0.i64(ptr noalias nocapture writeonly, ptr noalias nocapture readonly, i64, i1 immarg)

;--- state.json
{"tables": {"routes": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1},
            "routes6": {"type": "lpm_trie", "key_size": 20, "value_size": 4, "max_entries": 64, "flags": 1},
            "seen": {"type": "lpm_trie", "key_size": 8, "value_size": 4, "max_entries": 64, "flags": 1}},
 "maps": {"routes": [{"key": "00000000 00000000", "value": "01000000"},
                     {"key": "08000000 0a000000", "value": "02000000"},
                     {"key": "10000000 0a01ffff", "value": "03000000"},
                     {"key": "20000000 0a010203", "value": "04000000"}],
          "routes6": [{"key": "20000000 20010db8 00000000 00000000 00000000", "value": "01000000"}],
          "seen": [{"key": "20000000 0a000001", "value": "01000000"}]}}
