target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@acl = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@flows = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @lookup_acl(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @acl, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  %verdict = load i32, ptr %v, align 4
  ret i32 %verdict
miss:
  ret i32 2
}

; flows is written through the lookup result: read-write, never eliminated.
define i32 @count_flows(ptr %ctx) section "xdp" {
entry:
  %key = alloca i32, align 4
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %key, align 4
  %v = call ptr inttoptr (i64 1 to ptr)(ptr @flows, ptr %key)
  %hit = icmp ne ptr %v, null
  br i1 %hit, label %found, label %miss
found:
  store i32 1, ptr %v, align 4
  ret i32 2
miss:
  ret i32 2
}

