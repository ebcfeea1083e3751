; Which tables the data plane writes, and what keys are made of.
;
; RUN: split-file %s %t
; RUN: morpheus-opt %t/prog.ll --state %t/state.json --print-analysis | FileCheck %s

; Only read through the lookup result (loads, compares, copy source).
; CHECK: table config ro
; Written by an update helper.
; CHECK: table conntrack rw
; CHECK-NEXT:  written: map_update_elem in update_conntrack
; Its value pointer goes through an opaque copy (the key copy a rewritten
; lookup reads, when the key lies in this value): still only read...
; CHECK: table copied ro
; ...and a store through the copy is a write at its offset.
; CHECK: table copiedwritten rw
; CHECK-NEXT:  written: store (value of copiedwritten looked up) (bytes 4..7)
; Written through the lookup result at a non-zero offset.
; CHECK: table counters rw
; CHECK-NEXT:  written: store (value of counters looked up)
; Deleted from.
; CHECK: table deleted rw
; CHECK: table flows ro
; Written with an atomic add.
; CHECK: table hits rw
; CHECK-NEXT:  written: atomic update (value of hits
; The lookup result escapes to memory: anything may write through it later.
; CHECK: table leaked rw
; CHECK-NEXT:  written: pointer stored to memory
; Cleared with memset.
; CHECK: table memset rw
; CHECK-NEXT:  written: memory intrinsic writes
; The table itself is handed to a function the analysis cannot see into.
; CHECK: table passed rw
; CHECK-NEXT:  written: table used outside a recognised access
; The value pointer goes to a function that may write through it.
; CHECK: table scribbled rw
; CHECK-NEXT:  written: passed to a call that may write
; An integer-typed lookup result tested against zero: only a null test.
; CHECK: table tested ro
; CHECK-NOT:   compared:
; Read-only, but its value goes to a global function (site below).
; CHECK: table verdicts ro
; Value pointers compared with each other: identity matters.
; CHECK: table zones ro
; CHECK-NEXT:  compared: compared with another pointer (value of zones looked up)

; CHECK: site 0 map_lookup_elem config key=constant constant=00 00 00 00
; CHECK: site 1 map_lookup_elem config key=packet{{$}}
; Two stores build the key: a zeroing i64, then an i16 over bytes 4-5.
; CHECK: site 2 map_lookup_elem flows key=constant constant=00 00 00 00 50 00 00 00
; CHECK: site 3 map_update_elem conntrack key=packet
; CHECK: site 12 map_lookup_elem verdicts key=constant writable-needed="value passed to global function 'decide'"
; A static function does not need it: the verifier sees its caller's types.
; CHECK: site 13 map_lookup_elem verdicts key=constant{{$}}

; Keys with padding (C: struct { u8 proto; u32 addr; }, 8 bytes): bytes a
; path to the lookup never writes hold the stack's stale bytes.
; Filled field by field: bytes 1..3 are never written.
; CHECK: site [[#]] map_lookup_elem padded key={{[a-z+]+}} unwritten="key bytes 1..3 are never written: the kernel compares the stack's stale bytes, which no rewrite can reproduce"
; Zeroed first (= {}), then filled: every byte written.
; CHECK-NEXT: site [[#]] map_lookup_elem padded key={{[a-z+]+}}{{$}}
; Zeroed on one path only: the other leaves the padding.
; CHECK-NEXT: site [[#]] map_lookup_elem padded key={{[a-z+]+}} unwritten="key bytes 1..3 are never written
; The slot's lifetime starts after an earlier write: that write is gone.
; CHECK-NEXT: site [[#]] map_lookup_elem padded key={{[a-z+]+}} unwritten="key bytes 1..3 are never written
; Handed to a function that may write any of it: possibly unwritten.
; CHECK-NEXT: site [[#]] map_lookup_elem padded key={{[a-z+]+}} unwritten="key bytes 0..7 may be left unwritten (written by a call given its address):
; The key is the caller's memory, which the analysis does not follow.
; CHECK-NEXT: site [[#]] map_lookup_elem padded key={{[a-z+]+}} unwritten="key bytes 0..7 may be left unwritten (the key is the caller's memory, which the analysis does not follow):
; A global's bytes are initialised: no stale bytes (not a proven constant
; either: its loader may set them).
; CHECK-NEXT: site [[#]] map_lookup_elem padded key=constant unproven="the key is the global 'padded_global_key', whose bytes its loader may set before load"{{$}}
; Copied whole from another stack struct filled field by field: the copy
; brings that struct's stale padding, the walk finds it there.
; CHECK-NEXT: site [[#]] map_lookup_elem padded key={{[a-z+]+}} unwritten="key bytes 1..3 are never written:
; Copied from the packet: every byte written.
; CHECK-NEXT: site [[#]] map_lookup_elem padded key={{[a-z+]+}}{{$}}

;--- prog.ll
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@padded = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@flows = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@conntrack = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@counters = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@deleted = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@hits = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@leaked = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@memset = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@passed = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@scribbled = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@tested = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@verdicts = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@zones = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@copied = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@copiedwritten = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@slot = global ptr null

declare void @opaque(ptr)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define i32 @read_config(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %copy = alloca [8 x i8], align 4
  store i32 0, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %null = icmp eq ptr %v, null
  br i1 %null, label %out, label %use
use:
  call void @llvm.memcpy.p0.p0.i64(ptr %copy, ptr %v, i64 8, i1 false)
  %f = getelementptr i8, ptr %v, i64 4
  %x = load i32, ptr %f, align 4
  ret i32 %x
out:
  ret i32 0
}

; Key bytes from the packet: data pointer loaded from the context.
define i32 @packet_key(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %data32 = load i32, ptr %ctx, align 4
  %data64 = zext i32 %data32 to i64
  %data = inttoptr i64 %data64 to ptr
  %daddr = load i32, ptr %data, align 4
  store i32 %daddr, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define i32 @struct_key(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  store i64 0, ptr %key, align 8
  %port = getelementptr i8, ptr %key, i64 4
  store i16 80, ptr %port, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define i32 @update_conntrack(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %value = alloca i32, align 4
  %data32 = load i32, ptr %ctx, align 4
  %data64 = zext i32 %data32 to i64
  %data = inttoptr i64 %data64 to ptr
  %saddr = load i32, ptr %data, align 4
  store i32 %saddr, ptr %key, align 4
  store i32 1, ptr %value, align 4
  %r = call i64 inttoptr (i64 2 to ptr)(ptr @conntrack, ptr %key, ptr %value, i64 0)
  ret i32 2
}

define i32 @writers(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %c = call ptr inttoptr (i64 1 to ptr)(ptr @counters, ptr %key)
  %c8 = getelementptr i8, ptr %c, i64 8
  store i64 1, ptr %c8, align 8
  %d = call i64 inttoptr (i64 3 to ptr)(ptr @deleted, ptr %key)
  %h = call ptr inttoptr (i64 1 to ptr)(ptr @hits, ptr %key)
  %old = atomicrmw add ptr %h, i64 1 seq_cst
  %l = call ptr inttoptr (i64 1 to ptr)(ptr @leaked, ptr %key)
  store ptr %l, ptr @slot
  %m = call ptr inttoptr (i64 1 to ptr)(ptr @memset, ptr %key)
  call void @llvm.memset.p0.i64(ptr %m, i8 0, i64 8, i1 false)
  call void @opaque(ptr @passed)
  %s = call ptr inttoptr (i64 1 to ptr)(ptr @scribbled, ptr %key)
  call void @opaque(ptr %s)
  ret i32 2
}

; C: return lookup(&zones, &a) == lookup(&zones, &b);
define i1 @compare_zones(ptr %ctx) section "xdp" {
entry:
  %a = alloca i32, align 4
  %b = alloca i32, align 4
  store i32 1, ptr %a, align 4
  store i32 2, ptr %b, align 4
  %x = call ptr inttoptr (i64 1 to ptr)(ptr @zones, ptr %a)
  %y = call ptr inttoptr (i64 1 to ptr)(ptr @zones, ptr %b)
  %same = icmp eq ptr %x, %y
  ret i1 %same
}

; C: int decide(const struct verdict *v) (global) / static int peek(...)
define i32 @decide(ptr nocapture readonly %v) {
  %x = load i32, ptr %v, align 4
  ret i32 %x
}

define internal i32 @peek(ptr nocapture readonly %v) {
  %x = load i32, ptr %v, align 4
  ret i32 %x
}

define i32 @to_functions(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 3, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @verdicts, ptr %key)
  %r = call i32 @decide(ptr %v)
  %w = call ptr inttoptr (i64 1 to ptr)(ptr @verdicts, ptr %key)
  %s = call i32 @peek(ptr %w)
  %sum = add i32 %r, %s
  ret i32 %sum
}

; C: static long (*lookup)(void *, const void *) = (void *)1;
define i32 @integer_test(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 3, ptr %key, align 4
  %found = call i64 inttoptr (i64 1 to ptr)(ptr @tested, ptr %key)
  %hit = icmp ne i64 %found, 0
  %r = zext i1 %hit to i32
  ret i32 %r
}
; C: port = lookup(&copied, &zero); lookup(&config, port) after a table
; pass rewrote the second lookup (its key read through an opaque copy); the
; same copy of a copiedwritten value is then written at offset 4.
define i32 @through_copies(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  store i32 0, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @copied, ptr %key)
  %k = call ptr asm "", "=r,0"(ptr %v) #0
  %x = load i32, ptr %k, align 4
  %w = call ptr inttoptr (i64 1 to ptr)(ptr @copiedwritten, ptr %key)
  %c = call ptr asm "", "=r,0"(ptr %w) #0
  %f = getelementptr i8, ptr %c, i64 4
  store i32 %x, ptr %f, align 4
  ret i32 %x
}

define i32 @padded_fields(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %proto = load i8, ptr %ctx, align 1
  store i8 %proto, ptr %key, align 4
  %addrp = getelementptr i8, ptr %ctx, i64 4
  %addr = load i32, ptr %addrp, align 4
  %keyaddr = getelementptr i8, ptr %key, i64 4
  store i32 %addr, ptr %keyaddr, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define i32 @padded_zeroed(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  call void @llvm.memset.p0.i64(ptr %key, i8 0, i64 8, i1 false)
  %proto = load i8, ptr %ctx, align 1
  store i8 %proto, ptr %key, align 4
  %addrp = getelementptr i8, ptr %ctx, i64 4
  %addr = load i32, ptr %addrp, align 4
  %keyaddr = getelementptr i8, ptr %key, i64 4
  store i32 %addr, ptr %keyaddr, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define i32 @padded_one_path(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  %proto = load i8, ptr %ctx, align 1
  %tcp = icmp eq i8 %proto, 6
  br i1 %tcp, label %zero, label %fill
zero:
  store i32 0, ptr %key, align 4
  br label %fill
fill:
  store i8 %proto, ptr %key, align 4
  %addrp = getelementptr i8, ptr %ctx, i64 4
  %addr = load i32, ptr %addrp, align 4
  %keyaddr = getelementptr i8, ptr %key, i64 4
  store i32 %addr, ptr %keyaddr, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define i32 @padded_lifetime(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  store i64 0, ptr %key, align 4
  call void @llvm.lifetime.start.p0(i64 8, ptr %key)
  %proto = load i8, ptr %ctx, align 1
  store i8 %proto, ptr %key, align 4
  %addrp = getelementptr i8, ptr %ctx, i64 4
  %addr = load i32, ptr %addrp, align 4
  %keyaddr = getelementptr i8, ptr %key, i64 4
  store i32 %addr, ptr %keyaddr, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define i32 @padded_by_call(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  call void @opaque(ptr %key)
  %proto = load i8, ptr %ctx, align 1
  store i8 %proto, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define internal i32 @padded_from_caller(ptr %key) {
entry:
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

@padded_global_key = internal constant [8 x i8] c"\06\00\00\00\0a\00\00\01", align 4

define i32 @padded_caller(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  call void @llvm.memset.p0.i64(ptr %key, i8 0, i64 8, i1 false)
  %r = call i32 @padded_from_caller(ptr %key)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr @padded_global_key)
  %hit = icmp ne ptr %v, null
  %g = zext i1 %hit to i32
  %sum = add i32 %r, %g
  ret i32 %sum
}

define i32 @padded_copied(ptr %ctx) section "xdp" {
entry:
  %fields = alloca [8 x i8], align 4
  %key = alloca [8 x i8], align 4
  %proto = load i8, ptr %ctx, align 1
  store i8 %proto, ptr %fields, align 4
  %addrp = getelementptr i8, ptr %ctx, i64 4
  %addr = load i32, ptr %addrp, align 4
  %fieldsaddr = getelementptr i8, ptr %fields, i64 4
  store i32 %addr, ptr %fieldsaddr, align 4
  call void @llvm.memcpy.p0.p0.i64(ptr %key, ptr %fields, i64 8, i1 false)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

define i32 @padded_from_packet(ptr %ctx) section "xdp" {
entry:
  %key = alloca [8 x i8], align 4
  call void @llvm.memcpy.p0.p0.i64(ptr %key, ptr %ctx, i64 8, i1 false)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @padded, ptr %key)
  %hit = icmp ne ptr %v, null
  %r = zext i1 %hit to i32
  ret i32 %r
}

declare void @llvm.lifetime.start.p0(i64, ptr)

attributes #0 = { memory(none) }
;--- state.json
{"tables": {"config": {"type": "hash", "key_size": 4, "value_size": 8, "max_entries": 8},
            "padded": {"type": "hash", "key_size": 8, "value_size": 4, "max_entries": 8},
            "flows": {"type": "hash", "key_size": 8, "value_size": 8, "max_entries": 8},
            "conntrack": {"type": "hash", "key_size": 4, "value_size": 4, "max_entries": 8}}}
