; A read-only hash whose keys, read as the integers the program's loads
; give, span a small range becomes a direct index: the key less the range's
; first, checked below the range's size, picks a 16-bit slot naming the
; entry (i + 1) or none (0). ports: 16-bit keys 0x0050, 0x01bb, 0x1f90 in
; memory order (little-endian integers 0x5000, 0xbb01, 0x901f: 27,394 keys
; from 20,480); vlans: 32-bit keys 100 and 4,000; macs: 6-byte keys.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=hash-as-array | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/wide.json -passes=hash-as-array | FileCheck %s --check-prefix=WIDE
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=hash-as-array --cost-model %t/cheap-hash.json | FileCheck %s --check-prefix=MAP

; CHECK: @__morpheus.ports.index = private constant [27394 x i16] [i16 1, i16 0,
; CHECK-SAME: i16 2], align 8
; CHECK: @__morpheus.vlans.index = private constant [3901 x i16] [i16 1,

; C: __u16 port = udp->dest; action = bpf_map_lookup_elem(&ports, &port);
; CHECK-LABEL: define i32 @by_port(
; CHECK:         [[KEY:%ports.key.memory.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    %ports.key = load i16, ptr [[KEY]], align 2
; CHECK-NEXT:    [[ZEXT:%.*]] = zext i16 %ports.key to i64
; CHECK-NEXT:    [[LESS:%.*]] = sub i64 [[ZEXT]], 20480
; The offset is checked below the range's size on an opaque copy (the
; verifier's bound, and the keys outside the range: none).
; CHECK-NEXT:    [[OFF:%ports.offset.*]] = call i64 asm "", "=r,0"(i64 [[LESS]])
; CHECK-NEXT:    [[IN:%.*]] = icmp ult i64 [[OFF]], 27394
; CHECK-NEXT:    br i1 [[IN]], label %ports.in.range, label %ports.miss
; CHECK:       ports.in.range:
; CHECK-NEXT:    [[AT:%.*]] = getelementptr inbounds i16, ptr @__morpheus.ports.index, i64 [[OFF]]
; CHECK-NEXT:    [[SLOT:%ports.slot.*]] = load i16, ptr [[AT]]
; CHECK-NEXT:    [[NONE:%.*]] = icmp eq i16 [[SLOT]], 0
; CHECK-NEXT:    br i1 [[NONE]], label %ports.miss, label %ports.hit
; CHECK:       ports.hit:
; CHECK:         sub i64 {{.*}}, 1
; CHECK-NEXT:    [[NUM:%ports.entry.number.*]] = call i64 asm "", "=r,0"(i64
; CHECK-NEXT:    [[KNOWN:%.*]] = icmp ult i64 [[NUM]], 3
; CHECK-NEXT:    br i1 [[KNOWN]], label %ports.found, label %ports.miss
; CHECK:       ports.found:
; CHECK-NEXT:    [[BYTES:%.*]] = mul i64 [[NUM]], 8
; CHECK-NEXT:    [[ENTRY:%ports.entry.*]] = getelementptr inbounds i8, ptr @__morpheus.ports.values, i64 [[BYTES]]
; CHECK:         phi ptr [ [[ENTRY]], %ports.found ], [ null, %ports.miss ]
; CHECK-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr @ports,
; A 32-bit key: one load, the range from 100.
; CHECK-LABEL: define i32 @by_vlan(
; CHECK:         load i32, ptr %vlans.key.memory
; CHECK:         sub i64 {{.*}}, 100
; CHECK:         icmp ult i64 {{.*}}, 3901
; CHECK-NOT:     call ptr inttoptr (i64 1 to ptr)(ptr @vlans,
; CHECK-LABEL: define i32 @by_mac(
; CHECK:         call ptr inttoptr (i64 1 to ptr)(ptr @macs
; CHECK: ; site 0 ports hash-as-array applied: 3 entries as a direct index over 27394 keys from 20480 (54788 bytes); other keys find none; predicted direct index {{.*}} ns, map 29.0 ns (chosen: direct index; default costs)
; CHECK: ; site 1 vlans hash-as-array applied: 2 entries as a direct index over 3901 keys from 100 (7802 bytes)
; CHECK: ; site 2 macs hash-as-array declined: a key of 6 bytes (1, 2, 4 or 8 are indexed)

; Keys spanning more than 65,536 integers keep the lookup.
; WIDE-NOT: @__morpheus.vlans.index
; WIDE: ; site 1 vlans hash-as-array declined: keys spanning 16777117 integers (at most 65536 are indexed)

; Within the inline limit inline-small-table's chain of constants goes
; first; where the verifier budget makes it an index chain (which folds
; nothing), the model weighs it against the direct index: 40 ports in one
; range of 40 keys (80 bytes) are one load against 20.5 compares.
; RUN: morpheus-opt %t/prog.ll --state %t/index.json -passes=inline-small-table,hash-as-array --verifier-paths 1 | FileCheck %s --check-prefix=INDEX
; RUN: morpheus-opt %t/prog.ll --state %t/index.json -passes=inline-small-table,hash-as-array | FileCheck %s --check-prefix=CHAIN
; INDEX: @__morpheus.ports.index = private constant [40 x i16]
; INDEX: ; site 0 ports inline-small-table declined: a chain yielding an index (verifier budget) folds no value and the cost model prefers the direct index; predicted direct index {{.*}}, compare chain {{.*}} (chosen: direct index; default costs)
; INDEX: ; site 0 ports hash-as-array applied: 40 entries as a direct index over 40 keys from 1000 (80 bytes)
; CHAIN-NOT: @__morpheus.ports.index
; CHAIN: ; site 0 ports inline-small-table applied: 40 entries inlined as compares

; A hash lookup the calibration finds cheap keeps the map: the array's
; 54 KiB would save under what its memory asks.
; MAP-NOT: @__morpheus.ports.index
; MAP: ; site 0 ports hash-as-array declined: the cost model prefers the map; predicted {{.*}}(chosen: map; calibrated costs; the direct index's 54 KiB save {{.*}} ns over the map, under the 3.3 ns its memory asks)

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@ports = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@vlans = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@macs = global { ptr, ptr } zeroinitializer, section ".maps", align 8

; C: __u16 port = udp->dest; action = bpf_map_lookup_elem(&ports, &port);
define i32 @by_port(ptr %ctx) section "xdp" {
entry:
  %key = alloca i16, align 2
  %port = load i16, ptr %ctx, align 2
  store i16 %port, ptr %key, align 2
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @ports, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 1
}

; C: __u32 vlan = ctx->vlan; cfg = bpf_map_lookup_elem(&vlans, &vlan);
define i32 @by_vlan(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %vlanp = getelementptr i8, ptr %ctx, i64 4
  %vlan = load i32, ptr %vlanp, align 4
  store i32 %vlan, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @vlans, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

; C: __u8 mac[6] = eth->h_dest; port = bpf_map_lookup_elem(&macs, mac);
define i32 @by_mac(ptr %ctx) section "xdp" {
entry:
  %key = alloca [6 x i8], align 2
  call void @llvm.memcpy.p0.p0.i64(ptr align 2 %key, ptr align 2 %ctx, i64 6, i1 false)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @macs, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

declare void @llvm.memcpy.p0.p0.i64(ptr noalias nocapture writeonly, ptr noalias nocapture readonly, i64, i1 immarg)
;--- state.json
{"tables": {"ports": {"type": "hash", "key_size": 2, "value_size": 4, "max_entries": 1024},
            "vlans": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 1024},
            "macs": {"type": "hash", "key_size": 6, "value_size": 4, "max_entries": 1024}},
 "maps": {"ports": [{"key": "0050", "value": "01000000"},
                    {"key": "01bb", "value": "02000000"},
                    {"key": "1f90", "value": "03000000"}],
          "vlans": [{"key": "64000000", "value": "0a000000"},
                    {"key": "a00f0000", "value": "0b000000"}],
          "macs": [{"key": "020000000001", "value": "01000000"}]}}
;--- wide.json
{"tables": {"ports": {"type": "hash", "key_size": 2, "value_size": 4, "max_entries": 1024},
            "vlans": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 1024},
            "macs": {"type": "hash", "key_size": 6, "value_size": 4, "max_entries": 1024}},
 "maps": {"ports": [{"key": "0050", "value": "01000000"}],
          "vlans": [{"key": "64000000", "value": "0a000000"},
                    {"key": "00000001", "value": "0b000000"}],
          "macs": []}}
;--- cheap-hash.json
{"format": 3, "source": "test: cheap hash", "hash_lookup_ns": 5,
 "lpm_lookup_ns": [[2, 22], [4096, 44]], "array_lookup_ns": 0.6, "compare_ns": [[64, 0.4]],
 "search_level_ns": [[4, 3]], "derived_load_ns": [[4096, 1]], "helper_call_ns": 8}
;--- index.json
{"tables": {"ports": {"type": "hash", "key_size": 2, "value_size": 4, "max_entries": 1024}, "vlans": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 1024}, "macs": {"type": "hash", "key_size": 6, "value_size": 4, "max_entries": 1024}}, "maps": {"ports": [{"key": "e803", "value": "01000000"}, {"key": "e903", "value": "02000000"}, {"key": "ea03", "value": "03000000"}, {"key": "eb03", "value": "04000000"}, {"key": "ec03", "value": "05000000"}, {"key": "ed03", "value": "06000000"}, {"key": "ee03", "value": "07000000"}, {"key": "ef03", "value": "08000000"}, {"key": "f003", "value": "09000000"}, {"key": "f103", "value": "0a000000"}, {"key": "f203", "value": "0b000000"}, {"key": "f303", "value": "0c000000"}, {"key": "f403", "value": "0d000000"}, {"key": "f503", "value": "0e000000"}, {"key": "f603", "value": "0f000000"}, {"key": "f703", "value": "10000000"}, {"key": "f803", "value": "11000000"}, {"key": "f903", "value": "12000000"}, {"key": "fa03", "value": "13000000"}, {"key": "fb03", "value": "14000000"}, {"key": "fc03", "value": "15000000"}, {"key": "fd03", "value": "16000000"}, {"key": "fe03", "value": "17000000"}, {"key": "ff03", "value": "18000000"}, {"key": "0004", "value": "19000000"}, {"key": "0104", "value": "1a000000"}, {"key": "0204", "value": "1b000000"}, {"key": "0304", "value": "1c000000"}, {"key": "0404", "value": "1d000000"}, {"key": "0504", "value": "1e000000"}, {"key": "0604", "value": "1f000000"}, {"key": "0704", "value": "20000000"}, {"key": "0804", "value": "21000000"}, {"key": "0904", "value": "22000000"}, {"key": "0a04", "value": "23000000"}, {"key": "0b04", "value": "24000000"}, {"key": "0c04", "value": "25000000"}, {"key": "0d04", "value": "26000000"}, {"key": "0e04", "value": "27000000"}, {"key": "0f04", "value": "28000000"}], "vlans": [], "macs": []}}
