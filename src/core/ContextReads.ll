; What program entries read of their context, and the values their tests
; single out: a compare (either side of an ordering), a switch, through a
; mask (a constant inside it), a shift, an addition; through the program's
; own functions and BPF CO-RE field accesses. A context pointer the
; analysis cannot follow (stored and read back) makes it say so: callers
; then draw every field.
;
; From (clang-19 -O2 -target bpf -emit-llvm -S; the CO-RE entry by hand):
;   static __attribute__((noinline)) int by_priority(struct __sk_buff *skb) {
;     return skb->priority > 6 ? TC_ACT_SHOT : TC_ACT_OK;
;   }
;   SEC("tc") int health(struct __sk_buff *skb) {
;     if (skb->mark != 0x4843) return TC_ACT_OK;
;     if ((skb->cb[1] >> 8) == 3) return TC_ACT_SHOT;
;     switch (skb->tc_index) { case 4: case 9: return TC_ACT_SHOT; }
;     return by_priority(skb);
;   }
;   SEC("xdp") int queue(struct xdp_md *ctx) {
;     return ctx->rx_queue_index + 1 == 3 ? XDP_DROP : XDP_PASS;
;   }
;   SEC("xdp") int escapes(struct xdp_md *ctx) {
;     volatile struct holder h = { ctx }; struct xdp_md *back = h.ctx;
;     return back->ingress_ifindex;
;   }
;
; RUN: morpheus-opt %s --print-context-reads | FileCheck %s

; mark (offset 8) against 0x4843; cb[1] (52) masked, against 3 << 8;
; tc_index (44) switched on; priority (32) read in a function the entry
; calls, ordered against 6.
; CHECK: context health offset 8 width 4 18499
; CHECK-NEXT: context health offset 32 width 4 5 6 7
; CHECK-NEXT: context health offset 44 width 4 4 9
; CHECK-NEXT: context health offset 52 width 4 768
; CHECK-NOT: context health escapes
; rx_queue_index (16) + 1 == 3: the field is 2.
; CHECK-NEXT: context queue offset 16 width 4 2
; CHECK-NOT: context queue escapes
; A CO-RE access (struct __sk_buff member 2 = mark, at 8).
; CHECK-NEXT: context relocatable offset 8 width 4 7
; Stored and read back: lost.
; CHECK-NEXT: context escapes escapes
; CHECK-NOT: context

target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

%struct.skb_head = type { i32, i32, i32 }

define i32 @health(ptr %skb) section "tc" {
  %markp = getelementptr inbounds i8, ptr %skb, i64 8
  %mark = load i32, ptr %markp, align 8
  %marked = icmp eq i32 %mark, 18499
  br i1 %marked, label %probe, label %done

probe:
  %cbp = getelementptr inbounds i8, ptr %skb, i64 52
  %cb = load i32, ptr %cbp, align 4
  %high = and i32 %cb, -256
  %three = icmp eq i32 %high, 768
  br i1 %three, label %done, label %index

index:
  %indexp = getelementptr inbounds i8, ptr %skb, i64 44
  %tcindex = load i32, ptr %indexp, align 4
  switch i32 %tcindex, label %priority [
    i32 4, label %done
    i32 9, label %done
  ]

priority:
  %verdict = call i32 @by_priority(ptr %skb)
  br label %done

done:
  %result = phi i32 [ %verdict, %priority ], [ 0, %0 ], [ 2, %probe ], [ 2, %index ], [ 2, %index ]
  ret i32 %result
}

define internal i32 @by_priority(ptr %skb) {
  %priorityp = getelementptr inbounds i8, ptr %skb, i64 32
  %priority = load i32, ptr %priorityp, align 8
  %high = icmp ugt i32 %priority, 6
  %verdict = select i1 %high, i32 2, i32 0
  ret i32 %verdict
}

define i32 @queue(ptr %ctx) section "xdp" {
  %queuep = getelementptr inbounds i8, ptr %ctx, i64 16
  %queue = load i32, ptr %queuep, align 4
  %next = add i32 %queue, 1
  %control = icmp eq i32 %next, 3
  %verdict = select i1 %control, i32 1, i32 2
  ret i32 %verdict
}

define i32 @relocatable(ptr %skb) section "tc" {
  %markp = call ptr @llvm.preserve.struct.access.index.p0.p0(ptr elementtype(%struct.skb_head) %skb, i32 2, i32 2)
  %mark = load i32, ptr %markp, align 4
  %seven = icmp eq i32 %mark, 7
  %verdict = select i1 %seven, i32 2, i32 0
  ret i32 %verdict
}

define i32 @escapes(ptr %ctx) section "xdp" {
  %holder = alloca ptr, align 8
  store ptr %ctx, ptr %holder, align 8
  %back = load volatile ptr, ptr %holder, align 8
  %ifindexp = getelementptr inbounds i8, ptr %back, i64 12
  %ifindex = load i32, ptr %ifindexp, align 4
  ret i32 %ifindex
}

declare ptr @llvm.preserve.struct.access.index.p0.p0(ptr, i32 immarg, i32 immarg)
