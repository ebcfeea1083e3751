#!/bin/bash
# What adopting costs and gains per packet (docs/benchmarks.md): an owner
# program loaded by bpftool and attached in a scratch namespace, then
# `morpheus run --adopt`; the owner's program run directly vs the hook
# (trampoline -> specialized version), then after kill -9 (trampoline ->
# owner), interleaved, bpftool prog run (BPF_PROG_TEST_RUN) ns/packet.
#   tools/bench/adoption_cost.sh [xdp]  policy_fwd, generic XDP (bpftool net attach)
#   tools/bench/adoption_cost.sh tc     tests/programs/tc_classifier.bpf.c on a
#                                       tcx ingress link (BPF_LINK_CREATE, pinned)
# Needs root and a build: BUILD (default the worktree's build/).
set -e
MODE=${1:-xdp}
case $MODE in xdp|tc) ;; *) echo "usage: $0 [xdp|tc]" >&2; exit 2 ;; esac
OUT=$(mktemp -d)
WT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$WT/build}
NS=adoptbench$$
PIN=/sys/fs/bpf/adoptbench$$
SOCK=/tmp/adoptbench$$.sock
cleanup() {
  [ -z "$MPID" ] || { kill $MPID; wait $MPID; } 2>/dev/null || true
  ip netns del $NS 2>/dev/null || true
  rm -rf $PIN $SOCK $OUT
}
trap cleanup EXIT
ip netns add $NS
ip -n $NS link add veth0 type veth peer name veth1
ip -n $NS link set veth0 up; ip -n $NS link set veth1 up
# bpffs, mounted as morpheus mounts it when it is not (a fresh boot)
mountpoint -q /sys/fs/bpf || mount -t bpf -o mode=0700 bpf /sys/fs/bpf
mkdir -p $PIN

# XDP: policy_fwd; config: policy enabled, default pass; one policy entry
# (10.0.0.1:80/udp drop); attached by bpftool (generic XDP).
owner_xdp() {
  SRC=$WT/examples/policy_fwd.bpf.c TARGET=veth1
  bpftool prog load $BUILD/tests/kernel/policy_fwd_owner.o $PIN/prog type xdp pinmaps $PIN/maps
  bpftool map update pinned $PIN/maps/config key 0 0 0 0 value 2 0 0 0 0 0 0 0
  bpftool map update pinned $PIN/maps/policy key 10 0 0 1 0 80 17 0 value 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
  ip netns exec $NS bpftool net attach xdpgeneric id $(owner_id) dev veth1
}
hook_xdp() {
  ip netns exec $NS bpftool net show dev veth1 -j | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[0]["xdp"][0]["id"])'
}

# TC: tc_classifier; config: mode 1 (drop blocked sources), mark 0, DSCP 10;
# one blocked source (10.0.0.200, reason 7). bpftool 7.1 cannot attach
# through tcx: the pinned program is attached to veth1's ingress by
# BPF_LINK_CREATE (BPF_TCX_INGRESS) from inside the namespace and the link
# pinned at $PIN/link, as a libbpf loader does.
owner_tc() {
  SRC=$WT/tests/programs/tc_classifier.bpf.c TARGET=veth1:ingress
  bpftool prog load $BUILD/tests/kernel/tc_classifier_owner.o $PIN/prog type tc pinmaps $PIN/maps
  bpftool map update pinned $PIN/maps/tc_config key 0 0 0 0 value 1 0 0 0 0 0 0 0 10 0 0 0
  bpftool map update pinned $PIN/maps/blocked_sources key 10 0 0 200 value 7 0 0 0
  python3 - $PIN/prog /run/netns/$NS veth1 $PIN/link <<'PY'
import ctypes, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def bpf(cmd, attr):  # bpf(2), x86_64
    fd = libc.syscall(321, cmd, ctypes.create_string_buffer(attr, 128), 128)
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"bpf cmd {cmd}")
    return fd
prog_pin, netns, dev, link_pin = (ctypes.create_string_buffer(a.encode()) for a in sys.argv[1:])
prog = bpf(7, struct.pack('QII', ctypes.addressof(prog_pin), 0, 0))  # BPF_OBJ_GET
with open(netns.value) as f:
    if libc.setns(f.fileno(), 0x40000000):  # CLONE_NEWNET
        raise OSError(ctypes.get_errno(), "setns")
link = bpf(28, struct.pack('IIII', prog, socket.if_nametoindex(dev.value.decode()), 46, 0))  # BPF_LINK_CREATE, BPF_TCX_INGRESS
bpf(6, struct.pack('QII', ctypes.addressof(link_pin), link, 0))  # BPF_OBJ_PIN
PY
}
hook_tc() {
  bpftool link show pinned $PIN/link -j | python3 -c 'import json,sys; print(json.load(sys.stdin)["prog_id"])'
}

owner_id() { bpftool prog show pinned $PIN/prog | head -1 | cut -d: -f1; }
owner_$MODE
OWNER=$(owner_id)
$BUILD/bin/morpheus run $SRC --adopt $TARGET --netns $NS --pin-dir $PIN/m --period 200ms --socket $SOCK --quiet > $OUT/run.log 2>&1 &
MPID=$!
sleep 8
HOOK=$(hook_$MODE)
# a UDP packet from 10.0.0.100 to 10.0.0.2:80 (XDP: policy miss -> default
# pass; TC: source not blocked -> DSCP rewritten, TC_ACT_OK)
python3 - > $OUT/pkt <<'PY'
import struct,sys
eth=b'\x02'*6+b'\x04'*6+b'\x08\x00'
ip=struct.pack('!BBHHHBBH4s4s',0x45,0,20+8+18,1,0,64,17,0,bytes([10,0,0,100]),bytes([10,0,0,2]))
udp=struct.pack('!HHHH',1234,80,8+18,0)
sys.stdout.buffer.write(eth+ip+udp+b'\0'*18)
PY
# The owner's program and the hook, 7 rounds interleaved: "ID ns/packet".
interleaved() {
  for i in 1 2 3 4 5 6 7; do
    for which in $OWNER $HOOK; do
      d=$(bpftool prog run id $which data_in $OUT/pkt repeat 2000000 | grep -o 'duration[^:]*: [0-9]*' | grep -o '[0-9]*')
      echo "$which $d"
    done
  done
}
echo "owner id $OWNER hook id $HOOK load $(cut -d' ' -f1-3 /proc/loadavg)"
interleaved
grep -c installed $OUT/run.log || true
# kill -9: the kernel empties Morpheus's array, the hook runs the owner's
# program through the trampoline: its cost alone.
kill -9 $MPID; wait $MPID 2>/dev/null || true; MPID=
echo "after kill -9, load $(cut -d' ' -f1-3 /proc/loadavg)"
interleaved
