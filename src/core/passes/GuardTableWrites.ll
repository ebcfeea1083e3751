; Tables the data plane writes (an L2 switch's MAC table): every write is
; counted, after it, in the counter of the written key's bucket (update and
; delete by their key argument, writes through a lookup's value by that
; lookup's key, read right after the lookup and hashed at the write); a
; lookup nothing is written through gets the hot keys' fast path, each hot
; key answered only while its bucket still holds the count read before the
; snapshot. Tables whose writes cannot all be tied to a key (a value
; pointer merged with another) and LRU tables (inserts evict behind the
; program's back) get neither.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=guard-table-writes,heavy-hitter-fast-path --write-guards | FileCheck %s
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=guard-table-writes,heavy-hitter-fast-path | FileCheck %s --check-prefix=OFF
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=guard-table-writes,instrument-table-sites --write-guards --profile | FileCheck %s --check-prefix=PROFILED
; RUN: morpheus-opt %t/prog.ll --state %t/state.json -passes=guard-table-writes,heavy-hitter-fast-path --write-guards --verifier-paths 1 | FileCheck %s --check-prefix=BUDGET

; The learning lookup: its key read right after the lookup, the bucket
; hashed from those words where each store through its value is, then
; counted; none of it on the path that stores nothing. The insert of a new
; MAC counted after the call, from the key read before it.
; No fast path: the stores must reach the real entry.
; CHECK-LABEL: define void @learn(
; CHECK:         %entry = call ptr inttoptr (i64 1 to ptr)(ptr @fdb, ptr {{.*}}%key)
; CHECK-NEXT:    [[KEY:%fdb.written.key.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    load i{{[0-9]+}}, ptr [[KEY]]
; CHECK-NOT:     mul i64
; CHECK-NOT:     !morpheus.kept
; CHECK:         store i32 %ifindex, ptr %entry
; CHECK-NOT:     store
; CHECK:         mul i64
; CHECK-NEXT:    [[SHIFTED:%.*]] = lshr i64
; CHECK-NEXT:    [[BUCKET:%fdb.written.bucket.*]] = trunc i64 [[SHIFTED]] to i32
; CHECK-NEXT:    call void @morpheus_write_bump(i32 [[BUCKET]])
; CHECK:         store i64 %now, ptr %stamp
; CHECK-NOT:     store
; CHECK:         [[STAMPED:%fdb.written.bucket.*]] = trunc i64 {{.*}} to i32
; CHECK-NEXT:    call void @morpheus_write_bump(i32 [[STAMPED]])
; CHECK:         [[FRESH:%fdb.written.key.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    load i{{[0-9]+}}, ptr [[FRESH]]
; CHECK-NOT:     mul i64
; CHECK:         call i64 inttoptr (i64 2 to ptr)(ptr @fdb, ptr {{.*}}%key, ptr {{.*}}%fresh, i64 1)
; CHECK-NOT:     call
; CHECK:         [[NEW:%fdb.written.bucket.*]] = trunc i64 {{.*}} to i32
; CHECK-NEXT:    call void @morpheus_write_bump(i32 [[NEW]])

; The forwarding lookup: hot key 02..01 (bucket 2672, count 5) and 02..02
; (bucket 3193, count 0) compared, each then checked against its count;
; 02..03 (its bucket not read) left to the lookup; 02..04, which the table
; does not hold (an unknown MAC; the table was read whole), answered null
; while its bucket (2151) holds 9: inserting it would be a counted write.
; CHECK-LABEL: define i32 @forward(
; CHECK:         icmp eq i64 {{.*}}, 2815849278734338
; CHECK:       fdb.matched:
; CHECK-NEXT:    [[C1:%fdb.writes.*]] = call i64 @morpheus_write_count(i32 2672)
; CHECK-NEXT:    [[OK1:%fdb.unwritten.*]] = icmp eq i64 [[C1]], 5
; CHECK-NEXT:    br i1 [[OK1]], label %fdb.hit, label %fdb.next
; CHECK:         icmp eq i64 {{.*}}, 2816948790362114
; CHECK:         call i64 @morpheus_write_count(i32 3193)
; CHECK-NEXT:    icmp eq i64 {{.*}}, 0
; CHECK-NOT:     2818048301989890
; CHECK:         icmp eq i64 {{.*}}, 2819147813617666
; CHECK:       fdb.absent:
; CHECK-NEXT:    call i64 @morpheus_write_count(i32 2151)
; CHECK-NEXT:    icmp eq i64 {{.*}}, 9
; CHECK:         [[ASKED:%.*]] = call ptr inttoptr (i64 1 to ptr)(ptr @fdb, ptr {{.*}}%key){{.*}}!morpheus.kept
; CHECK:         %fdb.absent.value = phi ptr [ null, %fdb.absent ], [ [[ASKED]], %fdb.absent.ask ]

; A delete is counted after the call, from the key read before it.
; CHECK-LABEL: define i64 @forget(
; CHECK:         [[GONEKEY:%fdb.written.key.*]] = call ptr asm "", "=r,0"(ptr %key)
; CHECK-NEXT:    load i{{[0-9]+}}, ptr [[GONEKEY]]
; CHECK:         call i64 inttoptr (i64 3 to ptr)(ptr @fdb, ptr {{.*}}%key)
; CHECK-NOT:     call
; CHECK:         [[GONE:%fdb.written.bucket.*]] = trunc i64 {{.*}} to i32
; CHECK-NEXT:    call void @morpheus_write_bump(i32 [[GONE]])

; LRU: written, never counted, never fast-pathed.
; CHECK-LABEL: define i32 @lru_read(
; CHECK-NOT:     morpheus_write
; CHECK-NOT:     key.memory
; CHECK-LABEL: define void @lru_write(
; CHECK-NOT:     morpheus_write_bump

; A value pointer merged from two lookups: the written key is not known.
; CHECK-LABEL: define void @merged(
; CHECK-NOT:     morpheus_write_bump
; CHECK-LABEL: define i32 @merged_read(
; CHECK-NOT:     key.memory

; Why the others got nothing, as explain says it.
; CHECK: ; site 0 fdb analysis declined: the program writes through this lookup's value: a fast path may skip the search, never the memory
; CHECK: ; site 4 lru analysis declined: table is written by the data plane, lru_hash table: an insert may evict any entry, hot ones included, without a write naming its key
; CHECK: ; site 8 moved analysis declined: table is written by the data plane, written where the key is not known: store (value of moved looked up)
; CHECK: ; site 0 fdb guard-table-writes applied: 2 write(s) of fdb counted in the written key's bucket
; CHECK: ; site 1 fdb guard-table-writes applied: 1 write(s) of fdb counted in the written key's bucket
; CHECK: ; site 3 fdb guard-table-writes applied: 1 write(s) of fdb counted in the written key's bucket
; CHECK: ; site 2 fdb heavy-hitter-fast-path applied: 2 hot keys compared before the lookup, 1 absent ones answered null, each under its write count
; CHECK-NOT: site {{[4-9]}} {{.*}} applied

; Without write guards nothing is counted and written tables get no fast path.
; OFF-NOT: morpheus_write
; OFF-NOT: applied

; A verifier budget of 1 path per entry: the hot keys answered with a
; value go (each is a state of its own), the absent one answered null
; stays (the null joins the lookup's own once checked: no path added).
; BUDGET-LABEL: define i32 @forward(
; BUDGET-NOT:     icmp eq i64 {{.*}}, 2815849278734338
; BUDGET:         icmp eq i64 {{.*}}, 2819147813617666
; BUDGET:       fdb.absent:
; BUDGET: ; site 2 fdb heavy-hitter-fast-path applied: 1 absent ones answered null, each under its write count

; The forwarding lookup's keys are sampled (it may get a fast path); the
; learning lookup's are not (it may not).
; PROFILED-LABEL: define void @learn(
; PROFILED-NOT:     morpheus_profile_slot
; PROFILED-LABEL: define i32 @forward(
; PROFILED:         call ptr @morpheus_profile_slot(i32 2)
; PROFILED-LABEL: define i32 @lru_read(
; PROFILED-NOT:     morpheus_profile_slot
; PROFILED-LABEL: define i32 @merged_read(
; PROFILED-NOT:     morpheus_profile_slot
; PROFILED:       declare ptr @morpheus_profile_slot(i32)

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@fdb = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@lru = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@moved = global { ptr, ptr } zeroinitializer, section ".maps", align 8

; C: struct fdb_key { u8 mac[6]; u16 vlan; } key = {...};
;    struct fdb_entry { u32 ifindex; u32 flags; u64 last_seen; } *entry, fresh = {...};
;    entry = bpf_map_lookup_elem(&fdb, &key);
;    if (entry) { entry->ifindex = ifindex; entry->last_seen = now; return; }
;    bpf_map_update_elem(&fdb, &key, &fresh, BPF_NOEXIST);
define void @learn(ptr %ctx, i32 %ifindex, i64 %now) {
start:
  %key = alloca i64, align 2
  %fresh = alloca [16 x i8], align 8
  %mac = load i64, ptr %ctx, align 2
  store i64 %mac, ptr %key, align 2
  %entry = call ptr inttoptr (i64 1 to ptr)(ptr @fdb, ptr %key)
  %known = icmp ne ptr %entry, null
  br i1 %known, label %refresh, label %insert
refresh:
  store i32 %ifindex, ptr %entry, align 4
  %stamp = getelementptr i8, ptr %entry, i64 8
  store i64 %now, ptr %stamp, align 8
  ret void
insert:
  store i32 %ifindex, ptr %fresh, align 8
  %r = call i64 inttoptr (i64 2 to ptr)(ptr @fdb, ptr %key, ptr %fresh, i64 1)
  ret void
}

; C: entry = bpf_map_lookup_elem(&fdb, &dst); return entry ? entry->ifindex : 0;
define i32 @forward(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  %mac = load i64, ptr %ctx, align 8
  store i64 %mac, ptr %key, align 8
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @fdb, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 0
}

; C: return bpf_map_delete_elem(&fdb, &key);
define i64 @forget(ptr %ctx) {
entry:
  %key = alloca i64, align 8
  %mac = load i64, ptr %ctx, align 8
  store i64 %mac, ptr %key, align 8
  %r = call i64 inttoptr (i64 3 to ptr)(ptr @fdb, ptr %key)
  ret i64 %r
}

; C: v = bpf_map_lookup_elem(&lru, &key); return v ? *v : 0;
define i32 @lru_read(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @lru, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 0
}

; C: bpf_map_update_elem(&lru, &key, &value, BPF_ANY);
define void @lru_write(ptr %ctx) {
entry:
  %key = alloca i32, align 4
  %value = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  store i32 1, ptr %value, align 4
  %r = call i64 inttoptr (i64 2 to ptr)(ptr @lru, ptr %key, ptr %value, i64 0)
  ret void
}

; C: v = lookup(&moved, &a); if (!v) v = lookup(&moved, &b); if (v) *v = 1;
define void @merged(ptr %ctx) {
entry:
  %a = alloca i32, align 4
  %b = alloca i32, align 4
  store i32 1, ptr %a, align 4
  store i32 2, ptr %b, align 4
  %first = call ptr inttoptr (i64 1 to ptr)(ptr @moved, ptr %a)
  %none = icmp eq ptr %first, null
  br i1 %none, label %second, label %join
second:
  %other = call ptr inttoptr (i64 1 to ptr)(ptr @moved, ptr %b)
  br label %join
join:
  %v = phi ptr [ %first, %entry ], [ %other, %second ]
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %write, label %done
write:
  store i32 1, ptr %v, align 4
  br label %done
done:
  ret void
}

define i32 @merged_read(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @moved, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 0
}

;--- state.json
{"tables": {"fdb": {"type": "hash", "key_size": 8, "value_size": 16, "max_entries": 1024},
            "lru": {"type": "lru_hash", "key_size": 4, "value_size": 4, "max_entries": 1024},
            "moved": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 1024}},
 "maps": {"fdb": [{"key": "020000000001 0a00", "value": "03000000 00000000 0000000000000000"},
                  {"key": "020000000002 0a00", "value": "04000000 00000000 0000000000000000"},
                  {"key": "020000000003 0a00", "value": "05000000 00000000 0000000000000000"}],
          "lru": [{"key": "01000000", "value": "01000000"}],
          "moved": [{"key": "01000000", "value": "01000000"}]},
 "probed_maps": ["lru", "moved"],
 "hot_keys": {"0": ["020000000001 0a00"],
              "2": ["020000000001 0a00", "020000000002 0a00", "020000000003 0a00", "020000000004 0a00"],
              "4": ["01000000"],
              "7": ["01000000"]},
 "write_counts": {"2672": 5, "3193": 0, "2151": 9}}
