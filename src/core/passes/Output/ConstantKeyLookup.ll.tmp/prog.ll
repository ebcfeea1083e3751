target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8

declare void @scramble(ptr)

define i32 @read_config(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  store i64 -1, ptr %key, align 8
  store i32 0, ptr %key, align 8
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %flags = load i32, ptr %v, align 4
  %enabled = and i32 %flags, 4
  %on = icmp ne i32 %enabled, 0
  %verdict = select i1 %on, i32 2, i32 1
  ret i32 %verdict
miss:
  ret i32 0
}

define i32 @absent_key(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  store i64 7, ptr %key, align 8
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

define i32 @clobbered_key(ptr %ctx) section "xdp" {
entry:
  %key = alloca i64, align 8
  store i64 0, ptr %key, align 8
  call void @scramble(ptr %key)
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %key)
  %hit = icmp ne ptr %v, null
  %verdict = select i1 %hit, i32 2, i32 1
  ret i32 %verdict
}

