; Lookup results and table operands through BPF-to-BPF calls (functions
; clang does not inline): a pointer out-parameter, a return, a parameter;
; and the map a bpf_for_each_map_elem callback is handed, which is the map
; of the call that runs it. Shapes as clang -O2 --target=bpf emits them for
; tests/programs/out_param.bpf.c and for_each_sweep.bpf.c, reduced:
;
; static __noinline int pick(struct backend **out, __u32 slot)
; { *out = bpf_map_lookup_elem(&backends, &slot); return *out != 0; }
; static __noinline int counter(__u64 **out)
; { __u32 zero = 0; *out = bpf_map_lookup_elem(&forwarded, &zero); return 0; }
; static __noinline __u32 *verdict_of(__u32 k) { return bpf_map_lookup_elem(&verdicts, &k); }
; static __noinline void bump(__u64 *c) { c[1] += 1; }
; static long expire(struct bpf_map *map, __u32 *key, void *value, void *ctx)
; { bpf_map_delete_elem(map, key); return 0; }
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --print-analysis | FileCheck %s
; RUN: morpheus-opt %t/elsewhere.ll --state %t/state.json --print-analysis \
; RUN:   | FileCheck %s --check-prefix=ELSEWHERE

; The out-parameter's loads in the caller only read through it.
; CHECK: table backends ro
; A callback's map parameter is the map of its calls alone: the sweep's
; delete does not touch the allow-list.
; CHECK: table config ro
; The caller writes through the pointer it loads back: written, the key of
; the callee's lookup.
; CHECK: table forwarded rw-in-part
; CHECK-NEXT: written: store (value of forwarded looked up) (bytes 0..7) (key 00 00 00 00)
; A static function writes through its parameter at offset 8.
; CHECK: table param rw-in-part
; CHECK-NEXT: written: store (value of param looked up) (bytes 8..15) (key 00 00 00 00)
; Returned by a static function, written by the caller.
; CHECK: table returned rw-in-part
; CHECK-NEXT: written: store (value of returned looked up) (bytes 0..3) (key 00 00 00 00)
; The sweep deletes through the map it is handed: only the maps it walks.
; CHECK: table sessions_a rw
; CHECK-NEXT: written: map_delete_elem in expire (through sessions_a or sessions_b)
; CHECK: table sessions_b rw
; CHECK-NEXT: written: map_delete_elem in expire (through sessions_a or sessions_b)
; CHECK: table single rw
; CHECK-NEXT: written: map_delete_elem in expire_one
; The slot escapes (its address goes to a function defined elsewhere),
; which may write through what it reads there.
; CHECK: table spilled rw-in-part
; CHECK-NEXT: written: pointer stored to memory
; Returned and only read.
; CHECK: table verdicts ro

; CHECK-DAG: site [[#]] map_delete_elem ? key=context merged=[sessions_a,sessions_b]
; CHECK-DAG: site [[#]] map_delete_elem single key=context

; A callback that is also called directly: its map parameter may be any
; pointer, so every map may be written.
; ELSEWHERE: table config rw
; ELSEWHERE-NEXT: written: unresolved table operand of map_delete_elem in expire_called

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@backends = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@forwarded = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@verdicts = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@returned = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@param = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@spilled = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@sessions_a = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@sessions_b = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@single = global { ptr, ptr } zeroinitializer, section ".maps", align 8

declare void @keep(ptr)
declare void @llvm.lifetime.start.p0(i64, ptr)
declare void @llvm.lifetime.end.p0(i64, ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define internal i32 @pick(ptr %out, i32 %slot) {
  %key = alloca i32, align 4
  store i32 %slot, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @backends, ptr %key)
  store ptr %v, ptr %out, align 8
  %again = load ptr, ptr %out, align 8
  %hit = icmp ne ptr %again, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define internal i32 @counter(ptr %out) {
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @forwarded, ptr %key)
  store ptr %v, ptr %out, align 8
  ret i32 0
}

define internal ptr @verdict_of(i32 %k) {
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @verdicts, ptr %key)
  ret ptr %v
}

define internal ptr @returned_of() {
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @returned, ptr %key)
  ret ptr %v
}

define internal void @bump(ptr %c) {
  %f = getelementptr i8, ptr %c, i64 8
  %x = load i64, ptr %f, align 8
  %y = add i64 %x, 1
  store i64 %y, ptr %f, align 8
  ret void
}

define internal i32 @spill(ptr %out) {
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @spilled, ptr %key)
  store ptr %v, ptr %out, align 8
  ret i32 0
}

define internal i64 @expire(ptr %map, ptr %key, ptr nocapture readonly %value, ptr %ctx) {
  %d = call i64 inttoptr (i64 3 to ptr)(ptr %map, ptr %key)
  ret i64 0
}

define internal i64 @expire_one(ptr %map, ptr %key, ptr nocapture readonly %value, ptr %ctx) {
  %d = call i64 inttoptr (i64 3 to ptr)(ptr %map, ptr %key)
  ret i64 0
}

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %backend = alloca ptr, align 8
  %count = alloca ptr, align 8
  %escaping = alloca ptr, align 8
  %mac = alloca [6 x i8], align 1
  %zero = alloca i32, align 4
  call void @llvm.lifetime.start.p0(i64 8, ptr %backend)
  store ptr null, ptr %backend, align 8
  %picked = call i32 @pick(ptr %backend, i32 3)
  %b = load ptr, ptr %backend, align 8
  call void @llvm.memcpy.p0.p0.i64(ptr %mac, ptr %b, i64 6, i1 false)
  call void @llvm.lifetime.end.p0(i64 8, ptr %backend)
  %counted = call i32 @counter(ptr %count)
  %c = load ptr, ptr %count, align 8
  %n = load i64, ptr %c, align 8
  %n1 = add i64 %n, 1
  store i64 %n1, ptr %c, align 8
  %v = call ptr @verdict_of(i32 1)
  %verdict = load i32, ptr %v, align 4
  %r = call ptr @returned_of()
  store i32 7, ptr %r, align 4
  store i32 0, ptr %zero, align 4
  %p = call ptr inttoptr (i64 1 to ptr)(ptr @param, ptr %zero)
  call void @bump(ptr %p)
  %s = call i32 @spill(ptr %escaping)
  call void @keep(ptr %escaping)
  %o = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
  %w1 = call i64 inttoptr (i64 164 to ptr)(ptr @sessions_a, ptr @expire, ptr null, i64 0)
  %w2 = call i64 inttoptr (i64 164 to ptr)(ptr @sessions_b, ptr @expire, ptr null, i64 0)
  %w3 = call i64 inttoptr (i64 164 to ptr)(ptr @single, ptr @expire_one, ptr null, i64 0)
  ret i32 %verdict
}

;--- elsewhere.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@sessions_a = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define internal i64 @expire_called(ptr %map, ptr %key, ptr nocapture readonly %value, ptr %ctx) {
  %d = call i64 inttoptr (i64 3 to ptr)(ptr %map, ptr %key)
  ret i64 0
}

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %zero = alloca i32, align 4
  store i32 0, ptr %zero, align 4
  %o = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
  %w = call i64 inttoptr (i64 164 to ptr)(ptr @sessions_a, ptr @expire_called, ptr null, i64 0)
  %d = call i64 @expire_called(ptr %zero, ptr %zero, ptr null, ptr null)
  ret i32 2
}

;--- state.json
{"tables": {"backends": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 8},
            "forwarded": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "verdicts": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 4},
            "returned": {"type": "array", "key_size": 4, "value_size": 4, "max_entries": 4},
            "param": {"type": "array", "key_size": 4, "value_size": 16, "max_entries": 1},
            "spilled": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "config": {"type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
            "sessions_a": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 8},
            "sessions_b": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 8},
            "single": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 8}}}
