target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@flows = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@conntrack = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@counters = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@deleted = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@hits = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@leaked = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@memset = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@passed = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@scribbled = global { ptr, ptr } zeroinitializer, section ".maps", align 8
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
