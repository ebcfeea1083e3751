target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8

; key: { u32 daddr; u16 dport } (6 bytes, 4-byte aligned)
define i32 @route(ptr %ctx) section "xdp" {
entry:
  %key = alloca [6 x i8], align 4
  %daddr = load i32, ptr %ctx, align 4
  store i32 %daddr, ptr %key, align 4
  %portp = getelementptr i8, ptr %ctx, i64 4
  %port = load i16, ptr %portp, align 2
  %keyport = getelementptr i8, ptr %key, i64 4
  store i16 %port, ptr %keyport, align 2
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %out = load i32, ptr %v, align 4
  ret i32 %out
miss:
  ret i32 1
}

