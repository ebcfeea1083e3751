; Redirect maps (backend/bpf/MapTypes.cpp). A devmap or devmap_hash lookup
; returns the entry's struct bpf_devmap_val, read-only to programs, but the
; kernel removes an entry when its device is unregistered, unseen by the
; guard: no pass may answer a lookup as a hit (constant-key-lookup and
; inline-small-table decline, saying so), while the passes that keep the
; lookup wherever the snapshot holds the key apply: fold-read-only-fields
; folds the value read through a constant key's result, key-set-filter
; answers the keys the map does not hold with null. An xskmap lookup
; returns a socket, not bytes: not modelled, and said why.
;
; C (tests/programs/devmap_ports.bpf.c, reduced):
;   __u32 zero = 0, host = ...;
;   struct bpf_devmap_val *up = bpf_map_lookup_elem(&uplinks, &zero);
;   if (up && up->ifindex == 1) return XDP_TX;
;   if (bpf_map_lookup_elem(&neighbours, &host)) return bpf_redirect_map(&neighbours, host, 0);
;   if (bpf_map_lookup_elem(&sockets, &zero)) return bpf_redirect_map(&sockets, 0, 0);
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json \
; RUN:   -passes=constant-key-lookup,inline-small-table,fold-read-only-fields,key-set-filter \
; RUN:   | FileCheck %s
; Without them, nothing answers a devmap lookup, and the log says why.
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=constant-key-lookup,inline-small-table \
; RUN:   | FileCheck %s --check-prefix=HIT

; HIT: call ptr inttoptr (i64 1 to ptr)(ptr @uplinks
; HIT: call ptr inttoptr (i64 1 to ptr)(ptr @neighbours
; HIT: ; site 1 neighbours analysis declined: the kernel removes a devmap_hash entry when its device is unregistered, which no guard sees: only the keys it does not hold may be answered without the lookup

; CHECK-LABEL: define i32 @prog(
; The uplink's lookup stays, its ifindex is folded: the compare is gone.
; CHECK: [[UP:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @uplinks
; CHECK-NOT: load i32, ptr [[UP]]
; A host the map does not hold skips the lookup; one it holds asks.
; CHECK: neighbours.lookup:
; CHECK-NEXT: call ptr inttoptr (i64 1 to ptr)(ptr @neighbours
; The socket map's lookup is left as it is.
; CHECK: call ptr inttoptr (i64 1 to ptr)(ptr @sockets

; CHECK-DAG: ; site 0 uplinks fold-read-only-fields applied: 1 load of read-only bytes folded; the lookup stays because the kernel removes a devmap entry when its device is unregistered: it says whether the entry is still there
; CHECK-DAG: ; site 1 neighbours key-set-filter applied: a key that is none of the table's 2 keys is answered null without the lookup (the kernel removes a devmap_hash entry when its device is unregistered, but no key is added without the guard)
; CHECK-DAG: ; site 3 sockets analysis declined: a lookup returns the AF_XDP socket bound to the slot (struct bpf_xdp_sock), not bytes user space wrote

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@uplinks = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@neighbours = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8
@sockets = global { ptr, ptr, ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %zero = alloca i32, align 4
  %host = alloca i32, align 4
  store i32 0, ptr %zero, align 4
  %up = call ptr inttoptr (i64 1 to ptr)(ptr @uplinks, ptr %zero)
  %hasup = icmp ne ptr %up, null
  br i1 %hasup, label %uplink, label %neighbour
uplink:
  %ifindex = load i32, ptr %up, align 4
  %lo = icmp eq i32 %ifindex, 1
  br i1 %lo, label %tx, label %neighbour
tx:
  ret i32 3
neighbour:
  %addr = load i32, ptr %ctx, align 4
  store i32 %addr, ptr %host, align 4
  %n = call ptr inttoptr (i64 1 to ptr)(ptr @neighbours, ptr %host)
  %known = icmp ne ptr %n, null
  br i1 %known, label %redirect, label %socket
redirect:
  %to = load i32, ptr %host, align 4
  %to64 = zext i32 %to to i64
  %r = call i64 inttoptr (i64 51 to ptr)(ptr @neighbours, i64 %to64, i64 0)
  %r32 = trunc i64 %r to i32
  ret i32 %r32
socket:
  %s = call ptr inttoptr (i64 1 to ptr)(ptr @sockets, ptr %zero)
  %bound = icmp ne ptr %s, null
  br i1 %bound, label %xsk, label %pass
xsk:
  %x = call i64 inttoptr (i64 51 to ptr)(ptr @sockets, i64 0, i64 0)
  %x32 = trunc i64 %x to i32
  ret i32 %x32
pass:
  ret i32 2
}

;--- state.json
{"tables": {"uplinks": {"type": "devmap", "key_size": 4, "value_size": 8, "max_entries": 4},
            "neighbours": {"type": "devmap_hash", "key_size": 4, "value_size": 8, "max_entries": 8},
            "sockets": {"type": "xskmap", "key_size": 4, "value_size": 4, "max_entries": 4}},
 "maps": {"uplinks": [{"key": "00000000", "value": "01000000 00000000"}],
          "neighbours": [{"key": "0a000005", "value": "02000000 00000000"},
                         {"key": "0a000009", "value": "03000000 00000000"}]}}
