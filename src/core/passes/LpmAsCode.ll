; A small read-only LPM trie becomes a binary search over the address
; intervals its prefixes cut the address space into, each yielding the value
; of the longest prefix covering it; keys whose prefix length is not the
; table's maximum keep the real lookup. Routes: 0.0.0.0/0 (entry 0),
; 10.0.0.0/8 (1), 10.1.0.0/16 (2, stored with host bits set: the trie
; ignores them), 10.1.2.3/32 (3): seven intervals, bounds 10.0.0.0,
; 10.1.0.0, 10.1.2.3, 10.1.2.4, 10.2.0.0, 11.0.0.0.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-code | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=lpm-as-code --inline-limit 3 | FileCheck %s --check-prefix=LIMIT
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=constant-key-lookup,inline-small-table | FileCheck %s --check-prefix=OTHERS

; C: struct route_key { __u32 prefixlen; __u32 addr; } key = { ctx->len, iph->daddr };
;    route = bpf_map_lookup_elem(&routes, &key);
; CHECK-LABEL: define i32 @route(
; CHECK:         [[KEY:%routes.key.memory.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    [[LEN:%routes.prefixlen.*]] = load i32, ptr [[KEY]], align 4
; CHECK-NEXT:    [[AT:%.*]] = getelementptr inbounds i8, ptr [[KEY]], i32 4
; CHECK-NEXT:    [[DATA:%routes.data.*]] = load i32, ptr [[AT]], align 4
; CHECK-NEXT:    [[ADDR:%routes.address.*]] = call i32 @llvm.bswap.i32(i32 [[DATA]])
; CHECK-NEXT:    [[WHOLE:%.*]] = icmp eq i32 [[LEN]], 32
; CHECK-NEXT:    br i1 [[WHOLE]], label %routes.search, label %routes.other.prefixlen
; The middle bound first (10.1.2.3), then halves.
; CHECK:       routes.search:
; CHECK-NEXT:    icmp ult i32 [[ADDR]], 167838211
; CHECK:       routes.other.prefixlen:
; CHECK-NEXT:    [[KEPT:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key){{.*}}!morpheus.kept
; CHECK-DAG:     icmp ult i32 [[ADDR]], 167772160
; CHECK-DAG:     icmp ult i32 [[ADDR]], 167837696
; CHECK-DAG:     icmp ult i32 [[ADDR]], 167838212
; CHECK-DAG:     icmp ult i32 [[ADDR]], 167903232
; CHECK-DAG:     icmp ult i32 [[ADDR]], 184549376
; Each entry its own address; no null: the default route covers the rest.
; CHECK:         phi ptr [ @__morpheus.routes.values, %{{.*}} ], [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 8), %{{.*}} ], [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 16), %{{.*}} ], [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 24), %{{.*}} ], [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 16), %{{.*}} ], [ getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 8), %{{.*}} ], [ @__morpheus.routes.values, %{{.*}} ], [ [[KEPT]], %routes.other.prefixlen ]
; CHECK-NOT:     ptr @routes
;
; IPv6-sized data: one 128-bit address; outside 2001:db8::/32 nothing
; matches (no default route): null. The program stores the prefix length
; 128, a constant: every key has the whole width, so no test of it and no
; lookup kept.
; CHECK-LABEL: define i32 @route6(
; CHECK:         load i128, ptr {{.*}}, align 4
; CHECK:         [[ADDR6:%routes6.address.*]] = call i128 @llvm.bswap.i128(
; CHECK-NOT:     icmp eq i32 {{.*}}, 128
; CHECK:         icmp ult i128 [[ADDR6]], 42540766411282592856903984951653826560
; CHECK:         icmp ult i128 [[ADDR6]], 42540766490510755371168322545197776896
; CHECK:         phi ptr [ null, %{{.*}} ], [ @__morpheus.routes6.values, %{{.*}} ], [ null, %{{.*}} ]{{$}}
;
; A trie the data plane writes stays a lookup.
; CHECK-LABEL: define i32 @learn(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @seen
; CHECK: ; site {{[0-9]+}} seen analysis declined: table is written by the data plane
; CHECK: ; site 0 routes lpm-as-code applied: 4 prefixes as a search over 7 address intervals; other prefix lengths keep the lookup

; More prefixes than the limit: the lookup stays.
; LIMIT-LABEL: define i32 @route(
; LIMIT:         call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; LIMIT: ; site 0 routes lpm-as-code declined: more than 3 prefixes

; inline-small-table leaves LPM tries alone; constant-key-lookup answers a
; constant key as the trie does: the longest stored prefix no longer than
; the key's length containing its address (entries in key order, 8 bytes
; apart: 0/0, 10/8, 10.1/16, 10.1.2.3/32).
; OTHERS-LABEL: define i32 @route(
; OTHERS:         call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr {{.*}}%key)
; 10.2.2.0/24: no entry of that key, 10/8 contains it.
; OTHERS-LABEL: define i32 @constant_route(
; OTHERS-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr @routes
; OTHERS:         icmp ne ptr getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 8), null
; 10.1.2.3 asked at length 16: the /32 is longer than the key, 10.1/16 answers.
; OTHERS-LABEL: define i32 @constant_route_short(
; OTHERS:         load i32, ptr getelementptr inbounds (i8, ptr @__morpheus.routes.values, i64 16)
; A length beyond the address's 32 bits: the kernel matches nothing.
; OTHERS-LABEL: define i32 @constant_route_too_long(
; OTHERS:         icmp ne ptr null, null

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
define i32 @constant_route_short(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  store i32 16, ptr %key, align 4
  %addrp = getelementptr i8, ptr %key, i64 4
  store i32 50462986, ptr %addrp, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %out = load i32, ptr %v, align 4
  ret i32 %out
}

define i32 @constant_route_too_long(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  store i32 33, ptr %key, align 4
  %addrp = getelementptr i8, ptr %key, i64 4
  store i32 50462986, ptr %addrp, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

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
