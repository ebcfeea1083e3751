#!/bin/bash
# What adopting costs and gains per packet (docs/benchmarks.md): policy_fwd
# loaded and attached by bpftool (generic XDP, in a scratch namespace), then
# `morpheus run --adopt`; the owner's program run directly vs the hook
# (trampoline -> specialized version), then after kill -9 (trampoline ->
# owner), interleaved, bpftool prog run (BPF_PROG_TEST_RUN) ns/packet.
# Needs root and a build: BUILD (default the worktree's build/).
set -e
OUT=$(mktemp -d)
WT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$WT/build}
NS=adoptbench$$
PIN=/sys/fs/bpf/adoptbench$$
SOCK=/tmp/adoptbench$$.sock
OBJ=$BUILD/tests/kernel/policy_fwd_owner.o
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
bpftool prog load $OBJ $PIN/prog type xdp pinmaps $PIN/maps
# config: policy enabled, default pass; one policy entry (10.0.0.1:80/udp drop)
bpftool map update pinned $PIN/maps/config key 0 0 0 0 value 2 0 0 0 0 0 0 0
bpftool map update pinned $PIN/maps/policy key 10 0 0 1 0 80 17 0 value 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
OWNER=$(bpftool prog show pinned $PIN/prog | head -1 | cut -d: -f1)
ip netns exec $NS bpftool net attach xdpgeneric id $OWNER dev veth1
$BUILD/bin/morpheus run $WT/examples/policy_fwd.bpf.c --adopt veth1 --netns $NS --pin-dir $PIN/m --period 200ms --socket $SOCK --quiet > $OUT/run.log 2>&1 &
MPID=$!
sleep 8
HOOK=$(ip netns exec $NS bpftool net show dev veth1 -j | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[0]["xdp"][0]["id"])')
# a UDP packet to 10.0.0.2:80 (policy miss -> default pass)
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
